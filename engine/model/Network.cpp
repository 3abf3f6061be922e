#include "model/Network.h"

#include "importer/Onnx.h"
#include "base/check.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <set>
#include <sstream>

namespace glnet {
namespace {

std::string metadataOf(const TensorFile& file, const std::string& key) {
  const auto found = file.metadata.find(key);
  return found == file.metadata.end() ? std::string() : found->second;
}

// Appends the parameters of a layer (weight of `weightShape`, bias [weightShape[0]]) in graph order.
void addParameters(Network& network, const std::string& name, const Shape& weightShape, std::mt19937* random) {
  const std::size_t fanIn = elementCount(weightShape) / weightShape[0];
  const float bound = 1.0f / std::sqrt(static_cast<float>(fanIn));
  std::uniform_real_distribution<float> uniform(-bound, bound);
  HostTensor weight{{weightShape.begin(), weightShape.end()}, std::vector<float>(elementCount(weightShape))};
  HostTensor bias{{weightShape[0]}, std::vector<float>(weightShape[0])};
  if (random) {
    for (float& value : weight.values) value = uniform(*random);
    for (float& value : bias.values) value = uniform(*random);
  }
  network.parameterNames.push_back(name + ".weight");
  network.parameterNames.push_back(name + ".bias");
  network.parameters[name + ".weight"] = std::move(weight);
  network.parameters[name + ".bias"] = std::move(bias);
}

// The MNIST CNN: every convolution is followed by the activation and 2×2 pooling, the dense layers by the
// activation except the last. `convChannels`/`denseOutputs` come from the architecture or a file's shapes.
void buildCnn(Network& network, const std::vector<std::pair<std::uint32_t, std::uint32_t>>& convs,
              const std::vector<std::uint32_t>& denseOutputs, std::mt19937* random) {
  std::uint32_t channels = network.inputShape[0], side = network.inputShape[1];
  for (std::size_t i = 0; i < convs.size(); ++i) {
    const auto [outputs, kernel] = convs[i];
    const std::string name = "conv" + std::to_string(i + 1);
    network.layers.push_back({LayerSpec::Kind::conv, name, outputs, kernel, (kernel - 1) / 2, network.activation});
    addParameters(network, name, {outputs, channels, kernel, kernel}, random);
    network.layers.push_back({LayerSpec::Kind::pool, "", 0, 0, 0, Activation::none});
    channels = outputs;
    side /= 2;
  }
  network.layers.push_back({LayerSpec::Kind::flatten, "", 0, 0, 0, Activation::none});
  std::uint32_t inputs = channels * side * side;
  for (std::size_t i = 0; i < denseOutputs.size(); ++i) {
    const std::string name = "fc" + std::to_string(i + 1);
    const bool last = i + 1 == denseOutputs.size();
    network.layers.push_back({LayerSpec::Kind::dense, name, denseOutputs[i], 0, 0, last ? Activation::none : network.activation});
    addParameters(network, name, {denseOutputs[i], inputs}, random);
    inputs = denseOutputs[i];
  }
}

// One tensor lives in one GPU buffer bound as one storage block, which no current driver offers beyond
// 2^31 - 1 bytes (NVIDIA and Mesa report exactly that at most); refused before any allocation.
constexpr std::uint64_t largestTensorBytes = (std::uint64_t{1} << 31) - 1;

void buildMlp(Network& network, const std::vector<int>& sizes, std::mt19937* random) {
  for (std::size_t i = 0; i + 1 < sizes.size(); ++i) {
    const std::uint64_t bytes = std::uint64_t(sizes[i]) * std::uint64_t(sizes[i + 1]) * sizeof(float);
    if (bytes > largestTensorBytes) {
      throw Error("layer fc" + std::to_string(i + 1) + " of " + network.architecture + " needs a " +
                  std::to_string(sizes[i + 1]) + " x " + std::to_string(sizes[i]) + " weight of " + std::to_string(bytes) +
                  " bytes; one tensor must fit one GPU storage block, at most " + std::to_string(largestTensorBytes) +
                  " bytes on any current driver");
    }
  }
  for (std::size_t i = 0; i + 1 < sizes.size(); ++i) {
    const std::string name = "fc" + std::to_string(i + 1);
    const bool last = i + 2 == sizes.size();
    const auto outputs = static_cast<std::uint32_t>(sizes[i + 1]);
    network.layers.push_back({LayerSpec::Kind::dense, name, outputs, 0, 0, last ? Activation::none : network.activation});
    addParameters(network, name, {outputs, static_cast<std::uint32_t>(sizes[i])}, random);
  }
}

}  // namespace

InputFormat inputFormatOf(const std::map<std::string, std::string>& metadata, const std::string& path) {
  InputFormat format;
  const auto finite = [&](const char* key, std::vector<float>& values) {
    const auto found = metadata.find(key);
    if (found == metadata.end() || found->second.empty()) return;
    values.clear();
    std::istringstream parts(found->second);
    std::string part;
    while (std::getline(parts, part, ',')) {
      char* end = nullptr;
      const double parsed = std::strtod(part.c_str(), &end);
      if (part.empty() || *end != '\0' || !std::isfinite(parsed) || std::abs(parsed) > 1e30 || values.size() == mostScaledChannels) {
        throw Error(path + ": metadata " + key + " is not a finite number or a list of 1 to 4 of them");
      }
      values.push_back(static_cast<float>(parsed));
    }
    if (values.empty()) throw Error(path + ": metadata " + key + " is not a finite number or a list of 1 to 4 of them");
  };
  finite("input_mean", format.mean);
  finite("input_std", format.std);
  if (format.mean.size() != format.std.size()) {
    if (format.mean.size() == 1) format.mean.assign(format.std.size(), format.mean[0]);
    if (format.std.size() == 1) format.std.assign(format.mean.size(), format.std[0]);
    if (format.mean.size() != format.std.size()) throw Error(path + ": metadata input_mean and input_std give different numbers of channels");
  }
  for (const float s : format.std) {
    if (!(s > 0.0f)) throw Error(path + ": metadata input_std must be positive");
  }
  return format;
}

std::vector<std::string> classNamesOf(const std::map<std::string, std::string>& metadata, std::uint32_t classes, const std::string& path) {
  std::vector<std::string> names;
  const auto found = metadata.find("labels");
  if (found == metadata.end()) return names;
  std::istringstream lines(found->second);
  for (std::string line; std::getline(lines, line);) names.push_back(line);
  if (names.size() != classes) {
    throw Error(path + ": metadata labels names " + std::to_string(names.size()) + " classes; the model has " + std::to_string(classes));
  }
  return names;
}

std::map<std::string, std::string> Network::usageMetadata() const {
  std::map<std::string, std::string> metadata = {
      {"architecture", architecture},
      {"input", readsTokenIds() ? "token ids, whole numbers held as floats, below the embedding's rows"
                                : "uint8 pixels, (x/255 - input_mean) / input_std (per channel when they are lists)"},
      {"input_mean", formatValues(input.mean)},
      {"input_std", formatValues(input.std)}};
  recordPreprocessing(images, metadata);
  if (!classNames.empty()) {
    std::string lines;
    for (const std::string& name : classNames) lines += name + "\n";
    metadata["labels"] = lines;
  }
  return metadata;
}

std::string formatValues(const std::vector<float>& values) {
  std::ostringstream text;
  text.precision(9);
  for (std::size_t i = 0; i < values.size(); ++i) text << (i ? "," : "") << values[i];
  return text.str();
}

namespace {

// PyTorch's nn.Sequential names its layers by position ("0.weight", "2.weight", or "net.0.weight" inside a
// module): when a file has no fc1/conv1 tensors but only such names, under one prefix, they are renamed in
// index order, rank-4 weights to conv1, conv2, ... and rank-2 weights to fc1, fc2, ...
TensorFile withSequentialNamesRenamed(const TensorFile& file) {
  if (file.tensors.count("fc1.weight") || file.tensors.count("conv1.weight")) return file;
  std::string prefix;
  std::map<long, std::pair<const HostTensor*, const HostTensor*>> layers;  // index → weight, bias
  for (const auto& [name, tensor] : file.tensors) {
    const std::size_t kindDot = name.rfind('.');
    if (kindDot == std::string::npos || kindDot == 0) return file;
    const std::string kind = name.substr(kindDot + 1);
    const std::size_t indexStart = name.rfind('.', kindDot - 1) == std::string::npos ? 0 : name.rfind('.', kindDot - 1) + 1;
    const std::string index = name.substr(indexStart, kindDot - indexStart);
    if ((kind != "weight" && kind != "bias") || index.empty() || index.size() > 6 ||
        !std::all_of(index.begin(), index.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return file;
    }
    if (layers.empty()) prefix = name.substr(0, indexStart);
    if (name.substr(0, indexStart) != prefix) return file;
    auto& layer = layers[std::stol(index)];
    (kind == "weight" ? layer.first : layer.second) = &tensor;
  }
  TensorFile renamed;
  renamed.metadata = file.metadata;
  int convs = 0, denses = 0;
  for (const auto& [index, layer] : layers) {
    const auto& [weight, bias] = layer;
    if (!weight || !bias || (weight->shape.size() != 4 && weight->shape.size() != 2)) return file;
    const std::string name = weight->shape.size() == 4 ? "conv" + std::to_string(++convs) : "fc" + std::to_string(++denses);
    renamed.tensors[name + ".weight"] = *weight;
    renamed.tensors[name + ".bias"] = *bias;
  }
  return renamed;
}

}  // namespace

// Deeper MLPs than this are no use on MNIST-sized inputs, and each layer costs programs and dispatches.
constexpr std::size_t maxArchitectureSizes = 257;

std::vector<int> parseArchitecture(const std::string& text) {
  // Strictly canonical, so that the string written into a model file is the one its tensors make again:
  // decimal sizes without signs or leading zeros, one '-' between each.
  const auto refuse = [&text](const std::string& why) {
    return UsageError("architecture '" + text + "' " + why + "; give cnn, or layer sizes joined by '-', such as 784-128-10");
  };
  std::vector<int> sizes;
  std::size_t start = 0;
  for (;;) {
    const std::size_t end = std::min(text.find('-', start), text.size());
    const std::string part = text.substr(start, end - start);
    if (part.empty()) throw refuse("has an empty layer size");
    if (!std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; })) throw refuse("has a size that is not a number");
    if (part[0] == '0') throw refuse("has a size that is zero or starts with 0");
    if (part.size() > 7 || std::stol(part) > (1 << 20)) throw refuse("has a size over " + std::to_string(1 << 20));
    sizes.push_back(std::stoi(part));
    if (sizes.size() > maxArchitectureSizes) throw refuse("has more than " + std::to_string(maxArchitectureSizes - 1) + " layers");
    if (end == text.size()) break;
    start = end + 1;
  }
  if (sizes.size() < 2) throw refuse("needs at least an input and an output size");
  return sizes;
}

std::uint32_t Network::classes() const { return !imported && !description ? layers.back().outputs : graphClasses; }

Network Network::fromOnnx(const std::string& path) {
  ParsedOnnx parsed(path);
  const OnnxModel model = readOnnx(parsed, 0);
  const Shape& in = model.graph.tensor(model.input).shape;
  const Shape& out = model.graph.tensor(model.logits).shape;
  if (out.size() != 2) throw Error(path + ": the output " + model.outputName + " is " + describe(out) + ", not class scores [batch, classes]");
  Network network;
  network.architecture = "onnx";
  network.imported = std::move(parsed);
  network.graphClasses = out[1];
  network.inputShape.assign(in.begin() + 1, in.end());
  network.activationRecorded = true;  // the graph says what it computes
  network.inputFormatRecorded = model.metadata.count("input_mean") && model.metadata.count("input_std");
  network.input = inputFormatOf(model.metadata, path);
  network.images = preprocessingOf(model.metadata, network.inputShape, true, path);
  network.classNames = classNamesOf(model.metadata, network.graphClasses, path);
  return network;
}

Network Network::create(const std::string& architecture, Activation activation, std::uint32_t seed) {
  Network network;
  network.architecture = architecture;
  network.activation = activation;
  std::mt19937 random(seed);
  if (const NetDescription* builtin = builtinNet(architecture)) {
    network = fromDescription(*builtin, seed, "built-in network " + architecture);
    network.activation = activation;
    return network;
  }
  if (architecture == "cnn") {
    network.inputShape = {1, mnistSide, mnistSide};
    buildCnn(network, {{32, 5}, {64, 5}}, {512, 10}, &random);
  } else {
    const std::vector<int> sizes = parseArchitecture(architecture);
    network.inputShape = {static_cast<std::uint32_t>(sizes.front())};
    buildMlp(network, sizes, &random);
  }
  network.images = defaultPreprocessing(network.inputShape, false);
  return network;
}

Network Network::fromDescription(const NetDescription& description, std::uint32_t seed, const std::string& source) {
  Network network;
  network.architecture = description.name.empty() ? "net" : description.name;
  network.description = description;
  network.inputShape = description.input;
  std::mt19937 random(seed);
  Graph graph;
  Shape imageShape{1};
  imageShape.insert(imageShape.end(), description.input.begin(), description.input.end());
  const Tensor logits = buildLayers(description, graph, graph.input("images", imageShape), true,
                                    [&](const std::string& name, const Shape& shape, bool state, Initialisation init, std::size_t fanIn) {
                                      if (std::uint64_t{elementCount(shape)} * sizeof(float) > largestTensorBytes) {
                                        throw Error(source + ": tensor " + name + " " + describe(shape) + " is over " +
                                                    std::to_string(largestTensorBytes) + " bytes, more than one GPU storage block holds");
                                      }
                                      std::vector<float> values(elementCount(shape), init == Initialisation::ones ? 1.0f : 0.0f);
                                      if (init == Initialisation::uniformFanIn || init == Initialisation::xavierUniform) {
                                        const float bound = std::sqrt((init == Initialisation::xavierUniform ? 6.0f : 1.0f) / static_cast<float>(fanIn));
                                        std::uniform_real_distribution<float> uniform(-bound, bound);
                                        for (float& value : values) value = uniform(random);
                                      } else if (init == Initialisation::normal) {
                                        std::normal_distribution<float> normal(0.0f, 1.0f);
                                        for (float& value : values) value = normal(random);
                                      }
                                      network.parameterNames.push_back(name);
                                      network.parameters[name] = HostTensor{{shape.begin(), shape.end()}, values};
                                      return state ? graph.state(name, shape, std::move(values)) : graph.parameter(name, shape, std::move(values));
                                    },
                                    source);
  const Shape& out = graph.tensor(logits).shape;
  if (out.size() != 2) throw Error(source + ": the last layer gives " + describe(out) + " per batch of one, not class scores [N, classes]");
  network.graphClasses = out[1];
  network.images = defaultPreprocessing(network.inputShape, false);
  return network;
}

Network Network::fromTensors(const TensorFile& given, const std::string& path) {
  if (const std::string text = metadataOf(given, "network"); !text.empty()) {
    Network network = fromDescription(parseNetDescription(text, path + " (metadata network)"), 0, path);
    network.input = inputFormatOf(given.metadata, path);
    network.inputFormatRecorded = given.metadata.count("input_mean") && given.metadata.count("input_std");
    network.images = preprocessingOf(given.metadata, network.inputShape, false, path);
    network.classNames = classNamesOf(given.metadata, network.classes(), path);
    for (const auto& [name, tensor] : given.tensors) {
      const auto expected = network.parameters.find(name);
      if (expected == network.parameters.end()) throw Error(path + ": unexpected tensor " + name + " in a " + network.architecture + " model");
      if (expected->second.shape != tensor.shape) {
        throw Error(path + ": tensor " + name + " is not shaped as the network's layer " + name.substr(0, name.rfind('.')) + " needs");
      }
      if (!std::all_of(tensor.values.begin(), tensor.values.end(), [](float v) { return std::isfinite(v); })) {
        throw Error(path + ": tensor " + name + " holds NaN or infinite values");
      }
      expected->second = tensor;
    }
    for (const std::string& name : network.parameterNames) {
      if (!given.tensors.count(name)) throw Error(path + ": the network's tensor " + name + " is missing");
    }
    return network;
  }
  const TensorFile file = withSequentialNamesRenamed(given);
  Network network;
  network.inputFormatRecorded = file.metadata.count("input_mean") && file.metadata.count("input_std");
  network.activationRecorded = file.metadata.count("activation") != 0;
  try {
    if (const std::string activation = metadataOf(file, "activation"); !activation.empty()) {
      network.activation = parseActivation(activation);
    }
  } catch (const std::exception&) {
    throw Error(path + ": metadata activation is not relu, tanh, sigmoid or none");
  }
  network.input = inputFormatOf(file.metadata, path);
  const auto shapeOf = [&](const std::string& name) -> const std::vector<std::int64_t>* {
    const auto found = file.tensors.find(name);
    return found == file.tensors.end() ? nullptr : &found->second.shape;
  };
  const auto checkBias = [&](const std::string& prefix, std::int64_t outputs) {
    const auto* bias = shapeOf(prefix + ".bias");
    if (!bias) throw Error(path + ": " + prefix + ".weight has no " + prefix + ".bias");
    if (bias->size() != 1 || (*bias)[0] != outputs) throw Error(path + ": tensor " + prefix + ".bias must be [" + std::to_string(outputs) + "]");
  };

  std::vector<std::pair<std::uint32_t, std::uint32_t>> convs;
  std::uint32_t channels = 1, side = mnistSide;
  for (int index = 1; const auto* weight = shapeOf("conv" + std::to_string(index) + ".weight"); ++index) {
    const std::string prefix = "conv" + std::to_string(index);
    if (weight->size() != 4 || (*weight)[2] != (*weight)[3] || (*weight)[2] % 2 == 0 || (*weight)[0] < 1) {
      throw Error(path + ": tensor " + prefix + ".weight must be [out_c, in_c, k, k] with an odd k (same padding)");
    }
    if ((*weight)[1] != channels) {
      throw Error(path + ": tensor " + prefix + ".weight takes " + std::to_string((*weight)[1]) + " channels but gets " +
                  std::to_string(channels));
    }
    checkBias(prefix, (*weight)[0]);
    convs.emplace_back(static_cast<std::uint32_t>((*weight)[0]), static_cast<std::uint32_t>((*weight)[2]));
    channels = convs.back().first;
    if (side / 2 < 1) throw Error(path + ": too many convolutions for a 28x28 input");
    side /= 2;
  }
  std::vector<std::uint32_t> denseOutputs;
  std::vector<int> sizes{static_cast<int>(convs.empty() ? 0 : channels * side * side)};
  for (int index = 1; const auto* weight = shapeOf("fc" + std::to_string(index) + ".weight"); ++index) {
    const std::string prefix = "fc" + std::to_string(index);
    if (weight->size() != 2 || (*weight)[0] < 1 || (*weight)[1] < 1) {
      throw Error(path + ": tensor " + prefix + ".weight must be [out, in], has rank " + std::to_string(weight->size()));
    }
    if (sizes.back() != 0 && (*weight)[1] != sizes.back()) {
      throw Error(path + ": tensor " + prefix + ".weight takes " + std::to_string((*weight)[1]) + " inputs but " +
                  (index == 1 ? std::string("the convolutions give ") : "fc" + std::to_string(index - 1) + " gives ") +
                  std::to_string(sizes.back()));
    }
    if (sizes.back() == 0) sizes.back() = static_cast<int>((*weight)[1]);
    checkBias(prefix, (*weight)[0]);
    sizes.push_back(static_cast<int>((*weight)[0]));
    denseOutputs.push_back(static_cast<std::uint32_t>((*weight)[0]));
  }
  if (denseOutputs.empty()) {
    throw Error(path + ": no tensor fc1.weight; not a classifier (expected fc1.weight, fc1.bias, ... and for a CNN conv1.weight, ...; "
                "or an nn.Sequential's 0.weight, 0.bias, 2.weight, ...)");
  }
  if (convs.empty()) {
    network.inputShape = {static_cast<std::uint32_t>(sizes.front())};
    network.architecture = std::to_string(sizes.front());
    for (std::size_t i = 1; i < sizes.size(); ++i) network.architecture += "-" + std::to_string(sizes[i]);
    buildMlp(network, sizes, nullptr);
  } else {
    network.inputShape = {1, mnistSide, mnistSide};
    network.architecture = "cnn";
    buildCnn(network, convs, denseOutputs, nullptr);
  }
  const std::string declared = metadataOf(file, "architecture");
  if (!declared.empty() && declared != network.architecture && !(declared == "cnn" && !convs.empty())) {
    throw Error(path + ": metadata says architecture " + declared + " but the tensors make " + network.architecture);
  }
  std::set<std::string> known(network.parameterNames.begin(), network.parameterNames.end());
  for (const auto& [name, tensor] : file.tensors) {
    if (!known.count(name)) throw Error(path + ": unexpected tensor " + name + " in a " + network.architecture + " model");
    // A weight that is NaN or infinite makes every answer NaN: a broken file, said at load.
    if (!std::all_of(tensor.values.begin(), tensor.values.end(), [](float v) { return std::isfinite(v); })) {
      throw Error(path + ": tensor " + name + " holds NaN or infinite values");
    }
    network.parameters[name] = tensor;
  }
  network.images = preprocessingOf(file.metadata, network.inputShape, false, path);
  network.classNames = classNamesOf(file.metadata, network.classes(), path);
  return network;
}

TensorFile Network::toTensors() const {
  TensorFile file;
  file.tensors = parameters;
  file.metadata = usageMetadata();
  file.metadata["activation"] = activationName(activation);
  file.metadata["format"] = "glnet-model";
  file.metadata["glnet_version"] = GLNET_VERSION;
  if (description) file.metadata["network"] = toJson(*description);
  return file;
}

std::vector<std::vector<float>> Network::parameterValues() const {
  std::vector<std::vector<float>> values;
  for (const std::string& name : parameterNames) values.push_back(parameters.at(name).values);
  return values;
}

std::vector<std::vector<float>> Network::valuesIn(const TensorFile& file, const std::string& path) const {
  for (const auto& [name, tensor] : file.tensors) {
    // PyTorch's BatchNorm counts its batches in a tensor glnet does not keep.
    const std::string counter = ".num_batches_tracked";
    const bool batchCount = name.size() > counter.size() && name.compare(name.size() - counter.size(), counter.size(), counter) == 0;
    if (!parameters.count(name) && !batchCount) throw Error(path + ": tensor " + name + " is not one of the network " + architecture + "'s");
  }
  std::vector<std::vector<float>> values;
  for (const std::string& name : parameterNames) {
    const auto found = file.tensors.find(name);
    if (found == file.tensors.end()) throw Error(path + ": no tensor " + name + ", which the network " + architecture + " has");
    if (found->second.shape != parameters.at(name).shape) throw Error(path + ": tensor " + name + " is not shaped as in the network " + architecture);
    if (!std::all_of(found->second.values.begin(), found->second.values.end(), [](float v) { return std::isfinite(v); })) {
      throw Error(path + ": tensor " + name + " holds NaN or infinite values");
    }
    values.push_back(found->second.values);
  }
  return values;
}

void Network::setParameterValues(const std::vector<std::vector<float>>& values) {
  GLNET_ASSERT(values.size() == parameterNames.size(), "one value list per parameter");
  for (std::size_t p = 0; p < values.size(); ++p) {
    HostTensor& tensor = parameters.at(parameterNames[p]);
    GLNET_ASSERT(values[p].size() == tensor.values.size(), "parameter " + parameterNames[p] + " changes size");
    tensor.values = values[p];
  }
}

Network Network::withClasses(std::uint32_t classes, std::uint32_t seed, const std::string& source) const {
  if (classes < 2 || classes > 65536) throw UsageError("a classifier has 2 to 65536 classes, not " + std::to_string(classes));
  if (imported) throw Error(imported->path() + ": an imported ONNX model keeps its classes (" + optionName("num-classes") + " replaces the last layer of glnet's own networks)");
  Network replaced;
  if (description) {
    NetDescription changed = *description;
    const auto last = std::find_if(changed.layers.rbegin(), changed.layers.rend(),
                                   [](const LayerDescription& layer) { return layerKindOf(layer) == LayerKind::dense || layerKindOf(layer) == LayerKind::conv; });
    if (last == changed.layers.rend()) throw Error(source + ": no dense or convolution layer to replace");
    last->outputs = classes;
    replaced = fromDescription(changed, seed, source);
    if (replaced.classes() != classes) throw Error(source + ": the layers after '" + last->name + "' do not keep its outputs as the classes");
    // Every parameter of the same shape keeps its value; the replaced layer's (and any it resized) stay fresh.
    for (auto& [name, tensor] : replaced.parameters) {
      if (const auto old = parameters.find(name); old != parameters.end() && old->second.shape == tensor.shape) tensor = old->second;
    }
  } else {
    replaced = *this;
    LayerSpec& last = replaced.layers.back();
    GLNET_ASSERT(last.kind == LayerSpec::Kind::dense, "an MLP and the CNN end in a dense layer");
    last.outputs = classes;
    const std::size_t inputs = static_cast<std::size_t>(parameters.at(last.name + ".weight").shape[1]);
    std::mt19937 random(seed);
    for (const char* part : {".weight", ".bias"}) {
      replaced.parameterNames.erase(std::find(replaced.parameterNames.begin(), replaced.parameterNames.end(), last.name + part));
    }
    addParameters(replaced, last.name, {classes, static_cast<std::uint32_t>(inputs)}, &random);
    if (architecture != "cnn") replaced.architecture = architecture.substr(0, architecture.rfind('-') + 1) + std::to_string(classes);
  }
  replaced.activation = activation;
  replaced.input = input;
  replaced.inputFormatRecorded = inputFormatRecorded;
  replaced.activationRecorded = activationRecorded;
  replaced.images = images;
  replaced.classNames.clear();
  return replaced;
}

NetworkGraph buildGraph(const Network& network, std::uint32_t batch, bool withLoss, float labelSmoothing) {
  NetworkGraph result;
  if (network.imported) {
    if (withLoss) throw Error(network.imported->path() + ": training an imported ONNX model is not supported yet");
    OnnxModel model = readOnnx(*network.imported, batch);
    result.graph = std::move(model.graph);
    result.images = model.input;
    result.logits = model.logits;
    return result;
  }
  Graph& g = result.graph;
  Shape imageShape{batch};
  imageShape.insert(imageShape.end(), network.inputShape.begin(), network.inputShape.end());
  result.images = g.input("images", imageShape);
  Tensor x = result.images;
  if (network.description) {
    x = buildLayers(*network.description, g, x, withLoss,
                    [&](const std::string& name, const Shape& shape, bool state, Initialisation, std::size_t) {
                      const std::vector<float>& values = network.parameters.at(name).values;
                      return state ? g.state(name, shape, values) : g.parameter(name, shape, values);
                    },
                    network.architecture);
  }
  const auto parameter = [&](const std::string& name) {
    const HostTensor& tensor = network.parameters.at(name);
    return g.parameter(name, Shape(tensor.shape.begin(), tensor.shape.end()), tensor.values);
  };
  for (std::size_t l = 0; l < network.layers.size(); ++l) {
    const LayerSpec& layer = network.layers[l];
    switch (layer.kind) {
      case LayerSpec::Kind::conv: {
        // A graph without a loss only runs forward: a convolution and the pooling after it become one op, which
        // never writes the convolution's full-size output (the MNIST CNN at batch 10 000 on the H100: bench/NOTES-gemm.md row 27).
        const bool pooled = !withLoss && l + 1 < network.layers.size() && network.layers[l + 1].kind == LayerSpec::Kind::pool;
        x = g.apply(pooled ? conv2dMaxPoolOp(layer.activation, layer.padding) : conv2dOp(layer.activation, layer.padding),
                    {x, parameter(layer.name + ".weight"), parameter(layer.name + ".bias")}, layer.name);
        if (pooled) ++l;
        break;
      }
      case LayerSpec::Kind::pool:
        x = g.apply(maxPoolOp(), {x});
        break;
      case LayerSpec::Kind::flatten:
        x = g.apply(flattenOp(), {x});
        break;
      case LayerSpec::Kind::dense:
        x = g.apply(denseOp(layer.activation), {x, parameter(layer.name + ".weight"), parameter(layer.name + ".bias")}, layer.name);
        break;
    }
  }
  result.logits = x;
  if (withLoss) {
    result.labels = g.indexInput("labels", {batch});
    result.loss = g.apply(softmaxCrossEntropyOp(labelSmoothing), {result.logits, result.labels}, "loss");
    result.correct = g.apply(correctOp(), {result.logits, result.labels}, "correct");
  }
  return result;
}

}  // namespace glnet
