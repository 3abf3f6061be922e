// A multi-layer perceptron: dense layers fc1..fcN with one activation between them and logits out.
// Names and layouts follow PyTorch (fcK.weight [out, in], fcK.bias [out]) so state_dicts load as is.
#pragma once

#include "model/Safetensors.h"

#include <cstdint>
#include <string>
#include <vector>

namespace glnet {

enum class Activation { none, relu, tanh, sigmoid };
Activation parseActivation(const std::string& name);  // throws UsageError
const char* activationName(Activation activation);

// "784-128-10" → {784, 128, 10}; throws UsageError naming what is wrong.
std::vector<int> parseArchitecture(const std::string& text);

struct DenseWeights {
  int inputs = 0;
  int outputs = 0;
  std::vector<float> weight;  // outputs × inputs
  std::vector<float> bias;    // outputs
};

// How raw uint8 pixels become the first layer's input: (x/255 − mean) / std.
struct InputFormat {
  float mean = 0.0f;
  float std = 1.0f;
};

struct MlpModel {
  std::vector<DenseWeights> layers;
  Activation activation = Activation::relu;
  InputFormat input;

  int inputs() const { return layers.front().inputs; }
  int outputs() const { return layers.back().outputs; }
  std::string architecture() const;

  // PyTorch's nn.Linear initialisation (uniform in ±1/sqrt(inputs)) from `seed`.
  static MlpModel random(const std::vector<int>& sizes, Activation activation, std::uint32_t seed);
  // Builds the model from a file's shapes, checking names, ranks, the chain of sizes and the metadata.
  static MlpModel fromTensors(const TensorFile& file, const std::string& path);
  static MlpModel load(const std::string& path) { return fromTensors(readSafetensors(path), path); }
  TensorFile toTensors() const;
  void save(const std::string& path) const { writeSafetensors(path, toTensors()); }
};

}  // namespace glnet
