#include "convert/OnnxNetwork.h"

#include "convert/OnnxSequencePatterns.h"

#include "formats/OnnxProto.h"
#include "base/check.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

namespace glnet {
namespace {

using onnxformat::Attributes;
using onnxformat::describe;
using onnxformat::integer;
using onnxformat::integers;
using onnxformat::real;

bool endsWith(const std::string& text, const std::string& end) {
  return text.size() > end.size() && text.compare(text.size() - end.size(), end.size(), end) == 0;
}

// Nodes in the order the file lists them (ONNX requires it topological), each made into the layers of a description.
class Converter {
 public:
  explicit Converter(std::string path) : path_(std::move(path)) {}

  OnnxNetwork run() {
    const onnx::ModelProto model = readOnnxModelProto(path_);
    opset_ = onnxOpset(model);
    const onnx::GraphProto& graph = model.graph();
    readMetadata(model);
    for (const onnx::TensorProto& initializer : graph.initializer()) constants_[initializer.name()] = readOnnxTensor(initializer, path_);
    readInput(graph);
    for (const onnx::NodeProto& node : graph.node()) {
      for (const std::string& name : node.input()) readers_[name].push_back(&node);
    }
    if (graph.output_size() != 1) throw Error(path_ + ": the model has " + std::to_string(graph.output_size()) + " outputs; glnet trains models of one");
    output_ = graph.output(0).name();
    // An eval-mode export with constant folding shares equal initializers through Identity nodes (norm.bias =
    // Identity(block1.ln1.bias)): each is a parameter of its own, a copy.
    for (const onnx::NodeProto& node : graph.node()) {
      if (node.op_type() == "Identity" && node.input_size() == 1 && node.output_size() == 1 && constants_.count(node.input(0))) {
        constants_[node.output(0)] = constants_.at(node.input(0));
      }
    }
    findSilu(graph);
    findGelu(graph);
    sequenceLayers_ = findSequenceLayers(graph, opset_, readers_, constants_, output_, path_);
    result_.stretchLayers = sequenceLayers_.size();
    for (std::size_t k = 0; k < sequenceLayers_.size(); ++k) {
      absorbed_.insert(sequenceLayers_[k].inside.begin(), sequenceLayers_[k].inside.end());
      sequenceLayerAt_[sequenceLayers_[k].last] = k;
    }
    for (const onnx::NodeProto& node : graph.node()) convert(node);
    if (result_.description.layers.empty()) throw Error(path_ + ": the model has no layer to train");
    const auto last = layerOf_.find(output_);
    if (last == layerOf_.end() || last->second != result_.description.layers.back().name) {
      throw Error(path_ + ": the output " + output_ + " is not what the last node computes; glnet trains networks whose last layer gives the logits");
    }
    const std::string stem = std::filesystem::path(path_).stem().string();
    result_.description.name = isValidLayerName(graph.name()) ? graph.name() : isValidLayerName(stem) ? stem : "onnx";
    // The rules every description meets (a model file records it), checked once more on what was made here.
    result_.description = parseNetDescription(toJson(result_.description), path_);
    return std::move(result_);
  }

 private:
  [[noreturn]] void refuse(const onnx::NodeProto& node, const std::string& why) const {
    throw Error(path_ + ": node '" + node.name() + "' (" + node.op_type() + "): " + why);
  }

  void readMetadata(const onnx::ModelProto& model) {
    std::map<std::string, std::string> metadata;
    for (const onnx::StringStringEntryProto& entry : model.metadata_props()) metadata[entry.key()] = entry.value();
    if (metadata.count("input_mean") && metadata.count("input_std")) result_.input = inputFormatOf(metadata, path_);
  }

  // The one graph input that is no initializer: float, [batch, features] or [batch, channels, height, width].
  void readInput(const onnx::GraphProto& graph) {
    const onnx::ValueInfoProto* input = nullptr;
    for (const onnx::ValueInfoProto& candidate : graph.input()) {
      if (constants_.count(candidate.name())) continue;  // older exporters list initializers as inputs too
      if (input) throw Error(path_ + ": the model has more than one input; glnet trains models of one image input");
      input = &candidate;
    }
    if (!input) throw Error(path_ + ": the model has no input");
    const auto& type = input->type();
    const int elementType = type.has_tensor_type() ? type.tensor_type().elem_type() : 0;
    tokenIds_ = elementType == onnx::TensorProto::INT64 || elementType == onnx::TensorProto::INT32;
    if ((elementType != onnx::TensorProto::FLOAT && !tokenIds_) || !type.tensor_type().has_shape()) {
      throw Error(path_ + ": input " + input->name() + " is not a float tensor (or int64 or int32 token ids) of known shape");
    }
    const auto& dims = type.tensor_type().shape().dim();
    if (tokenIds_ && dims.size() != 2) {
      throw Error(path_ + ": input " + input->name() + " holds token ids of " + std::to_string(dims.size()) + " axes; glnet trains on ids [N, S]");
    }
    if (dims.size() != 2 && dims.size() != 4) {
      throw Error(path_ + ": input " + input->name() + " has " + std::to_string(dims.size()) + " axes; glnet trains on [N, features] or [N, C, H, W]");
    }
    for (int i = 1; i < dims.size(); ++i) {
      if (!dims[i].has_dim_value() || dims[i].dim_value() < 1 || dims[i].dim_value() > (1 << 16)) {
        throw Error(path_ + ": input " + input->name() + " needs a fixed size from 1 to 65536 on axis " + std::to_string(i));
      }
      result_.description.input.push_back(static_cast<std::uint32_t>(dims[i].dim_value()));
    }
    layerOf_[input->name()] = "input";
    rankOf_[input->name()] = static_cast<std::size_t>(dims.size());
  }

  // A Sigmoid read only by a Mul of its own input and itself is SiLU, as PyTorch exports it before opset 22.
  void findSilu(const onnx::GraphProto& graph) {
    for (const onnx::NodeProto& node : graph.node()) {
      if (node.op_type() != "Sigmoid" || node.input_size() != 1 || node.output_size() != 1 || node.output(0) == output_) continue;
      const auto& readers = readers_[node.output(0)];
      if (readers.size() != 1 || readers[0]->op_type() != "Mul" || readers[0]->input_size() != 2) continue;
      const onnx::NodeProto& mul = *readers[0];
      const bool pair = (mul.input(0) == node.input(0) && mul.input(1) == node.output(0)) ||
                        (mul.input(1) == node.input(0) && mul.input(0) == node.output(0));
      if (!pair) continue;
      absorbed_.insert(&node);
      patternInput_[&mul] = {LayerKind::silu, node.input(0)};
    }
  }

  // The one value of a scalar initializer or Constant node, or NaN.
  double scalar(const onnx::GraphProto& graph, const std::string& name) const {
    const auto found = constants_.find(name);
    if (found != constants_.end()) return found->second.elements() == 1 ? found->second.values[0] : NAN;
    for (const onnx::NodeProto& node : graph.node()) {
      if (node.op_type() != "Constant" || node.output_size() != 1 || node.output(0) != name) continue;
      for (const onnx::AttributeProto& attribute : node.attribute()) {
        if (attribute.name() != "value") continue;
        const OnnxConstant value = readOnnxTensor(attribute.t(), path_);
        return value.elements() == 1 ? value.values[0] : NAN;
      }
    }
    return NAN;
  }

  // Exact GELU as PyTorch exports it before opset 20: Div(x, √2) → Erf → Add(·, 1) → Mul(x, ·) → Mul(·, 0.5), each
  // read by the next alone; the last Mul becomes the gelu layer, the others run inside it.
  void findGelu(const onnx::GraphProto& graph) {
    const auto near = [](double value, double target) { return std::abs(value - target) <= 1e-6 * target; };
    // The sole reader of `node`'s output of type `op`, reading `node` and a scalar near `value` (any value: NaN).
    const auto next = [&](const onnx::NodeProto& node, const char* op, double value) -> const onnx::NodeProto* {
      if (node.output(0) == output_) return nullptr;
      const auto& readers = readers_[node.output(0)];
      if (readers.size() != 1 || readers[0]->op_type() != op || readers[0]->input_size() != 2) return nullptr;
      const onnx::NodeProto& reader = *readers[0];
      const std::string& other = reader.input(reader.input(0) == node.output(0) ? 1 : 0);
      return std::isnan(value) || near(scalar(graph, other), value) ? &reader : nullptr;
    };
    for (const onnx::NodeProto& div : graph.node()) {
      if (div.op_type() != "Div" || div.input_size() != 2 || !near(scalar(graph, div.input(1)), std::sqrt(2.0))) continue;
      const auto& erfReaders = readers_[div.output(0)];
      if (div.output(0) == output_ || erfReaders.size() != 1 || erfReaders[0]->op_type() != "Erf") continue;
      const onnx::NodeProto& erf = *erfReaders[0];
      const onnx::NodeProto* plusOne = next(erf, "Add", 1.0);
      const onnx::NodeProto* product = plusOne ? next(*plusOne, "Mul", NAN) : nullptr;
      if (!product || (product->input(0) != div.input(0) && product->input(1) != div.input(0))) continue;
      const onnx::NodeProto* half = next(*product, "Mul", 0.5);
      if (!half) continue;
      for (const onnx::NodeProto* inside : {&div, &erf, plusOne, product}) absorbed_.insert(inside);
      patternInput_[half] = {LayerKind::gelu, div.input(0)};
    }
  }

  Attributes attributes(const onnx::NodeProto& node, const std::set<std::string>& known) const {
    Attributes byName;
    for (const onnx::AttributeProto& attribute : node.attribute()) {
      if (!known.count(attribute.name())) refuse(node, "attribute " + attribute.name() + " is not supported for training");
      byName[attribute.name()] = &attribute;
    }
    return byName;
  }

  // Input `index`, an initializer or a Constant node's value.
  const OnnxConstant& constant(const onnx::NodeProto& node, int index) const {
    const auto found = index < node.input_size() ? constants_.find(node.input(index)) : constants_.end();
    if (found == constants_.end()) refuse(node, "input " + std::to_string(index) + " must be an initializer (a trained weight)");
    return found->second;
  }
  const OnnxConstant* optionalConstant(const onnx::NodeProto& node, int index) const {
    if (index >= node.input_size() || node.input(index).empty()) return nullptr;
    return &constant(node, index);
  }
  // The layer that computes input `index`.
  std::string layerInput(const onnx::NodeProto& node, int index) const {
    if (index >= node.input_size() || node.input(index).empty()) refuse(node, "input " + std::to_string(index) + " is missing");
    const auto found = layerOf_.find(node.input(index));
    if (found == layerOf_.end()) {
      refuse(node, constants_.count(node.input(index)) ? "input " + std::to_string(index) + " is a constant where glnet trains on computed tensors"
                                                        : "input '" + node.input(index) + "' is made by no earlier node");
    }
    return found->second;
  }
  // The axes of input 0, which a layer computes.
  std::size_t rank(const onnx::NodeProto& node) const {
    layerInput(node, 0);
    return rankOf_.at(node.input(0));
  }

  // A layer's name: its weight's prefix when PyTorch named it (conv1.weight: conv1), else the node's name made one.
  std::string nameFor(const onnx::NodeProto& node, const std::string& weight) {
    std::string name = endsWith(weight, ".weight") ? weight.substr(0, weight.size() - 7) : "";
    if (!isValidLayerName(name) || names_.count(name)) {
      const std::string& source = node.name().empty() ? node.output(0) : node.name();
      name.clear();
      const std::size_t start = std::min(source.find_first_not_of('/'), source.size());  // "/conv1/Conv" → "conv1.Conv"
      for (const char c : source.substr(start, 100)) {
        const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
        name += c == '/' ? '.' : plain ? c : '_';
      }
      if (name.empty() || name == "input") name = "layer" + std::to_string(result_.description.layers.size() + 1);
      const std::string base = name;
      for (int k = 2; names_.count(name); ++k) name = base + "." + std::to_string(k);
    }
    names_.insert(name);
    return name;
  }

  void weight(const std::string& name, const std::vector<std::int64_t>& shape, const std::vector<double>& values) {
    result_.weights.tensors[name] = HostTensor{shape, std::vector<float>(values.begin(), values.end())};
  }

  // Adds the layer reading `inputs` (earlier layers' names); node's first output is its output, of `rank` axes.
  void add(const onnx::NodeProto& node, LayerDescription layer, std::vector<std::string> inputs, std::size_t outputRank) {
    layer.inputs = std::move(inputs);
    layerOf_[node.output(0)] = layer.name;
    rankOf_[node.output(0)] = outputRank;
    result_.description.layers.push_back(std::move(layer));
  }
  // The node's output is its input's value (Identity, a Dropout of rate 0, a last Softmax).
  void alias(const onnx::NodeProto& node) {
    const std::string input = layerInput(node, 0);
    layerOf_[node.output(0)] = input;
    rankOf_[node.output(0)] = rank(node);
  }

  // A Relu, Tanh or Sigmoid that alone reads the output of the Conv or Gemm `node` runs inside it.
  Activation fuseActivation(const onnx::NodeProto& node) {
    const auto& readers = readers_[node.output(0)];
    if (node.output(0) == output_ || readers.size() != 1 || absorbed_.count(readers[0])) return Activation::none;
    const std::string& op = readers[0]->op_type();
    if (op != "Relu" && op != "Tanh" && op != "Sigmoid") return Activation::none;
    absorbed_.insert(readers[0]);
    fusedInto_[readers[0]] = &node;
    return op == "Relu" ? Activation::relu : op == "Tanh" ? Activation::tanh : Activation::sigmoid;
  }

  // kernel_shape, strides, pads and dilations of a 2-D window that glnet's layers take: square, one stride and one
  // padding on every side, no dilation.
  void window(const onnx::NodeProto& node, const Attributes& a, LayerDescription& layer, std::int64_t defaultKernel) {
    if (rank(node) != 4) refuse(node, "glnet trains 2-D windows over [N, C, H, W]");
    const std::string autoPad = a.count("auto_pad") ? a.at("auto_pad")->s() : "NOTSET";
    if (autoPad != "NOTSET") refuse(node, "auto_pad " + autoPad + " is not supported for training; export with explicit pads");
    std::vector<std::int64_t> kernel = integers(a, "kernel_shape");
    if (kernel.empty() && defaultKernel > 0) kernel = {defaultKernel, defaultKernel};
    const std::vector<std::int64_t> strides = integers(a, "strides"), pads = integers(a, "pads"), dilations = integers(a, "dilations");
    const auto same = [](const std::vector<std::int64_t>& v) { return std::all_of(v.begin(), v.end(), [&](std::int64_t x) { return x == v[0]; }); };
    if (kernel.size() != 2 || !same(kernel) || kernel[0] < 1 || kernel[0] > (1 << 16)) refuse(node, "glnet trains square 2-D kernels, not " + describe(kernel));
    if ((!strides.empty() && (strides.size() != 2 || !same(strides))) || (!pads.empty() && (pads.size() != 4 || !same(pads)))) {
      refuse(node, "glnet trains one stride and one padding on every side, not strides " + describe(strides) + " and pads " + describe(pads));
    }
    if (std::any_of(dilations.begin(), dilations.end(), [](std::int64_t d) { return d != 1; })) refuse(node, "dilated windows are not supported for training");
    layer.kernel = static_cast<std::uint32_t>(kernel[0]);
    const std::int64_t stride = strides.empty() ? 1 : strides[0], padding = pads.empty() ? 0 : pads[0];
    if (stride < 1 || stride > (1 << 16) || padding < 0 || padding > (1 << 16)) refuse(node, "a stride or padding out of range");
    layer.stride = static_cast<std::uint32_t>(stride);
    layer.padding = static_cast<std::uint32_t>(padding);
  }

  void conv(const onnx::NodeProto& node, LayerKind kind) {
    const Attributes a = attributes(node, {"kernel_shape", "strides", "pads", "dilations", "group", "auto_pad"});
    const OnnxConstant& w = constant(node, 1);
    if (w.shape.size() != 4 || w.shape[0] < 1 || w.shape[0] > (1 << 16)) refuse(node, "the weight must be [outputs, channels/groups, kernel, kernel], not " + describe(w.shape));
    LayerDescription layer;
    layer.kind = layerKindName(kind);
    window(node, a, layer, w.shape[2]);
    if (w.shape[2] != layer.kernel || w.shape[3] != layer.kernel) refuse(node, "the weight " + describe(w.shape) + " does not match kernel_shape");
    const std::int64_t groups = integer(a, "group", 1);
    if (groups < 1 || w.shape[0] % groups != 0) refuse(node, "group " + std::to_string(groups) + " does not divide the outputs");
    layer.groups = static_cast<std::uint32_t>(groups);
    layer.outputs = static_cast<std::uint32_t>(w.shape[0]);
    layer.name = nameFor(node, node.input(1));
    const std::string input = layerInput(node, 0);
    layer.activation = fuseActivation(node);
    weight(layer.name + ".weight", w.shape, w.values);
    biasOf(node, 2, layer);
    add(node, layer, {input}, 4);
  }

  void biasOf(const onnx::NodeProto& node, int index, const LayerDescription& layer) {
    const OnnxConstant* b = optionalConstant(node, index);
    if (b && b->elements() != layer.outputs) refuse(node, "the bias holds " + std::to_string(b->elements()) + " values for " + std::to_string(layer.outputs) + " outputs");
    const std::int64_t outputs = layer.outputs;
    weight(layer.name + ".bias", {outputs}, b ? b->values : std::vector<double>(layer.outputs, 0.0));
  }

  void gemm(const onnx::NodeProto& node, LayerKind kind) {
    const Attributes a = attributes(node, {"alpha", "beta", "transA", "transB"});
    if (real(a, "alpha", 1.0) != 1.0 || real(a, "beta", 1.0) != 1.0 || integer(a, "transA", 0) != 0) {
      refuse(node, "glnet trains Gemm as PyTorch's Linear exports it (alpha and beta 1, A not transposed)");
    }
    if (rank(node) != 2) refuse(node, "A must be [N, features]");
    const OnnxConstant& b = constant(node, 1);
    if (b.shape.size() != 2 || b.shape[0] < 1 || b.shape[1] < 1) refuse(node, "B must be a matrix of weights, not " + describe(b.shape));
    const bool transposed = integer(a, "transB", 0) != 0;
    const std::int64_t outputs = transposed ? b.shape[0] : b.shape[1], features = transposed ? b.shape[1] : b.shape[0];
    std::vector<double> values = b.values;
    if (!transposed) {  // glnet's dense weight is [outputs, features], as PyTorch's
      for (std::int64_t o = 0; o < outputs; ++o) {
        for (std::int64_t f = 0; f < features; ++f) values[static_cast<std::size_t>(o * features + f)] = b.values[static_cast<std::size_t>(f * outputs + o)];
      }
    }
    if (outputs > (1 << 16)) refuse(node, "more than 65536 outputs");
    LayerDescription layer;
    layer.kind = layerKindName(kind);
    layer.outputs = static_cast<std::uint32_t>(outputs);
    layer.name = nameFor(node, node.input(1));
    const std::string input = layerInput(node, 0);
    layer.activation = fuseActivation(node);
    weight(layer.name + ".weight", {outputs, features}, values);
    biasOf(node, 2, layer);
    add(node, layer, {input}, 2);
  }

  void batchNorm(const onnx::NodeProto& node, LayerKind kind) {
    const Attributes a = attributes(node, {"epsilon", "momentum", "training_mode", "spatial"});
    if (integer(a, "spatial", 1) != 1) refuse(node, "spatial 0 is not supported");
    const double epsilon = real(a, "epsilon", 1e-5), momentum = real(a, "momentum", 0.9);
    if (!(epsilon > 0 && epsilon < 1)) refuse(node, "epsilon must be in (0, 1)");
    // ONNX weighs the running value by momentum, PyTorch the batch's.
    if (!(momentum >= 0 && momentum < 1)) refuse(node, "momentum must be in [0, 1)");
    if (rank(node) < 2) refuse(node, "batch normalization reads [N, C, ...]");
    LayerDescription layer;
    layer.kind = layerKindName(kind);
    layer.epsilon = static_cast<float>(epsilon);
    layer.momentum = static_cast<float>(1.0 - momentum);
    layer.name = nameFor(node, node.input(1));
    const std::string input = layerInput(node, 0);
    const char* suffixes[] = {".weight", ".bias", ".running_mean", ".running_var"};
    for (int k = 0; k < 4; ++k) {
      const OnnxConstant& value = constant(node, k + 1);
      if (value.shape.size() != 1) refuse(node, "input " + std::to_string(k + 1) + " must hold one value per channel, not " + describe(value.shape));
      if (k == 3) {
        if (const std::string problem = onnxformat::varianceProblem(value.values, epsilon); !problem.empty()) refuse(node, problem);
      }
      weight(layer.name + suffixes[k], value.shape, value.values);
    }
    add(node, layer, {input}, rank(node));
  }

  // Along the last axis only (PyTorch's LayerNorm(C)); a missing bias is zeros. Mean and InvStdDev, the optional
  // outputs, must be unread.
  void layerNorm(const onnx::NodeProto& node, LayerKind kind) {
    const Attributes a = attributes(node, {"axis", "epsilon", "stash_type"});
    const std::int64_t axis = integer(a, "axis", -1);
    if (axis != -1 && axis != static_cast<std::int64_t>(rank(node)) - 1) refuse(node, "glnet trains layer normalization along the last axis only");
    if (integer(a, "stash_type", 1) != 1) refuse(node, "stash_type must be 1 (float statistics)");
    const double epsilon = real(a, "epsilon", 1e-5);
    if (!(epsilon > 0 && epsilon < 1)) refuse(node, "epsilon must be in (0, 1)");
    for (int k = 1; k < node.output_size(); ++k) {
      if (!node.output(k).empty() && !readers_[node.output(k)].empty()) refuse(node, "its mean and deviation outputs are read; glnet trains only its first");
    }
    if (rank(node) < 2) refuse(node, "layer normalization reads [N, ..., C]");
    LayerDescription layer;
    layer.kind = layerKindName(kind);
    layer.epsilon = static_cast<float>(epsilon);
    layer.name = nameFor(node, node.input(1));
    const std::string input = layerInput(node, 0);
    const OnnxConstant& scale = constant(node, 1);
    if (scale.shape.size() != 1) refuse(node, "its scale must hold one value per feature, not " + describe(scale.shape));
    const OnnxConstant* bias = optionalConstant(node, 2);
    if (bias && bias->shape != scale.shape) refuse(node, "its bias must have the scale's shape " + describe(scale.shape) + ", not " + describe(bias->shape));
    weight(layer.name + ".weight", scale.shape, scale.values);
    weight(layer.name + ".bias", scale.shape, bias ? bias->values : std::vector<double>(scale.values.size(), 0.0));
    add(node, layer, {input}, rank(node));
  }

  void pool(const onnx::NodeProto& node, LayerKind kind) {
    const bool average = kind == LayerKind::avgpool;
    const Attributes a = average ? attributes(node, {"kernel_shape", "strides", "pads", "ceil_mode", "count_include_pad", "auto_pad"})
                                 : attributes(node, {"kernel_shape", "strides", "pads", "ceil_mode", "dilations", "auto_pad", "storage_order"});
    LayerDescription layer;
    layer.kind = layerKindName(kind);
    window(node, a, layer, 0);
    if (integer(a, "ceil_mode", 0) != 0) refuse(node, "ceil_mode 1 is not supported for training");
    if (integer(a, "storage_order", 0) != 0) refuse(node, "storage_order 1 is not supported");
    if (average && layer.padding > 0 && integer(a, "count_include_pad", 0) != 0) {
      refuse(node, "glnet's average pooling leaves padding out of the average (count_include_pad 0)");
    }
    if (2 * layer.padding > layer.kernel) refuse(node, "padding must be at most half the kernel");
    layer.name = nameFor(node, "");
    add(node, layer, {layerInput(node, 0)}, 4);
  }

  void simple(const onnx::NodeProto& node, LayerKind kind, std::vector<std::string> inputs, std::size_t outputRank) {
    attributes(node, {});
    LayerDescription layer;
    layer.kind = layerKindName(kind);
    layer.name = nameFor(node, "");
    add(node, layer, std::move(inputs), outputRank);
  }

  void convert(const onnx::NodeProto& node) {
    if (!node.domain().empty() && node.domain() != "ai.onnx") refuse(node, "the domain " + node.domain() + " is not supported");
    if (node.output_size() < 1) refuse(node, "it has no output");
    const std::string& op = node.op_type();
    // Second outputs (a training-mode BatchNormalization's running statistics, Dropout's mask, MaxPool's indices)
    // are glnet's own business while training; nothing may read them.
    for (int k = 1; k < node.output_size(); ++k) {
      if (!node.output(k).empty() && (readers_.count(node.output(k)) || node.output(k) == output_)) {
        refuse(node, "its output " + std::to_string(k) + " is read; glnet trains with the first output alone");
      }
    }
    if (const auto found = sequenceLayerAt_.find(&node); found != sequenceLayerAt_.end()) {
      sequenceLayer(node, sequenceLayers_[found->second]);
      return;
    }
    if (absorbed_.count(&node)) {
      const auto fused = fusedInto_.find(&node);
      if (fused != fusedInto_.end()) {
        const auto layer = layerOf_.find(fused->second->output(0));
        if (layer == layerOf_.end()) refuse(node, "it comes before the node whose output it reads");
        layerOf_[node.output(0)] = layer->second;
        rankOf_[node.output(0)] = rankOf_.at(fused->second->output(0));
      }
      return;
    }
    if (op == "Constant") {
      const Attributes a = attributes(node, {"value"});
      if (!a.count("value")) refuse(node, "glnet reads Constant nodes with a tensor value");
      constants_[node.output(0)] = readOnnxTensor(a.at("value")->t(), path_);
    } else if (op == "Identity") {
      if (!constants_.count(node.output(0))) alias(node);
    } else if ((op == "Softmax" || op == "LogSoftmax") && node.output(0) == output_) {
      // The loss applies its own softmax to the logits.
      const Attributes a = attributes(node, {"axis"});
      const std::int64_t axis = integer(a, "axis", opset_ < 13 ? 1 : -1);
      if (rank(node) != 2 || (axis != 1 && axis != -1)) refuse(node, "glnet trains a last softmax over the classes of [N, classes]");
      alias(node);
    } else {
      const auto& rows = readings();
      // A Mul ending a pattern is read as the pattern's kind; any other op as the first row of its type.
      const auto patternFound = patternInput_.find(&node);
      const auto row = std::find_if(rows.begin(), rows.end(), [&](const Reading& r) {
        return r.op && op == r.op && (patternFound == patternInput_.end() || r.kind == patternFound->second.first);
      });
      if (row == rows.end()) unsupported(node);
      (this->*row->read)(node, row->kind);
    }
  }

  // A transformer layer that findSequenceLayers found, ending at `node`.
  void sequenceLayer(const onnx::NodeProto& node, const OnnxSequenceLayer& found) {
    std::vector<std::string> inputs;
    for (const std::string& tensor : found.inputs) {
      const auto input = layerOf_.find(tensor);
      if (input == layerOf_.end()) refuse(node, "its input '" + tensor + "' is made by no earlier node");
      inputs.push_back(input->second);
    }
    const std::size_t inputRank = rankOf_.at(found.inputs[0]);
    const LayerKind kind = *findLayerKind(found.layer.kind);
    const bool readsIds = kind == LayerKind::embedding || kind == LayerKind::mask;
    if (readsIds && (inputs[0] != "input" || !tokenIds_)) refuse(node, "glnet trains a " + found.layer.kind + " layer on the model's input of token ids alone");
    const std::size_t leastRank = kind == LayerKind::linear || readsIds ? 2 : kind == LayerKind::tokens ? 4 : 3;
    if (inputRank < leastRank || (kind == LayerKind::tokens && inputRank != 4)) {
      refuse(node, "it reads a tensor of " + std::to_string(inputRank) + " axes, which a " + found.layer.kind + " layer does not take");
    }
    const std::size_t outputRank = kind == LayerKind::tokens ? 3 : kind == LayerKind::embedding ? inputRank + 1 : kind == LayerKind::first ? inputRank - 1 : inputRank;
    LayerDescription layer = found.layer;
    layer.name = nameFor(node, found.nameHint);
    if (kind == LayerKind::linear) layer.activation = fuseActivation(node);
    for (const auto& [suffix, tensor] : found.weights) result_.weights.tensors[layer.name + suffix] = tensor;
    add(node, layer, inputs, outputRank);
  }

  // The refusal of a node that is no trainable layer, listing the ops that are.
  [[noreturn]] void unsupported(const onnx::NodeProto& node) const {
    static const std::string trainable = [] {
      std::string list;
      for (const Reading& row : readings()) {
        if (row.op) list += std::string(row.shown) + ", ";
      }
      return list + "Identity, Constant and a last Softmax, and as PyTorch exports them MultiheadAttention (self-attention, "
                    "batch_first, a key_padding_mask of ids == pad or none), Linear on [N, ..., E], flatten(2).transpose(1, 2), an added "
                    "position weight, nn.Embedding of token ids and x[:, 0]";
    }();
    const std::string& op = node.op_type();
    refuse(node, "glnet trains " + trainable + (op == "Reshape" || op == "Shape" ? "; flatten with torch.flatten(x, 1) rather than view or reshape" : ""));
  }

  // Relu, Tanh, Sigmoid and HardSwish that no Conv or Gemm runs.
  void pointwise(const onnx::NodeProto& node, LayerKind kind) { simple(node, kind, {layerInput(node, 0)}, rank(node)); }

  // The last Mul of SiLU's x·Sigmoid(x) (findSilu) or of GELU (findGelu), a layer reading x; any other Mul is refused.
  void pattern(const onnx::NodeProto& node, LayerKind kind) {
    const auto found = patternInput_.find(&node);
    if (found == patternInput_.end() || found->second.first != kind) unsupported(node);
    const std::string& x = found->second.second;
    const auto layer = layerOf_.find(x);
    if (layer == layerOf_.end()) refuse(node, "its input '" + x + "' is made by no earlier node");
    simple(node, kind, {layer->second}, rankOf_.at(x));
  }

  void sum(const onnx::NodeProto& node, LayerKind kind) {
    if (node.input_size() != 2) refuse(node, "Add takes two inputs");
    simple(node, kind, {layerInput(node, 0), layerInput(node, 1)}, rank(node));
  }

  void concat(const onnx::NodeProto& node, LayerKind kind) {
    const Attributes a = attributes(node, {"axis"});
    const std::int64_t axis = integer(a, "axis", 1);
    if (axis != 1 && axis != 1 - static_cast<std::int64_t>(rank(node))) refuse(node, "glnet trains concatenations of channels (axis 1)");
    if (node.input_size() < 2 || node.input_size() > 32) refuse(node, "glnet trains concatenations of 2 to 32 tensors");
    std::vector<std::string> inputs;
    for (int k = 0; k < node.input_size(); ++k) inputs.push_back(layerInput(node, k));
    LayerDescription layer;
    layer.kind = layerKindName(kind);
    layer.name = nameFor(node, "");
    add(node, layer, inputs, rank(node));
  }

  void globalPool(const onnx::NodeProto& node, LayerKind kind) {
    if (rank(node) != 4) refuse(node, "glnet trains global pooling of [N, C, H, W]");
    simple(node, kind, {layerInput(node, 0)}, 4);
  }

  void flatten(const onnx::NodeProto& node, LayerKind kind) {
    const Attributes a = attributes(node, {"axis"});
    if (integer(a, "axis", 1) != 1) refuse(node, "glnet trains Flatten with axis 1 (torch.flatten(x, 1))");
    if (rank(node) == 2) {
      alias(node);
      return;
    }
    LayerDescription layer;
    layer.kind = layerKindName(kind);
    layer.name = nameFor(node, "");
    add(node, layer, {layerInput(node, 0)}, 2);
  }

  void dropout(const onnx::NodeProto& node, LayerKind kind) {
    const Attributes a = attributes(node, {"ratio", "is_test", "seed"});
    double rate = real(a, "ratio", 0.5);
    if (const OnnxConstant* ratio = opset_ >= 12 ? optionalConstant(node, 1) : nullptr) {
      if (ratio->elements() != 1) refuse(node, "the ratio must be one number");
      rate = ratio->values[0];
    }
    if (!(rate >= 0 && rate < 1)) refuse(node, "the ratio must be in [0, 1)");
    if (rate == 0) {
      alias(node);
      return;
    }
    LayerDescription layer;
    layer.kind = layerKindName(kind);
    layer.rate = static_cast<float>(rate);
    layer.name = nameFor(node, "");
    add(node, layer, {layerInput(node, 0)}, rank(node));
  }

  // One row per LayerKind, in its order: the ONNX op read as a layer of the kind (null: none is), its name in errors,
  // and its reader.
  struct Reading {
    LayerKind kind;
    const char* op;
    const char* shown;
    void (Converter::*read)(const onnx::NodeProto& node, LayerKind kind);
  };

 public:
  static const std::array<Reading, layerKindCount>& readings() {
    static constexpr std::array<Reading, layerKindCount> rows{{
        {LayerKind::conv, "Conv", "Conv", &Converter::conv},
        {LayerKind::dense, "Gemm", "Gemm", &Converter::gemm},
        {LayerKind::linear, nullptr, nullptr, nullptr},     // stretches of nodes (OnnxSequencePatterns.h)
        {LayerKind::attention, nullptr, nullptr, nullptr},
        {LayerKind::batchnorm, "BatchNormalization", "BatchNormalization", &Converter::batchNorm},
        {LayerKind::layernorm, "LayerNormalization", "LayerNormalization", &Converter::layerNorm},
        {LayerKind::relu, "Relu", "Relu", &Converter::pointwise},
        {LayerKind::tanh, "Tanh", "Tanh", &Converter::pointwise},
        {LayerKind::sigmoid, "Sigmoid", "Sigmoid", &Converter::pointwise},
        {LayerKind::hardswish, "HardSwish", "HardSwish", &Converter::pointwise},
        {LayerKind::silu, "Mul", "x*Sigmoid(x)", &Converter::pattern},
        {LayerKind::gelu, "Mul", "x*(1+Erf(x/sqrt(2)))/2", &Converter::pattern},  // the tanh form is not recognised yet
        {LayerKind::add, "Add", "Add", &Converter::sum},
        {LayerKind::concat, "Concat", "Concat", &Converter::concat},
        {LayerKind::maxpool, "MaxPool", "MaxPool", &Converter::pool},
        {LayerKind::avgpool, "AveragePool", "AveragePool", &Converter::pool},
        {LayerKind::globalavgpool, "GlobalAveragePool", "GlobalAveragePool", &Converter::globalPool},
        {LayerKind::flatten, "Flatten", "Flatten", &Converter::flatten},
        {LayerKind::tokens, nullptr, nullptr, nullptr},    // stretches of nodes as well
        {LayerKind::position, nullptr, nullptr, nullptr},
        {LayerKind::embedding, nullptr, nullptr, nullptr},
        {LayerKind::mask, nullptr, nullptr, nullptr},
        {LayerKind::first, nullptr, nullptr, nullptr},
        {LayerKind::dropout, "Dropout", "Dropout", &Converter::dropout},
    }};
    static_assert(oneRowPerKind(rows), "readings() holds one row per LayerKind, in its order");
    return rows;
  }

  std::string path_;
  std::int64_t opset_ = 0;
  std::string output_;
  std::map<std::string, OnnxConstant> constants_;
  std::map<std::string, std::string> layerOf_;  // a tensor's layer ("input" for the graph's input)
  std::map<std::string, std::size_t> rankOf_;   // its axes, the batch's included
  std::map<std::string, std::vector<const onnx::NodeProto*>> readers_;
  std::set<const onnx::NodeProto*> absorbed_;  // activations run by the layer before them, SiLU's Sigmoid, GELU's inner nodes
  std::map<const onnx::NodeProto*, const onnx::NodeProto*> fusedInto_;
  std::map<const onnx::NodeProto*, std::pair<LayerKind, std::string>> patternInput_;  // SiLU's or GELU's last Mul: the kind, its x
  std::set<std::string> names_;
  bool tokenIds_ = false;  // the input holds token ids (int64 or int32), which embedding and mask layers read
  std::vector<OnnxSequenceLayer> sequenceLayers_;
  std::map<const onnx::NodeProto*, std::size_t> sequenceLayerAt_;  // a transformer layer's last node: its index
  OnnxNetwork result_;
};

}  // namespace

OnnxNetwork readOnnxNetwork(const std::string& path) { return Converter(path).run(); }

std::string onnxOpFineTuning(const std::string& type) {
  // The ops the converter takes apart from its readings (aliases, constants, the last softmax), and the readings
  // that are layers of their own (a Mul only as SiLU's).
  if (type == "Identity" || type == "Constant" || type == "Softmax" || type == "LogSoftmax") return "yes";
  for (const auto& row : Converter::readings()) {
    if (row.op && type == row.op && std::string(row.shown) == row.op) return "yes";
  }
  // The nodes of SiLU and GELU, and of the stretches OnnxSequencePatterns.h reads as transformer layers.
  static const std::set<std::string> parts{"Cast", "ConstantOfShape", "Div", "Equal", "Erf", "Expand", "Gather", "MatMul", "Mod",
                                           "Mul", "Reshape", "Shape", "Slice", "Sqrt", "Squeeze", "Transpose", "Unsqueeze", "Where"};
  return parts.count(type) ? "in layers" : "no";
}

}  // namespace glnet
