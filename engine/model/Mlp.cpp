#include "model/Mlp.h"

#include "gl/check.h"

#include <cmath>
#include <random>
#include <set>
#include <sstream>

namespace glnet {

Activation parseActivation(const std::string& name) {
  if (name == "relu") return Activation::relu;
  if (name == "tanh") return Activation::tanh;
  if (name == "sigmoid") return Activation::sigmoid;
  if (name == "none") return Activation::none;
  throw UsageError("unknown activation '" + name + "' (relu, tanh, sigmoid or none)");
}

const char* activationName(Activation activation) {
  switch (activation) {
    case Activation::relu: return "relu";
    case Activation::tanh: return "tanh";
    case Activation::sigmoid: return "sigmoid";
    case Activation::none: return "none";
  }
  return "none";
}

std::vector<int> parseArchitecture(const std::string& text) {
  std::vector<int> sizes;
  std::istringstream parts(text);
  std::string part;
  while (std::getline(parts, part, '-')) {
    char* end = nullptr;
    const long size = std::strtol(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || size < 1 || size > (1 << 20)) {
      throw UsageError("architecture '" + text + "' is not layer sizes joined by '-', such as 784-128-10");
    }
    sizes.push_back(static_cast<int>(size));
  }
  if (sizes.size() < 2) throw UsageError("architecture '" + text + "' needs at least an input and an output size");
  return sizes;
}

std::string MlpModel::architecture() const {
  std::string text = std::to_string(inputs());
  for (const DenseWeights& layer : layers) text += "-" + std::to_string(layer.outputs);
  return text;
}

MlpModel MlpModel::random(const std::vector<int>& sizes, Activation activation, std::uint32_t seed) {
  GLNET_ASSERT(sizes.size() >= 2, "an MLP needs an input and an output size");
  MlpModel model;
  model.activation = activation;
  std::mt19937 random(seed);
  for (std::size_t i = 0; i + 1 < sizes.size(); ++i) {
    DenseWeights layer;
    layer.inputs = sizes[i];
    layer.outputs = sizes[i + 1];
    const float bound = 1.0f / std::sqrt(static_cast<float>(layer.inputs));
    std::uniform_real_distribution<float> uniform(-bound, bound);
    layer.weight.resize(static_cast<std::size_t>(layer.inputs) * layer.outputs);
    layer.bias.resize(static_cast<std::size_t>(layer.outputs));
    for (float& value : layer.weight) value = uniform(random);
    for (float& value : layer.bias) value = uniform(random);
    model.layers.push_back(std::move(layer));
  }
  return model;
}

MlpModel MlpModel::fromTensors(const TensorFile& file, const std::string& path) {
  MlpModel model;
  std::set<std::string> used;
  for (int index = 1;; ++index) {
    const std::string prefix = "fc" + std::to_string(index);
    const auto weight = file.tensors.find(prefix + ".weight");
    const auto bias = file.tensors.find(prefix + ".bias");
    if (weight == file.tensors.end()) {
      if (bias != file.tensors.end()) throw Error(path + ": " + prefix + ".bias has no " + prefix + ".weight");
      break;
    }
    if (bias == file.tensors.end()) throw Error(path + ": " + prefix + ".weight has no " + prefix + ".bias");
    const auto& weightShape = weight->second.shape;
    const auto& biasShape = bias->second.shape;
    if (weightShape.size() != 2) throw Error(path + ": tensor " + prefix + ".weight must be [out, in], has rank " + std::to_string(weightShape.size()));
    if (biasShape.size() != 1 || biasShape[0] != weightShape[0]) {
      throw Error(path + ": tensor " + prefix + ".bias must be [" + std::to_string(weightShape[0]) + "]");
    }
    if (weightShape[0] < 1 || weightShape[1] < 1) throw Error(path + ": tensor " + prefix + ".weight is empty");
    if (!model.layers.empty() && weightShape[1] != model.layers.back().outputs) {
      throw Error(path + ": tensor " + prefix + ".weight takes " + std::to_string(weightShape[1]) + " inputs but fc" +
                  std::to_string(index - 1) + " gives " + std::to_string(model.layers.back().outputs));
    }
    DenseWeights layer;
    layer.outputs = static_cast<int>(weightShape[0]);
    layer.inputs = static_cast<int>(weightShape[1]);
    layer.weight = weight->second.values;
    layer.bias = bias->second.values;
    model.layers.push_back(std::move(layer));
    used.insert({prefix + ".weight", prefix + ".bias"});
  }
  if (model.layers.empty()) throw Error(path + ": no tensor fc1.weight; not an MLP model (expected fc1.weight, fc1.bias, fc2...)");
  for (const auto& [name, tensor] : file.tensors) {
    if (!used.count(name)) throw Error(path + ": unexpected tensor " + name + " in an MLP model");
  }
  const auto metadata = [&](const std::string& key) {
    const auto found = file.metadata.find(key);
    return found == file.metadata.end() ? std::string() : found->second;
  };
  if (const std::string architecture = metadata("architecture");
      !architecture.empty() && architecture != model.architecture()) {
    throw Error(path + ": metadata says architecture " + architecture + " but the tensors make " + model.architecture());
  }
  try {
    if (const std::string activation = metadata("activation"); !activation.empty()) model.activation = parseActivation(activation);
    if (const std::string mean = metadata("input_mean"); !mean.empty()) model.input.mean = std::stof(mean);
    if (const std::string std = metadata("input_std"); !std.empty()) model.input.std = std::stof(std);
  } catch (const std::exception& error) {
    throw Error(path + ": bad metadata (" + error.what() + ")");
  }
  if (!(model.input.std > 0.0f)) throw Error(path + ": metadata input_std must be positive");
  return model;
}

TensorFile MlpModel::toTensors() const {
  TensorFile file;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const std::string prefix = "fc" + std::to_string(i + 1);
    file.tensors[prefix + ".weight"] = {{layers[i].outputs, layers[i].inputs}, layers[i].weight};
    file.tensors[prefix + ".bias"] = {{layers[i].outputs}, layers[i].bias};
  }
  std::ostringstream mean, std;
  mean.precision(9);
  std.precision(9);
  mean << input.mean;
  std << input.std;
  file.metadata = {{"architecture", architecture()}, {"activation", activationName(activation)},
                   {"input", "uint8 pixels, (x/255 - input_mean) / input_std"}, {"input_mean", mean.str()},
                   {"input_std", std.str()}, {"format", "glnet-mlp"}, {"glnet_version", GLNET_VERSION}};
  return file;
}

}  // namespace glnet
