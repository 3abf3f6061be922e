// How a described layer becomes ops (model/NetDescription.cpp's kind table): what each kind's build function is given,
// and the build functions of the kinds that make up transformers (model/SequenceLayers.cpp).
#pragma once

#include "base/check.h"
#include "model/NetDescription.h"

#include <functional>
#include <string>
#include <vector>

namespace glnet {

// What a kind's build function needs: the layer, its inputs' tensors (the shape of the first) and where parameters
// come from. Shape errors name the layer.
struct LayerBuild {
  const LayerDescription& layer;
  Graph& graph;
  const std::vector<Tensor>& inputs;
  const Shape& shape;
  bool training;
  const ParameterSource& parameter;
  std::function<Error(const std::string&)> refuse;

  std::vector<Tensor> weightAndBias(const Shape& weight) const {
    const std::size_t fanIn = elementCount(weight) / weight[0];
    return {parameter(layer.name + ".weight", weight, false, Initialisation::uniformFanIn, fanIn),
            parameter(layer.name + ".bias", {weight[0]}, false, Initialisation::uniformFanIn, fanIn)};
  }
};

Tensor buildLinear(const LayerBuild& b);
Tensor buildAttention(const LayerBuild& b);
Tensor buildLayernorm(const LayerBuild& b);
Tensor buildTokens(const LayerBuild& b);
Tensor buildPosition(const LayerBuild& b);
Tensor buildEmbedding(const LayerBuild& b);
Tensor buildMask(const LayerBuild& b);
Tensor buildFirst(const LayerBuild& b);

}  // namespace glnet
