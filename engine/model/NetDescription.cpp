#include "model/NetDescription.h"

#include "formats/UntrustedJson.h"
#include "base/FileInput.h"
#include "base/check.h"
#include "graph/InferenceOps.h"
#include "graph/Ops.h"
#include "model/EmbeddedNets.h"

#include <algorithm>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>

namespace glnet {
namespace {

// Beyond these a description is more likely broken than meant (and each layer costs programs and dispatches).
constexpr std::size_t largestLayerCount = 4096;
constexpr std::uint32_t largestAttribute = 1 << 16;
constexpr std::size_t longestName = 128;
// The widest kernels in use are about 51 (RepLKNet, SLaK); the work of a layer grows with the kernel's square, and
// "kernel": 1000 on a 28x28 input (legal with the default padding) took minutes per batch.
constexpr std::uint32_t largestKernel = 64;
// Multiply-adds of one layer for one image: VGG-16's largest does 1.85 billion at 224x224.
constexpr std::uint64_t largestLayerWork = std::uint64_t{1} << 34;

const std::map<std::string, std::set<std::string>>& attributesOfKind() {
  static const std::map<std::string, std::set<std::string>> kinds = {
      {"conv", {"outputs", "kernel", "stride", "padding", "groups", "activation"}},
      {"dense", {"outputs", "activation"}},
      {"batchnorm", {"momentum", "epsilon"}},
      {"relu", {}},
      {"tanh", {}},
      {"sigmoid", {}},
      {"silu", {}},
      {"gelu", {}},
      {"hardswish", {}},
      {"add", {}},
      {"concat", {}},
      {"dropout", {"rate"}},
      {"maxpool", {"kernel", "stride", "padding"}},
      {"avgpool", {"kernel", "stride", "padding"}},
      {"globalavgpool", {}},
      {"flatten", {}},
  };
  return kinds;
}

std::string kindList() {
  std::string list;
  for (const auto& [kind, attributes] : attributesOfKind()) list += (list.empty() ? "" : ", ") + kind;
  return list;
}


std::uint32_t count(const nlohmann::json& value, const std::string& field, std::uint32_t least, const std::function<Error(const std::string&)>& refuse,
                    std::uint32_t most = largestAttribute) {
  if (!value.is_number_integer() || value.get<std::int64_t>() < least || value.get<std::int64_t>() > most) {
    throw refuse(field + " must be a whole number from " + std::to_string(least) + " to " + std::to_string(most) + ", not " +
                 describeJsonValue(value));
  }
  return static_cast<std::uint32_t>(value.get<std::int64_t>());
}

LayerDescription parseLayer(const nlohmann::json& entry, std::size_t index, const std::set<std::string>& earlier, const std::string& previous,
                            const std::string& source) {
  if (!entry.is_object()) throw Error(source + ": layer " + std::to_string(index + 1) + " is not an object");
  const auto nameField = entry.find("name");
  if (nameField == entry.end() || !nameField->is_string() || !isValidLayerName(nameField->get<std::string>())) {
    throw Error(source + ": layer " + std::to_string(index + 1) + " needs a \"name\" of letters, digits, '_', '.' and '-' (at most " +
                std::to_string(longestName) + ")");
  }
  LayerDescription layer;
  layer.name = nameField->get<std::string>();
  const auto refuse = [&](const std::string& why) { return Error(source + ": layer '" + layer.name + "': " + why); };
  if (layer.name == "input") throw refuse("the name 'input' stands for the network's input");
  if (earlier.count(layer.name)) throw refuse("a second layer of this name");
  const auto kindField = entry.find("kind");
  if (kindField == entry.end() || !kindField->is_string() || !attributesOfKind().count(kindField->get<std::string>())) {
    throw refuse("\"kind\" must be one of " + kindList());
  }
  layer.kind = kindField->get<std::string>();
  const std::set<std::string>& allowed = attributesOfKind().at(layer.kind);
  for (const auto& [key, value] : entry.items()) {
    if (key == "name" || key == "kind" || key == "inputs" || allowed.count(key)) continue;
    throw refuse("a " + layer.kind + " layer has no attribute \"" + (isValidLayerName(key) ? key : std::string("(unprintable)")) + "\"");
  }
  if (const auto inputs = entry.find("inputs"); inputs != entry.end()) {
    if (!inputs->is_array() || inputs->empty()) throw refuse("\"inputs\" must be a list of earlier layers' names");
    for (const auto& input : *inputs) {
      if (!input.is_string()) throw refuse("\"inputs\" must be a list of earlier layers' names");
      const std::string name = input.get<std::string>();
      if (name != "input" && !earlier.count(name)) {
        throw refuse("input '" + (isValidLayerName(name) ? name : std::string("(unprintable)")) + "' is not an earlier layer (nor 'input')");
      }
      layer.inputs.push_back(name);
    }
  } else {
    layer.inputs = {previous};
  }
  const std::size_t wanted = layer.kind == "add" ? 2 : 1;
  if (layer.kind == "concat") {
    if (layer.inputs.size() < 2 || layer.inputs.size() > 32) throw refuse("a concat layer reads 2 to 32 inputs, not " + std::to_string(layer.inputs.size()));
  } else if (layer.inputs.size() != wanted) {
    throw refuse("a " + layer.kind + " layer reads " + std::to_string(wanted) + " input" + (wanted > 1 ? "s" : "") + ", not " +
                 std::to_string(layer.inputs.size()));
  }
  const auto field = [&](const char* key) -> const nlohmann::json* {
    const auto found = entry.find(key);
    return found == entry.end() ? nullptr : &*found;
  };
  const bool needsOutputs = layer.kind == "conv" || layer.kind == "dense";
  const bool needsKernel = layer.kind == "conv" || layer.kind == "maxpool" || layer.kind == "avgpool";
  if (needsOutputs) {
    if (!field("outputs")) throw refuse("a " + layer.kind + " layer needs \"outputs\"");
    layer.outputs = count(*field("outputs"), "outputs", 1, refuse);
  }
  if (needsKernel) {
    if (!field("kernel")) throw refuse("a " + layer.kind + " layer needs \"kernel\"");
    layer.kernel = count(*field("kernel"), "kernel", 1, refuse, largestKernel);
    layer.stride = field("stride") ? count(*field("stride"), "stride", 1, refuse) : layer.kind == "conv" ? 1 : layer.kernel;
    layer.padding = field("padding") ? count(*field("padding"), "padding", 0, refuse) : layer.kind == "conv" ? (layer.kernel - 1) / 2 : 0;
    if (layer.kind != "conv" && 2 * layer.padding > layer.kernel) throw refuse("padding must be at most half the kernel");
    if (field("groups")) layer.groups = count(*field("groups"), "groups", 1, refuse);
    if (layer.outputs % layer.groups != 0) throw refuse("outputs (" + std::to_string(layer.outputs) + ") must be a multiple of groups");
  }
  if (const nlohmann::json* activation = field("activation")) {
    const std::string text = activation->is_string() ? activation->get<std::string>() : "";
    if (text != "relu" && text != "tanh" && text != "sigmoid" && text != "none") throw refuse("\"activation\" must be relu, tanh, sigmoid or none");
    layer.activation = parseActivation(text);
  }
  const auto fraction = [&](const char* key, float& value, bool open) {
    if (const nlohmann::json* given = field(key)) {
      const double number = given->is_number() ? given->get<double>() : -1.0;
      if (!(number > 0 && (open ? number < 1 : number <= 1))) {
        throw refuse(std::string(key) + " must be a number in (0, " + (open ? "1)" : "1]") + ", not " + describeJsonValue(*given));
      }
      value = static_cast<float>(number);
    }
  };
  fraction("momentum", layer.momentum, false);
  fraction("epsilon", layer.epsilon, true);
  if (const nlohmann::json* rate = field("rate")) {
    const double number = rate->is_number() ? rate->get<double>() : -1.0;
    if (!(number >= 0 && number < 1)) throw refuse("rate must be a number in [0, 1), not " + describeJsonValue(*rate));
    layer.rate = static_cast<float>(number);
  }
  return layer;
}

// A dropout layer's own masks: FNV-1a of its name, so that two dropout layers never drop the same positions.
std::uint32_t saltOf(const std::string& name) {
  std::uint32_t hash = 2166136261u;
  for (const char c : name) hash = (hash ^ static_cast<unsigned char>(c)) * 16777619u;
  return hash;
}

}  // namespace

bool isValidLayerName(const std::string& name) {
  return !name.empty() && name.size() <= longestName && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
  });
}

NetDescription parseNetDescription(const std::string& text, const std::string& source) {
  const nlohmann::json root = parseUntrustedJson(text, source);
  if (!root.is_object()) throw Error(source + ": a network description is a JSON object with \"input\" and \"layers\"");
  for (const auto& [key, value] : root.items()) {
    if (key != "name" && key != "input" && key != "layers") {
      throw Error(source + ": unknown field \"" + (isValidLayerName(key) ? key : std::string("(unprintable)")) + "\" (a description has name, input and layers)");
    }
  }
  NetDescription description;
  if (const auto name = root.find("name"); name != root.end()) {
    if (!name->is_string() || !isValidLayerName(name->get<std::string>())) throw Error(source + ": \"name\" must be letters, digits, '_', '.' and '-'");
    description.name = name->get<std::string>();
  }
  const auto input = root.find("input");
  if (input == root.end() || !input->is_array() || (input->size() != 1 && input->size() != 3)) {
    throw Error(source + ": \"input\" must be the shape of one input, [channels, height, width] or [features]");
  }
  for (const auto& size : *input) {
    description.input.push_back(count(size, "input size", 1, [&](const std::string& why) { return Error(source + ": " + why); }));
  }
  const auto layers = root.find("layers");
  if (layers == root.end() || !layers->is_array() || layers->empty() || layers->size() > largestLayerCount) {
    throw Error(source + ": \"layers\" must be a list of 1 to " + std::to_string(largestLayerCount) + " layers");
  }
  std::set<std::string> earlier;
  std::string previous = "input";
  for (std::size_t i = 0; i < layers->size(); ++i) {
    description.layers.push_back(parseLayer((*layers)[i], i, earlier, previous, source));
    previous = description.layers.back().name;
    earlier.insert(previous);
  }
  return description;
}

NetDescription readNetDescription(const std::string& path) { return parseNetDescription(readRegularFile(path, std::uint64_t{16} << 20), path); }

std::string toJson(const NetDescription& description) {
  nlohmann::json layers = nlohmann::json::array();
  for (const LayerDescription& layer : description.layers) {
    nlohmann::json entry = {{"name", layer.name}, {"kind", layer.kind}, {"inputs", layer.inputs}};
    if (layer.kind == "conv" || layer.kind == "dense") {
      entry["outputs"] = layer.outputs;
      entry["activation"] = activationName(layer.activation);
    }
    if (layer.kernel) {
      entry["kernel"] = layer.kernel;
      entry["stride"] = layer.stride;
      entry["padding"] = layer.padding;
    }
    if (layer.kind == "conv") entry["groups"] = layer.groups;
    if (layer.kind == "batchnorm") {
      entry["momentum"] = layer.momentum;
      entry["epsilon"] = layer.epsilon;
    }
    if (layer.kind == "dropout") entry["rate"] = layer.rate;
    layers.push_back(entry);
  }
  nlohmann::json root = {{"input", description.input}, {"layers", layers}};
  if (!description.name.empty()) root["name"] = description.name;
  return root.dump();
}

const NetDescription* builtinNet(const std::string& name) {
  static const std::map<std::string, NetDescription> nets = [] {
    std::map<std::string, NetDescription> parsed;
    for (const auto& [file, text] : embeddedNets()) {
      const std::string stem = file.substr(0, file.rfind('.'));
      parsed.emplace(stem, parseNetDescription(std::string(text), "built-in " + file));
    }
    return parsed;
  }();
  const auto found = nets.find(name);
  return found == nets.end() ? nullptr : &found->second;
}

std::vector<std::string> builtinNetNames() {
  std::vector<std::string> names;
  for (const auto& [file, text] : embeddedNets()) names.push_back(file.substr(0, file.rfind('.')));
  return names;
}

Tensor buildLayers(const NetDescription& description, Graph& graph, Tensor images, bool training, const ParameterSource& parameter,
                   const std::string& source) {
  std::map<std::string, Tensor> outputs{{"input", images}};
  Tensor last = images;
  for (const LayerDescription& layer : description.layers) {
    const auto refuse = [&](const std::string& why) { return Error(source + ": layer '" + layer.name + "': " + why); };
    std::vector<Tensor> inputs;
    for (const std::string& name : layer.inputs) inputs.push_back(outputs.at(name));
    Tensor x = inputs[0];
    const Shape shape = graph.tensor(x).shape;  // a copy: applying ops grows the graph's tensors
    try {
      const auto weightAndBias = [&](const Shape& weight) {
        const std::size_t fanIn = elementCount(weight) / weight[0];
        return std::vector<Tensor>{parameter(layer.name + ".weight", weight, false, Initialisation::uniformFanIn, fanIn),
                                   parameter(layer.name + ".bias", {weight[0]}, false, Initialisation::uniformFanIn, fanIn)};
      };
      if (layer.kind == "conv") {
        if (shape.size() != 4) throw refuse("a convolution reads [N, C, H, W], not " + describe(shape));
        if (shape[1] % layer.groups != 0) throw refuse("its " + std::to_string(shape[1]) + " input channels are not a multiple of groups");
        const std::vector<Tensor> wb = weightAndBias({layer.outputs, shape[1] / layer.groups, layer.kernel, layer.kernel});
        if (layer.groups == 1) {
          x = graph.apply(conv2dOp(layer.activation, layer.padding, layer.stride), {x, wb[0], wb[1]}, layer.name);
        } else {
          // Grouped and depthwise convolutions run GroupedConv.glsl, which fuses no activation when trained.
          ConvSettings settings;
          settings.strides = {layer.stride, layer.stride};
          settings.pads = {layer.padding, layer.padding, layer.padding, layer.padding};
          settings.groups = layer.groups;
          x = graph.apply(groupedConvOp(settings), {x, wb[0], wb[1]}, layer.name);
          if (layer.activation != Activation::none) x = graph.apply(activationOp(layer.activation), {x}, layer.name + ".activation");
        }
      } else if (layer.kind == "dense") {
        if (shape.size() > 2) x = graph.apply(flattenOp(), {x}, layer.name + ".flatten");
        const std::uint32_t features = graph.tensor(x).shape[1];
        const std::vector<Tensor> wb = weightAndBias({layer.outputs, features});
        x = graph.dense(x, wb[0], wb[1], layer.activation);
      } else if (layer.kind == "batchnorm") {
        if (shape.size() < 2) throw refuse("batch normalization reads [N, C, ...], not " + describe(shape));
        const Shape channels{shape[1]};
        const Tensor gamma = parameter(layer.name + ".weight", channels, false, Initialisation::ones, 0);
        const Tensor beta = parameter(layer.name + ".bias", channels, false, Initialisation::zeros, 0);
        const Tensor mean = parameter(layer.name + ".running_mean", channels, true, Initialisation::zeros, 0);
        const Tensor variance = parameter(layer.name + ".running_var", channels, true, Initialisation::ones, 0);
        x = graph.apply(batchNormOp(training, layer.momentum, layer.epsilon), {x, gamma, beta, mean, variance}, layer.name);
      } else if (layer.kind == "relu" || layer.kind == "tanh" || layer.kind == "sigmoid") {
        x = graph.apply(activationOp(parseActivation(layer.kind)), {x}, layer.name);
      } else if (layer.kind == "silu" || layer.kind == "gelu" || layer.kind == "hardswish") {
        const PointwiseKind kind = layer.kind == "silu" ? PointwiseKind::silu : layer.kind == "gelu" ? PointwiseKind::gelu : PointwiseKind::hardSwish;
        x = graph.apply(pointwiseOp({kind}), {x}, layer.name);
      } else if (layer.kind == "add") {
        x = graph.apply(addOp(), inputs, layer.name);
      } else if (layer.kind == "concat") {
        if (shape.size() < 2) throw refuse("concatenation joins channels of [N, C, ...], not " + describe(shape));
        x = graph.apply(concatOp(1), inputs, layer.name);
      } else if (layer.kind == "dropout") {
        // Inference keeps every value: PyTorch's inverted dropout scales while training instead.
        if (training && layer.rate > 0) x = graph.apply(dropoutOp(layer.rate, saltOf(layer.name)), {x}, layer.name);
      } else if (layer.kind == "maxpool" || layer.kind == "avgpool" || layer.kind == "globalavgpool") {
        if (shape.size() != 4) throw refuse("pooling reads [N, C, H, W], not " + describe(shape));
        PoolSettings settings;
        settings.average = layer.kind != "maxpool";
        if (layer.kind == "globalavgpool") {
          settings.kernel = {shape[2], shape[3]};
        } else {
          settings.kernel = {layer.kernel, layer.kernel};
          settings.strides = {layer.stride, layer.stride};
          settings.pads = {layer.padding, layer.padding, layer.padding, layer.padding};
        }
        x = graph.apply(poolOp(settings), {x}, layer.name);
      } else {
        GLNET_ASSERT(layer.kind == "flatten", "every kind the parser admits is built");
        x = graph.apply(flattenOp(), {x}, layer.name);
      }
      if (layer.kernel) {
        // Sides, channels and padding each pass their own bound, their product not; in double, which cannot overflow.
        const Shape out = graph.tensor(x).shape;
        const double work = static_cast<double>(out[1]) * out[2] * out[3] * layer.kernel * layer.kernel * (layer.kind == "conv" ? shape[1] / layer.groups : 1);
        if (work > static_cast<double>(largestLayerWork)) {
          std::ostringstream text;
          text << std::setprecision(3) << work / 1e9 << " billion multiply-adds per image (output " << describe(out) << ", kernel "
               << layer.kernel << "x" << layer.kernel << "), more than the " << static_cast<double>(largestLayerWork) / 1e9 << " billion glnet takes in one layer";
          throw refuse(text.str());
        }
      }
    } catch (const Error& error) {
      const std::string text = error.what();
      if (text.rfind(source + ": layer '", 0) == 0) throw;
      throw refuse(text);
    }
    outputs[layer.name] = x;
    last = x;
  }
  return last;
}

}  // namespace glnet
