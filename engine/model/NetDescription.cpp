#include "model/NetDescription.h"

#include "formats/UntrustedJson.h"
#include "base/FileInput.h"
#include "base/check.h"
#include "graph/InferenceOps.h"
#include "graph/Ops.h"
#include "model/EmbeddedNets.h"
#include "model/LayerBuild.h"

#include <algorithm>
#include <array>
#include <iomanip>
#include <map>
#include <optional>
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

std::uint32_t count(const nlohmann::json& value, const std::string& field, std::uint32_t least, const std::function<Error(const std::string&)>& refuse,
                    std::uint32_t most = largestAttribute) {
  if (!value.is_number_integer() || value.get<std::int64_t>() < least || value.get<std::int64_t>() > most) {
    throw refuse(field + " must be a whole number from " + std::to_string(least) + " to " + std::to_string(most) + ", not " +
                 describeJsonValue(value));
  }
  return static_cast<std::uint32_t>(value.get<std::int64_t>());
}

// A layer entry's attributes as its kind's parse function reads them; errors name the layer.
class Fields {
 public:
  Fields(const nlohmann::json& entry, const LayerDescription& layer, std::function<Error(const std::string&)> refuse)
      : entry_(entry), layer_(layer), refuse_(std::move(refuse)) {}

  Error refuse(const std::string& why) const { return refuse_(why); }
  const nlohmann::json* find(const char* key) const {
    const auto found = entry_.find(key);
    return found == entry_.end() ? nullptr : &*found;
  }
  std::uint32_t required(const char* key, std::uint32_t least, std::uint32_t most = largestAttribute) const {
    if (!find(key)) throw refuse("a " + layer_.kind + " layer needs \"" + key + "\"");
    return count(*find(key), key, least, refuse_, most);
  }
  std::uint32_t optional(const char* key, std::uint32_t least, std::uint32_t fallback) const {
    return find(key) ? count(*find(key), key, least, refuse_) : fallback;
  }
  Activation activation() const {
    const nlohmann::json* given = find("activation");
    if (!given) return Activation::none;
    const std::optional<Activation> activation = given->is_string() ? findKind<Activation>(given->get<std::string>()) : std::nullopt;
    if (!activation) throw refuse("\"activation\" must be " + kindChoices<Activation>());
    return *activation;
  }
  bool flag(const char* key, bool fallback) const {
    const nlohmann::json* given = find(key);
    if (!given) return fallback;
    if (!given->is_boolean()) throw refuse(std::string(key) + " must be true or false, not " + describeJsonValue(*given));
    return given->get<bool>();
  }
  // A number in (0, 1) when `open`, else in (0, 1].
  float fraction(const char* key, float fallback, bool open) const {
    const nlohmann::json* given = find(key);
    if (!given) return fallback;
    const double number = given->is_number() ? given->get<double>() : -1.0;
    if (!(number > 0 && (open ? number < 1 : number <= 1))) {
      throw refuse(std::string(key) + " must be a number in (0, " + (open ? "1)" : "1]") + ", not " + describeJsonValue(*given));
    }
    return static_cast<float>(number);
  }

 private:
  const nlohmann::json& entry_;
  const LayerDescription& layer_;
  std::function<Error(const std::string&)> refuse_;
};

// The attributes a layer may give, each a LayerDescription field of the same name, and how model files record it.
namespace takes {
enum : unsigned {
  outputs = 1, kernel = 2, stride = 4, padding = 8, groups = 16, activation = 32, momentum = 64, epsilon = 128, rate = 256, heads = 512, causal = 1024, approximate = 2048,
  vocabulary = 4096, pad = 8192
};
constexpr unsigned window = kernel | stride | padding;
}  // namespace takes
struct AttributeRow {
  unsigned attribute;
  const char* name;
  nlohmann::json (*print)(const LayerDescription& layer);
};
const AttributeRow attributeRows[] = {
    {takes::outputs, "outputs", [](const LayerDescription& l) { return nlohmann::json(l.outputs); }},
    {takes::kernel, "kernel", [](const LayerDescription& l) { return nlohmann::json(l.kernel); }},
    {takes::stride, "stride", [](const LayerDescription& l) { return nlohmann::json(l.stride); }},
    {takes::padding, "padding", [](const LayerDescription& l) { return nlohmann::json(l.padding); }},
    {takes::groups, "groups", [](const LayerDescription& l) { return nlohmann::json(l.groups); }},
    {takes::activation, "activation", [](const LayerDescription& l) { return nlohmann::json(activationName(l.activation)); }},
    {takes::momentum, "momentum", [](const LayerDescription& l) { return nlohmann::json(l.momentum); }},
    {takes::epsilon, "epsilon", [](const LayerDescription& l) { return nlohmann::json(l.epsilon); }},
    {takes::rate, "rate", [](const LayerDescription& l) { return nlohmann::json(l.rate); }},
    {takes::heads, "heads", [](const LayerDescription& l) { return nlohmann::json(l.heads); }},
    {takes::causal, "causal", [](const LayerDescription& l) { return nlohmann::json(l.causal); }},
    {takes::approximate, "approximate", [](const LayerDescription& l) { return nlohmann::json(l.tanhApproximation ? "tanh" : "none"); }},
    {takes::vocabulary, "vocabulary", [](const LayerDescription& l) { return nlohmann::json(l.vocabulary); }},
    {takes::pad, "pad", [](const LayerDescription& l) { return nlohmann::json(l.pad); }},
};

// How each kind reads its attributes (in the order their errors are checked).
void parseNothing(LayerDescription&, const Fields&) {}

void parseConv(LayerDescription& layer, const Fields& fields) {
  layer.outputs = fields.required("outputs", 1);
  layer.kernel = fields.required("kernel", 1, largestKernel);
  layer.stride = fields.optional("stride", 1, 1);
  layer.padding = fields.optional("padding", 0, (layer.kernel - 1) / 2);
  layer.groups = fields.optional("groups", 1, 1);
  if (layer.outputs % layer.groups != 0) throw fields.refuse("outputs (" + std::to_string(layer.outputs) + ") must be a multiple of groups");
  layer.activation = fields.activation();
}

void parseDense(LayerDescription& layer, const Fields& fields) {
  layer.outputs = fields.required("outputs", 1);
  layer.activation = fields.activation();
}

// Token ids travel as floats, whole numbers exact up to 2^24.
constexpr std::uint32_t largestTokenId = 1u << 24;

void parseEmbedding(LayerDescription& layer, const Fields& fields) {
  layer.vocabulary = fields.required("vocabulary", 1, largestTokenId);
  layer.outputs = fields.required("outputs", 1);
}

void parseMask(LayerDescription& layer, const Fields& fields) {
  layer.pad = fields.find("pad") ? fields.required("pad", 0, largestTokenId - 1) : 0;
}

void parseAttention(LayerDescription& layer, const Fields& fields) {
  layer.heads = fields.required("heads", 1);
  layer.causal = fields.flag("causal", false);
}

// PyTorch's GELU(approximate=...): "none" (exact, erf) or "tanh".
void parseGelu(LayerDescription& layer, const Fields& fields) {
  const nlohmann::json* given = fields.find("approximate");
  if (!given) return;
  if (!given->is_string() || (*given != "none" && *given != "tanh")) {
    throw fields.refuse("approximate must be \"none\" or \"tanh\", not " + describeJsonValue(*given));
  }
  layer.tanhApproximation = *given == "tanh";
}

void parseBatchnorm(LayerDescription& layer, const Fields& fields) {
  layer.momentum = fields.fraction("momentum", layer.momentum, false);
  layer.epsilon = fields.fraction("epsilon", layer.epsilon, true);
}

void parseLayernorm(LayerDescription& layer, const Fields& fields) { layer.epsilon = fields.fraction("epsilon", layer.epsilon, true); }

void parsePool(LayerDescription& layer, const Fields& fields) {
  layer.kernel = fields.required("kernel", 1, largestKernel);
  layer.stride = fields.optional("stride", 1, layer.kernel);
  layer.padding = fields.optional("padding", 0, 0);
  if (2 * layer.padding > layer.kernel) throw fields.refuse("padding must be at most half the kernel");
}

void parseDropout(LayerDescription& layer, const Fields& fields) {
  if (const nlohmann::json* rate = fields.find("rate")) {
    const double number = rate->is_number() ? rate->get<double>() : -1.0;
    if (!(number >= 0 && number < 1)) throw fields.refuse("rate must be a number in [0, 1), not " + describeJsonValue(*rate));
    layer.rate = static_cast<float>(number);
  }
}

// A dropout layer's own masks: FNV-1a of its name, so that two dropout layers never drop the same positions.
std::uint32_t saltOf(const std::string& name) {
  std::uint32_t hash = 2166136261u;
  for (const char c : name) hash = (hash ^ static_cast<unsigned char>(c)) * 16777619u;
  return hash;
}

// How each kind becomes ops.
Tensor buildConv(const LayerBuild& b) {
  const LayerDescription& layer = b.layer;
  if (b.shape.size() != 4) throw b.refuse("a convolution reads [N, C, H, W], not " + describe(b.shape));
  if (b.shape[1] % layer.groups != 0) throw b.refuse("its " + std::to_string(b.shape[1]) + " input channels are not a multiple of groups");
  const std::vector<Tensor> wb = b.weightAndBias({layer.outputs, b.shape[1] / layer.groups, layer.kernel, layer.kernel});
  if (layer.groups == 1) return b.graph.apply(conv2dOp(layer.activation, layer.padding, layer.stride), {b.inputs[0], wb[0], wb[1]}, layer.name);
  // Grouped and depthwise convolutions run GroupedConv.glsl, which fuses no activation when trained.
  ConvSettings settings;
  settings.strides = {layer.stride, layer.stride};
  settings.pads = {layer.padding, layer.padding, layer.padding, layer.padding};
  settings.groups = layer.groups;
  const Tensor x = b.graph.apply(groupedConvOp(settings), {b.inputs[0], wb[0], wb[1]}, layer.name);
  if (layer.activation == Activation::none) return x;
  return b.graph.apply(activationOp(layer.activation), {x}, layer.name + ".activation");
}

Tensor buildDense(const LayerBuild& b) {
  Tensor x = b.inputs[0];
  if (b.shape.size() > 2) x = b.graph.apply(flattenOp(), {x}, b.layer.name + ".flatten");
  const std::uint32_t features = b.graph.tensor(x).shape[1];
  const std::vector<Tensor> wb = b.weightAndBias({b.layer.outputs, features});
  return b.graph.dense(x, wb[0], wb[1], b.layer.activation);
}

Tensor buildBatchnorm(const LayerBuild& b) {
  const std::string& name = b.layer.name;
  if (b.shape.size() < 2) throw b.refuse("batch normalization reads [N, C, ...], not " + describe(b.shape));
  const Shape channels{b.shape[1]};
  const Tensor gamma = b.parameter(name + ".weight", channels, false, Initialisation::ones, 0);
  const Tensor beta = b.parameter(name + ".bias", channels, false, Initialisation::zeros, 0);
  const Tensor mean = b.parameter(name + ".running_mean", channels, true, Initialisation::zeros, 0);
  const Tensor variance = b.parameter(name + ".running_var", channels, true, Initialisation::ones, 0);
  // A second input: the residual of the add this normalization took in (fusedResidual).
  std::vector<Tensor> inputs{b.inputs[0], gamma, beta, mean, variance};
  if (b.inputs.size() == 2) inputs.push_back(b.inputs[1]);
  return b.graph.apply(batchNormOp(b.training, b.layer.momentum, b.layer.epsilon, b.layer.activation, b.inputs.size() == 2), inputs, name);
}

Tensor buildGelu(const LayerBuild& b) {
  return b.graph.apply(pointwiseOp({b.layer.tanhApproximation ? PointwiseKind::geluTanh : PointwiseKind::gelu}), {b.inputs[0]}, b.layer.name);
}

// relu, tanh and sigmoid: the activations dense and conv layers fuse, by the same names.
Tensor buildActivation(const LayerBuild& b) { return b.graph.apply(activationOp(parseActivation(b.layer.kind)), {b.inputs[0]}, b.layer.name); }

template <PointwiseKind kind>
Tensor buildPointwise(const LayerBuild& b) {
  return b.graph.apply(pointwiseOp({kind}), {b.inputs[0]}, b.layer.name);
}

Tensor buildAdd(const LayerBuild& b) { return b.graph.apply(addOp(b.layer.activation), b.inputs, b.layer.name); }

Tensor buildConcat(const LayerBuild& b) {
  if (b.shape.size() < 2) throw b.refuse("concatenation joins channels of [N, C, ...], not " + describe(b.shape));
  return b.graph.apply(concatOp(1), b.inputs, b.layer.name);
}

Tensor buildPool(const LayerBuild& b) {
  const LayerDescription& layer = b.layer;
  if (b.shape.size() != 4) throw b.refuse("pooling reads [N, C, H, W], not " + describe(b.shape));
  PoolSettings settings;
  settings.average = layerKindOf(layer) != LayerKind::maxpool;
  if (layerKindOf(layer) == LayerKind::globalavgpool) {
    settings.kernel = {b.shape[2], b.shape[3]};
  } else {
    settings.kernel = {layer.kernel, layer.kernel};
    settings.strides = {layer.stride, layer.stride};
    settings.pads = {layer.padding, layer.padding, layer.padding, layer.padding};
  }
  return b.graph.apply(poolOp(settings), {b.inputs[0]}, layer.name);
}

Tensor buildFlatten(const LayerBuild& b) { return b.graph.apply(flattenOp(), {b.inputs[0]}, b.layer.name); }

Tensor buildDropout(const LayerBuild& b) {
  // Inference keeps every value: PyTorch's inverted dropout scales while training instead.
  if (!b.training || b.layer.rate == 0) return b.inputs[0];
  return b.graph.apply(dropoutOp(b.layer.rate, saltOf(b.layer.name)), {b.inputs[0]}, b.layer.name);
}

// One row per LayerKind, in its order: the name in descriptions, the attributes a layer may give (outputs and kernel
// it must give when it may), how many inputs it reads, and how it is parsed and built.
struct KindRow {
  LayerKind kind;
  const char* name;
  unsigned attributes;
  std::size_t leastInputs, mostInputs;
  void (*parse)(LayerDescription& layer, const Fields& fields);
  Tensor (*build)(const LayerBuild& build);
};
constexpr std::array<KindRow, layerKindCount> kindRows{{
    {LayerKind::conv, "conv", takes::outputs | takes::window | takes::groups | takes::activation, 1, 1, parseConv, buildConv},
    {LayerKind::dense, "dense", takes::outputs | takes::activation, 1, 1, parseDense, buildDense},
    {LayerKind::linear, "linear", takes::outputs | takes::activation, 1, 1, parseDense, buildLinear},
    {LayerKind::attention, "attention", takes::heads | takes::causal, 1, 2, parseAttention, buildAttention},
    {LayerKind::batchnorm, "batchnorm", takes::momentum | takes::epsilon, 1, 1, parseBatchnorm, buildBatchnorm},
    {LayerKind::layernorm, "layernorm", takes::epsilon, 1, 1, parseLayernorm, buildLayernorm},
    {LayerKind::relu, "relu", 0, 1, 1, parseNothing, buildActivation},
    {LayerKind::tanh, "tanh", 0, 1, 1, parseNothing, buildActivation},
    {LayerKind::sigmoid, "sigmoid", 0, 1, 1, parseNothing, buildActivation},
    {LayerKind::hardswish, "hardswish", 0, 1, 1, parseNothing, buildPointwise<PointwiseKind::hardSwish>},
    {LayerKind::silu, "silu", 0, 1, 1, parseNothing, buildPointwise<PointwiseKind::silu>},
    {LayerKind::gelu, "gelu", takes::approximate, 1, 1, parseGelu, buildGelu},
    {LayerKind::add, "add", 0, 2, 2, parseNothing, buildAdd},
    {LayerKind::concat, "concat", 0, 2, 32, parseNothing, buildConcat},
    {LayerKind::maxpool, "maxpool", takes::window, 1, 1, parsePool, buildPool},
    {LayerKind::avgpool, "avgpool", takes::window, 1, 1, parsePool, buildPool},
    {LayerKind::globalavgpool, "globalavgpool", 0, 1, 1, parseNothing, buildPool},
    {LayerKind::flatten, "flatten", 0, 1, 1, parseNothing, buildFlatten},
    {LayerKind::tokens, "tokens", 0, 1, 1, parseNothing, buildTokens},
    {LayerKind::position, "position", 0, 1, 1, parseNothing, buildPosition},
    {LayerKind::embedding, "embedding", takes::vocabulary | takes::outputs, 1, 1, parseEmbedding, buildEmbedding},
    {LayerKind::mask, "mask", takes::pad, 1, 1, parseMask, buildMask},
    {LayerKind::first, "first", 0, 1, 1, parseNothing, buildFirst},
    {LayerKind::dropout, "dropout", takes::rate, 1, 1, parseDropout, buildDropout},
}};
static_assert(oneRowPerKind(kindRows), "kindRows holds one row per LayerKind, in its order");

const KindRow& rowOf(LayerKind kind) { return kindRows[static_cast<std::size_t>(kind)]; }

// The kinds' names in alphabetical order, as errors list them.
std::string kindList() {
  std::vector<std::string> names;
  for (const KindRow& row : kindRows) names.push_back(row.name);
  std::sort(names.begin(), names.end());
  std::string list;
  for (const std::string& name : names) list += (list.empty() ? "" : ", ") + name;
  return list;
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
  const std::optional<LayerKind> kind = kindField != entry.end() && kindField->is_string() ? findLayerKind(kindField->get<std::string>()) : std::nullopt;
  if (!kind) throw refuse("\"kind\" must be one of " + kindList());
  const KindRow& row = rowOf(*kind);
  layer.kind = row.name;
  for (const auto& [key, value] : entry.items()) {
    if (key == "name" || key == "kind" || key == "inputs") continue;
    const auto taken = std::find_if(std::begin(attributeRows), std::end(attributeRows), [&](const AttributeRow& a) { return a.name == key; });
    if (taken != std::end(attributeRows) && (row.attributes & taken->attribute)) continue;
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
  if (row.leastInputs != row.mostInputs) {
    if (layer.inputs.size() < row.leastInputs || layer.inputs.size() > row.mostInputs) {
      throw refuse("a " + layer.kind + " layer reads " + std::to_string(row.leastInputs) + " to " + std::to_string(row.mostInputs) + " inputs, not " +
                   std::to_string(layer.inputs.size()));
    }
  } else if (layer.inputs.size() != row.leastInputs) {
    throw refuse("a " + layer.kind + " layer reads " + std::to_string(row.leastInputs) + " input" + (row.leastInputs > 1 ? "s" : "") + ", not " +
                 std::to_string(layer.inputs.size()));
  }
  row.parse(layer, Fields(entry, layer, refuse));
  return layer;
}

}  // namespace

bool isValidLayerName(const std::string& name) {
  return !name.empty() && name.size() <= longestName && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
  });
}

const char* layerKindName(LayerKind kind) { return rowOf(kind).name; }

std::optional<LayerKind> findLayerKind(const std::string& name) {
  for (const KindRow& row : kindRows) {
    if (name == row.name) return row.kind;
  }
  return std::nullopt;
}

LayerKind layerKindOf(const LayerDescription& layer) {
  const std::optional<LayerKind> kind = findLayerKind(layer.kind);
  GLNET_ASSERT(kind, "layer '" + layer.name + "' is of no kind: " + layer.kind);
  return *kind;
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
    const unsigned taken = rowOf(layerKindOf(layer)).attributes;
    for (const AttributeRow& attribute : attributeRows) {
      if (taken & attribute.attribute) entry[attribute.name] = attribute.print(layer);
    }
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

// Whether any layer from `from` on reads layer `name`.
bool readAfter(const std::vector<LayerDescription>& layers, std::size_t from, const std::string& name) {
  for (std::size_t other = from; other < layers.size(); ++other) {
    const std::vector<std::string>& inputs = layers[other].inputs;
    if (std::find(inputs.begin(), inputs.end(), name) != inputs.end()) return true;
  }
  return false;
}

// The activation of layer `index + 1` when layer `index` can apply it in its own op: a batch normalization or an add
// that only that activation reads. Fused, the activation costs no pass over the tensor forward or backward.
std::optional<Activation> fusedActivation(const std::vector<LayerDescription>& layers, std::size_t index) {
  const LayerDescription& layer = layers[index];
  const LayerKind kind = layerKindOf(layer);
  if ((kind != LayerKind::batchnorm && kind != LayerKind::add) || layer.activation != Activation::none || index + 1 == layers.size()) {
    return std::nullopt;
  }
  const LayerDescription& next = layers[index + 1];
  const LayerKind nextKind = layerKindOf(next);
  if ((nextKind != LayerKind::relu && nextKind != LayerKind::tanh && nextKind != LayerKind::sigmoid) || next.inputs != std::vector<std::string>{layer.name} ||
      readAfter(layers, index + 2, layer.name)) {
    return std::nullopt;
  }
  return parseActivation(next.kind);
}

// A batch normalization (layer `index`) that only the add right after it reads, with that add's other input and the
// activation the add fuses: the normalization's op then runs the add and the activation too (a residual block's end
// in one pass forward and two backward, not three and four).
struct ResidualFusion {
  std::string residual;
  Activation activation;
  std::size_t layers;  // the normalization, the add and the activation taken in
};

std::optional<ResidualFusion> fusedResidual(const std::vector<LayerDescription>& layers, std::size_t index) {
  const LayerDescription& layer = layers[index];
  if (layerKindOf(layer) != LayerKind::batchnorm || layer.activation != Activation::none || index + 1 == layers.size()) return std::nullopt;
  const LayerDescription& add = layers[index + 1];
  const std::vector<std::string>& inputs = add.inputs;
  if (layerKindOf(add) != LayerKind::add || inputs.size() != 2 || (inputs[0] == layer.name) == (inputs[1] == layer.name) ||
      readAfter(layers, index + 2, layer.name)) {
    return std::nullopt;
  }
  const std::optional<Activation> activation = fusedActivation(layers, index + 1);
  return ResidualFusion{inputs[0] == layer.name ? inputs[1] : inputs[0], activation.value_or(add.activation), activation ? 3u : 2u};
}

Tensor buildLayers(const NetDescription& description, Graph& graph, Tensor images, bool training, const ParameterSource& parameter,
                   const std::string& source) {
  std::map<std::string, Tensor> outputs{{"input", images}};
  Tensor last = images;
  for (std::size_t index = 0; index < description.layers.size(); ++index) {
    LayerDescription layer = description.layers[index];
    const std::optional<Activation> fused = fusedActivation(description.layers, index);
    if (fused) layer.activation = *fused;
    const auto refuse = [&](const std::string& why) { return Error(source + ": layer '" + layer.name + "': " + why); };
    std::vector<Tensor> inputs;
    for (const std::string& name : layer.inputs) inputs.push_back(outputs.at(name));
    Tensor x = inputs[0];
    const Shape shape = graph.tensor(x).shape;  // a copy: applying ops grows the graph's tensors
    // An add of other shapes is left to refuse them in its own name.
    std::optional<ResidualFusion> residual = fusedResidual(description.layers, index);
    if (residual && graph.tensor(outputs.at(residual->residual)).shape != shape) residual.reset();
    if (residual) {
      layer.activation = residual->activation;
      inputs.push_back(outputs.at(residual->residual));
    }
    try {
      const LayerKind kind = layerKindOf(layer);
      x = rowOf(kind).build(LayerBuild{layer, graph, inputs, shape, training, parameter, refuse});
      if (layer.kernel) {
        // Sides, channels and padding each pass their own bound, their product not; in double, which cannot overflow.
        const Shape out = graph.tensor(x).shape;
        const double work = static_cast<double>(out[1]) * out[2] * out[3] * layer.kernel * layer.kernel * (kind == LayerKind::conv ? shape[1] / layer.groups : 1);
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
    if (fused) outputs[description.layers[++index].name] = x;
    for (std::size_t taken = 1; residual && taken < residual->layers; ++taken) outputs[description.layers[++index].name] = x;
    last = x;
  }
  return last;
}

}  // namespace glnet
