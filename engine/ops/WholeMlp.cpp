#include "ops/WholeMlp.h"

#include "gl/check.h"

#include <algorithm>
#include <cstring>

namespace glnet {
namespace {

// Every width the shader keeps in shared memory: the inputs and each layer's outputs but the last.
std::size_t widestActivation(const Network& network) {
  std::size_t widest = network.inputs();
  for (std::size_t l = 0; l + 1 < network.layers.size(); ++l) widest = std::max<std::size_t>(widest, network.layers[l].outputs);
  return widest;
}

}  // namespace

bool WholeMlpOp::fits(const Network& network, std::size_t batch, const Limits& limits) {
  if (batch == 0 || batch > largestBatch || network.layers.empty()) return false;
  for (const LayerSpec& layer : network.layers) {
    if (layer.kind != LayerSpec::Kind::dense) return false;
  }
  // The activations, one partial sum per invocation of the group, and the softmax's maximum and sum.
  const std::size_t invocations = static_cast<std::size_t>(limits.groupSize());
  const std::size_t sharedBytes = (2 * widestActivation(network) + invocations + 2) * sizeof(float);
  return sharedBytes <= static_cast<std::size_t>(limits.maxSharedMemoryBytes);
}

WholeMlpOp::WholeMlpOp(ProgramCache& programs, const Network& network) : input_(network.input), programs_(&programs) {
  // The widths head the buffer as uint bits (the shader reads them with floatBitsToUint).
  std::vector<float> packed(network.layers.size() + 1);
  const auto putWidth = [&packed](std::size_t at, std::uint32_t width) { std::memcpy(&packed[at], &width, sizeof width); };
  putWidth(0, static_cast<std::uint32_t>(network.inputs()));
  std::size_t inputs = network.inputs();
  for (std::size_t l = 0; l < network.layers.size(); ++l) {
    const LayerSpec& layer = network.layers[l];
    putWidth(l + 1, layer.outputs);
    GLNET_ASSERT(layer.kind == LayerSpec::Kind::dense, "the one-dispatch MLP takes dense layers only");
    const std::vector<float>& weight = network.parameters.at(layer.name + ".weight").values;  // [out × in]
    const std::vector<float>& bias = network.parameters.at(layer.name + ".bias").values;
    const std::size_t outputs = layer.outputs, first = packed.size();
    packed.resize(first + inputs * outputs);
    for (std::size_t o = 0; o < outputs; ++o) {
      for (std::size_t i = 0; i < inputs; ++i) packed[first + i * outputs + o] = weight[o * inputs + i];
    }
    packed.insert(packed.end(), bias.begin(), bias.end());
    inputs = outputs;
  }
  weights_ = Buffer::of(packed);
  defines_ = {{"MLP_LAYERS", std::to_string(network.layers.size())},
              {"MLP_MAX_WIDTH", std::to_string(widestActivation(network))},
              {"ACTIVATION", std::to_string(static_cast<int>(network.activation))}};
}

Dispatch WholeMlpOp::operator()(const BufferView& pixels, const BufferView& classes, const BufferView* probabilities,
                                std::uint32_t batch, const Uniform& first) const {
  std::vector<ShaderDefine> defines = defines_;
  if (probabilities) defines.push_back({"MLP_PROBABILITIES", "1"});
  Dispatch dispatch;
  dispatch.program = &programs_->get("WholeMlp.glsl", defines);
  dispatch.label = "whole MLP";
  dispatch.buffers = {{0, pixels, Access::read}, {1, weights_, Access::read}, {2, classes, Access::write}};
  if (probabilities) dispatch.buffers.push_back({3, *probabilities, Access::write});
  dispatch.uniforms = {Uniform::f32(0, input_.mean), Uniform::f32(1, 1.0f / input_.std), first};
  dispatch.groups = {batch, 1, 1};
  return dispatch;
}

}  // namespace glnet
