#include "formats/Onnx.h"

#include "formats/OnnxProto.h"
#include "gl/FileInput.h"
#include "gl/check.h"
#include "graph/InferenceOps.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>

namespace glnet {
namespace {

// A constant on the host: an initializer, a Constant node's value, or a folded result.
using Constant = OnnxConstant;
// Folded constants are shapes and small tables; anything larger is no shape arithmetic.
constexpr std::size_t largestFolded = std::size_t{1} << 22;

// A tensor name's value while the graph is built: a constant on the host, or a tensor of the glnet graph.
struct Value {
  bool constant = false;
  Constant host;
  Tensor tensor;
};

using onnxformat::describe;
using onnxformat::integer;
using onnxformat::integers;
using onnxformat::real;

class Importer {
 public:
  Importer(std::string path, std::uint32_t batch) : path_(std::move(path)), batch_(batch) {}

  OnnxModel run() {
    const onnx::ModelProto model = readOnnxModelProto(path_);
    result_.opset = onnxOpset(model);
    for (const onnx::StringStringEntryProto& entry : model.metadata_props()) result_.metadata[entry.key()] = entry.value();
    result_.producer = model.producer_name() + (model.producer_version().empty() ? "" : " " + model.producer_version());
    const onnx::GraphProto& graph = model.graph();
    for (const onnx::NodeProto& node : graph.node()) {
      for (const std::string& name : node.input()) {
        ++consumers_[name];
        if (readers_[name].empty() || readers_[name].back() != &node) readers_[name].push_back(&node);
      }
    }
    for (const onnx::ValueInfoProto& output : graph.output()) ++consumers_[output.name()];
    for (const onnx::TensorProto& initializer : graph.initializer()) values_[initializer.name()] = {true, readTensor(initializer), {}};
    readInputs(graph);
    // Constant nodes first: they read nothing, and a Clip's bounds must be known when the Conv before it decides
    // whether to fuse it.
    for (const onnx::NodeProto& node : graph.node()) {
      if (node.op_type() == "Constant" && node.input_size() == 0 && (node.domain().empty() || node.domain() == "ai.onnx")) importNode(node);
    }
    for (const onnx::NodeProto& node : graph.node()) {
      if (node.op_type() != "Constant" || node.input_size() != 0 || !(node.domain().empty() || node.domain() == "ai.onnx")) importNode(node);
    }
    if (graph.output_size() < 1) throw Error(path_ + ": the model has no output");
    for (const onnx::ValueInfoProto& port : graph.output()) {
      const Value& output = value(port.name(), "the graph output");
      if (output.constant) throw Error(path_ + ": the output " + port.name() + " is a constant; nothing to run");
      Tensor tensor = output.tensor;
      // A graph output that is an input (Identity) or another output gets a copy of its own.
      const bool taken = std::any_of(result_.outputs.begin(), result_.outputs.end(), [&](const auto& o) { return o.second.id == tensor.id; });
      if (graph_.tensor(tensor).role != TensorRole::computed || taken) tensor = graph_.apply(expandOp(graph_.tensor(tensor).shape), {tensor}, port.name());
      result_.outputs.push_back({port.name(), tensor});
    }
    result_.outputName = result_.outputs[0].first;
    result_.output = result_.outputs[0].second;
    const auto softmax = softmaxInputs_.find(result_.output.id);
    result_.logits = softmax == softmaxInputs_.end() ? result_.output : softmax->second;
    result_.graph = std::move(graph_);
    return std::move(result_);
  }

 private:
  [[noreturn]] void refuse(const onnx::NodeProto& node, const std::string& why) const {
    throw Error(path_ + ": node '" + node.name() + "' (" + node.op_type() + ", opset " + std::to_string(result_.opset) + "): " + why);
  }

  Constant readTensor(const onnx::TensorProto& tensor) const { return readOnnxTensor(tensor, path_); }

  // Every graph input that is no initializer: float tensors whose only symbolic dimension is the first (the
  // batch), which takes the bound batch.
  void readInputs(const onnx::GraphProto& graph) {
    for (const onnx::ValueInfoProto& input : graph.input()) {
      if (values_.count(input.name())) continue;  // older exporters list initializers as inputs too
      const int type = input.type().has_tensor_type() ? input.type().tensor_type().elem_type() : 0;
      if (type != onnx::TensorProto::FLOAT && type != onnx::TensorProto::UINT8) {
        throw Error(path_ + ": input " + input.name() + " is neither a float nor a uint8 tensor");
      }
      if (!input.type().tensor_type().has_shape()) throw Error(path_ + ": input " + input.name() + " has no shape");
      const bool first = result_.inputs.empty();
      bool batched = false;
      Shape shape;
      const auto& dims = input.type().tensor_type().shape().dim();
      for (int i = 0; i < dims.size(); ++i) {
        if (dims[i].has_dim_value()) {
          const std::int64_t d = dims[i].dim_value();
          if (d < 1 || d > (1 << 24)) throw Error(path_ + ": input " + input.name() + " has dimension " + std::to_string(d));
          shape.push_back(static_cast<std::uint32_t>(d));
        } else if (i == 0) {
          shape.push_back(batch_ == 0 ? 1 : batch_);
          result_.dynamicBatch = result_.dynamicBatch || first;
          batched = true;
        } else {
          throw Error(path_ + ": input " + input.name() + " has a symbolic dimension " + std::to_string(i) + "; only the batch may be");
        }
      }
      if (first && batch_ != 0 && (shape.empty() || shape[0] != batch_)) {
        throw Error(path_ + ": the model's batch is fixed at " + (shape.empty() ? std::string("none (a scalar input)") : std::to_string(shape[0])) +
                    ", not " + std::to_string(batch_));
      }
      const Tensor tensor = graph_.input(input.name(), shape);
      result_.inputs.push_back({input.name(), tensor});
      result_.batchedInputs.push_back(batched);
      result_.byteInputs.push_back(type == onnx::TensorProto::UINT8);
      values_[input.name()] = {false, {}, tensor};
    }
    if (result_.inputs.empty()) throw Error(path_ + ": the model has no input");
    result_.inputName = result_.inputs[0].first;
    result_.input = result_.inputs[0].second;
  }

  const Value& value(const std::string& name, const std::string& user) const {
    const auto found = values_.find(name);
    if (found == values_.end()) throw Error(path_ + ": " + user + " reads '" + name + "', which no node or initializer makes");
    return found->second;
  }

  // The node's attributes by name, each checked against those the op takes.
  std::map<std::string, const onnx::AttributeProto*> attributes(const onnx::NodeProto& node, const std::set<std::string>& known) const {
    std::map<std::string, const onnx::AttributeProto*> byName;
    for (const onnx::AttributeProto& attribute : node.attribute()) {
      if (!known.count(attribute.name())) refuse(node, "attribute " + attribute.name() + " is not supported");
      byName[attribute.name()] = &attribute;
    }
    return byName;
  }

  // Input `index` of a node, which must be given (a node's input list is the file's to get wrong).
  const Value& operand(const onnx::NodeProto& node, int index) const {
    if (index >= node.input_size() || node.input(index).empty()) refuse(node, "input " + std::to_string(index) + " is missing");
    return value(node.input(index), "node '" + node.name() + "'");
  }

  Tensor tensorInput(const onnx::NodeProto& node, int index) const {
    const Value& v = operand(node, index);
    if (v.constant) refuse(node, "input " + std::to_string(index) + " is a constant where glnet computes a tensor");
    return v.tensor;
  }
  const Constant* constantInput(const onnx::NodeProto& node, int index) const {
    if (index >= node.input_size() || node.input(index).empty()) return nullptr;
    const Value& v = value(node.input(index), "node '" + node.name() + "'");
    if (!v.constant) refuse(node, "input " + std::to_string(index) + " must be a constant (an initializer) for glnet so far");
    return &v.host;
  }

  Tensor parameter(const std::string& name, const std::vector<std::int64_t>& shape, const std::vector<double>& values) {
    result_.parameterBytes += values.size() * sizeof(float);
    return graph_.parameter(name, Shape(shape.begin(), shape.end()), std::vector<float>(values.begin(), values.end()));
  }

  void define(const onnx::NodeProto& node, Tensor tensor, const std::string& glnetOp) {
    values_[node.output(0)] = {false, {}, tensor};
    result_.nodes.push_back({node.name(), node.op_type(), glnetOp, graph_.tensor(tensor).shape});
  }
  Tensor apply(const onnx::NodeProto& node, std::shared_ptr<const Op> op, const std::vector<Tensor>& inputs, const std::string& glnetOp) {
    try {
      const Tensor out = graph_.apply(std::move(op), inputs, node.name());
      define(node, out, glnetOp);
      return out;
    } catch (const Error& error) {
      refuse(node, error.what());
    }
  }

  void importNode(const onnx::NodeProto& node) {
    if (!node.domain().empty() && node.domain() != "ai.onnx") refuse(node, "the domain " + node.domain() + " is not supported");
    if (node.output_size() < 1) refuse(node, "it has no output");
    if (fused_.count(&node)) {
      // Its function runs inside the op that computes its input (see fusedPointwise), or that of the node named in
      // aliases_ (SiLU's Mul).
      const auto alias = aliases_.find(&node);
      const Value& in = alias == aliases_.end() ? operand(node, 0) : value(alias->second, "node '" + node.name() + "'");
      values_[node.output(0)] = in;
      result_.nodes.push_back({node.name(), node.op_type(), "fused", graph_.tensor(in.tensor).shape});
      return;
    }
    if (foldable(node)) {
      values_[node.output(0)] = {true, fold(node), {}};
      result_.nodes.push_back({node.name(), node.op_type(), "folded", {}});
      return;
    }
    const std::string& op = node.op_type();
    if (op == "Constant") {
      const auto a = attributes(node, {"value"});
      if (!a.count("value")) refuse(node, "only the value attribute is supported");
      values_[node.output(0)] = {true, readTensor(a.at("value")->t()), {}};
      result_.nodes.push_back({node.name(), op, "folded", {}});
    } else if (op == "Identity" || op == "Dropout" || op == "Cast") {
      const auto a = attributes(node, {"seed", "ratio", "training_mode", "to", "saturate"});
      if (op == "Cast" && integer(a, "to", 0) != onnx::TensorProto::FLOAT) refuse(node, "a tensor computed on the GPU stays float; casts to other types are not supported");
      if (op == "Dropout" && node.input_size() > 2 && !node.input(2).empty() && scalar(node, 2) != 0) refuse(node, "training mode is not supported");
      if (node.output_size() > 1 && !node.output(1).empty()) refuse(node, "the mask output is not supported (inference only)");
      const Value& in = operand(node, 0);
      values_[node.output(0)] = in;
      result_.nodes.push_back({node.name(), op, "identity", in.constant ? Shape{} : graph_.tensor(in.tensor).shape});
    } else if (op == "Gemm" || op == "MatMul") {
      importProduct(node);
    } else if (const std::optional<Pointwise> function = pointwiseOf(node)) {
      // x·sigmoid(x) (SiLU, EfficientNet's activation) as one op: the sigmoid's tensor is never made.
      const onnx::NodeProto* product = function->kind == PointwiseKind::sigmoid ? soleReader(node.output(0)) : nullptr;
      const bool silu = product && multiplies(*product, node.input(0), node.output(0));
      if (silu) {
        fused_.insert(product);
        aliases_[product] = node.output(0);
      }
      const Pointwise applied = silu ? Pointwise{PointwiseKind::silu} : *function;
      apply(node, pointwiseOp(applied), {tensorInput(node, 0)}, applied.name());
    } else if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Pow" || op == "PRelu" ||
               ((op == "Max" || op == "Min") && node.input_size() == 2)) {
      importBinary(node);
    } else if (op == "Sum" || op == "Mean" || op == "Max" || op == "Min") {
      importVariadic(node);
    } else if (op == "Conv") {
      importConv(node);
    } else if (op == "BatchNormalization") {
      importBatchNormalization(node);
    } else if (op == "MaxPool" || op == "AveragePool") {
      importPool(node);
    } else if (op == "GlobalAveragePool" || op == "GlobalMaxPool") {
      attributes(node, {});
      const Tensor x = tensorInput(node, 0);
      const auto rank = static_cast<std::uint32_t>(shapeOf(x).size());
      if (rank < 3) refuse(node, "the input must be [N, C, spatial...]");
      apply(node, axisOp(op == "GlobalAveragePool" ? AxisKind::mean : AxisKind::max, 2, rank, true), {x}, "global pool");
    } else if (op == "Softmax" || op == "LogSoftmax") {
      importSoftmax(node);
    } else if (op == "ReduceMean" || op == "ReduceSum" || op == "ReduceMax" || op == "ReduceMin" || op == "ReduceL1" || op == "ReduceL2" ||
               op == "ReduceSumSquare" || op == "ReduceLogSum" || op == "ReduceLogSumExp" || op == "ReduceProd") {
      importReduce(node);
    } else if (op == "LayerNormalization") {
      importLayerNormalization(node);
    } else if (op == "Flatten" || op == "Reshape" || op == "Squeeze" || op == "Unsqueeze") {
      importReshape(node);
    } else if (op == "Transpose") {
      const auto a = attributes(node, {"perm"});
      const Tensor x = tensorInput(node, 0);
      const std::size_t rank = shapeOf(x).size();
      std::vector<std::uint32_t> permutation;
      for (const std::int64_t p : integers(a, "perm")) permutation.push_back(static_cast<std::uint32_t>(std::clamp<std::int64_t>(p, 0, 1 << 20)));
      if (!a.count("perm")) {
        for (std::size_t i = rank; i-- > 0;) permutation.push_back(static_cast<std::uint32_t>(i));
      }
      apply(node, transposeOp(permutation), {x}, "transpose");
    } else if (op == "Slice") {
      importSlice(node);
    } else if (op == "Split") {
      importSplit(node);
    } else if (op == "Concat") {
      const auto a = attributes(node, {"axis"});
      std::vector<Tensor> parts;
      for (int i = 0; i < node.input_size(); ++i) parts.push_back(tensorOrConstant(node, i));
      const std::int64_t axis = normalizedAxis(node, integer(a, "axis", 0), shapeOf(parts[0]).size());
      apply(node, concatOp(static_cast<std::uint32_t>(axis)), parts, "concat");
    } else if (op == "Gather") {
      importGather(node);
    } else if (op == "Pad") {
      importPad(node);
    } else if (op == "Expand") {
      attributes(node, {});
      const Tensor x = tensorInput(node, 0);
      const std::vector<std::int64_t> shape = foldedShape(node, input(node, 1).values);
      apply(node, expandOp(Shape(shape.begin(), shape.end())), {x}, "expand");
    } else {
      refuse(node, "the op " + op + " is not supported yet");
    }
  }

  const Shape& shapeOf(Tensor t) const { return graph_.tensor(t).shape; }
  static std::string nameOf(const onnx::NodeProto& node) { return node.name().empty() ? node.output(0) : node.name(); }

  std::int64_t normalizedAxis(const onnx::NodeProto& node, std::int64_t axis, std::size_t rank, bool inclusiveEnd = false) const {
    const auto r = static_cast<std::int64_t>(rank);
    if (axis < -r || axis > r - (inclusiveEnd ? 0 : 1)) refuse(node, "axis " + std::to_string(axis) + " is outside rank " + std::to_string(rank));
    return axis < 0 ? axis + r : axis;
  }

  // A node's input as a GPU tensor: computed, or a constant uploaded as a parameter (once per name).
  Tensor tensorOrConstant(const onnx::NodeProto& node, int index) {
    const Value& v = operand(node, index);
    if (!v.constant) return v.tensor;
    const std::string& name = node.input(index);
    if (const auto found = uploaded_.find(name); found != uploaded_.end()) return found->second;
    for (const std::int64_t d : v.host.shape) {
      if (d < 1) refuse(node, "constant " + name + " has an empty dimension");
    }
    return uploaded_[name] = parameter(name, v.host.shape, v.host.values);
  }

  // The node that alone reads `name` (no other node, not a graph output), if any.
  const onnx::NodeProto* soleReader(const std::string& name) const {
    const auto found = readers_.find(name);
    if (found == readers_.end() || found->second.size() != 1 || consumers_.at(name) != 1) return nullptr;
    return found->second[0];
  }

  // The pointwise function a node computes, when it is one (Clip's bounds and Pow's exponent must be constants).
  std::optional<Pointwise> pointwiseOf(const onnx::NodeProto& node) const {
    const std::string& op = node.op_type();
    static const std::map<std::string, PointwiseKind> plain{
        {"Relu", PointwiseKind::relu}, {"Sigmoid", PointwiseKind::sigmoid}, {"Tanh", PointwiseKind::tanh}, {"HardSwish", PointwiseKind::hardSwish},
        {"Erf", PointwiseKind::erf}, {"Sqrt", PointwiseKind::sqrt}, {"Exp", PointwiseKind::exp}, {"Log", PointwiseKind::log},
        {"Neg", PointwiseKind::negate}, {"Abs", PointwiseKind::abs}, {"Reciprocal", PointwiseKind::reciprocal}, {"Softplus", PointwiseKind::softplus},
        {"Ceil", PointwiseKind::ceil}, {"Floor", PointwiseKind::floor}, {"Round", PointwiseKind::round}, {"Sign", PointwiseKind::sign},
        {"Sin", PointwiseKind::sin}, {"Cos", PointwiseKind::cos}, {"Tan", PointwiseKind::tan}, {"Asin", PointwiseKind::asin},
        {"Acos", PointwiseKind::acos}, {"Atan", PointwiseKind::atan}, {"Sinh", PointwiseKind::sinh}, {"Cosh", PointwiseKind::cosh},
        {"Asinh", PointwiseKind::asinh}, {"Acosh", PointwiseKind::acosh}, {"Atanh", PointwiseKind::atanh}, {"Softsign", PointwiseKind::softsign}};
    if (const auto found = plain.find(op); found != plain.end()) {
      attributes(node, {});
      return Pointwise{found->second};
    }
    if (op == "ThresholdedRelu" || op == "Celu") {
      const auto a = attributes(node, {"alpha"});
      return Pointwise{op == "Celu" ? PointwiseKind::celu : PointwiseKind::thresholdedRelu, static_cast<float>(real(a, "alpha", 1.0))};
    }
    if (op == "Shrink") {
      const auto a = attributes(node, {"bias", "lambd"});
      return Pointwise{PointwiseKind::shrink, static_cast<float>(real(a, "bias", 0.0)), static_cast<float>(real(a, "lambd", 0.5))};
    }
    if (op == "Selu") {
      const auto a = attributes(node, {"alpha", "gamma"});
      return Pointwise{PointwiseKind::selu, static_cast<float>(real(a, "alpha", 1.67326319217681884765625)),
                       static_cast<float>(real(a, "gamma", 1.05070102214813232421875))};
    }
    if (op == "LeakyRelu" || op == "Elu") {
      const auto a = attributes(node, {"alpha"});
      return Pointwise{op == "Elu" ? PointwiseKind::elu : PointwiseKind::leakyRelu, static_cast<float>(real(a, "alpha", op == "Elu" ? 1.0 : 0.01))};
    }
    if (op == "HardSigmoid") {
      const auto a = attributes(node, {"alpha", "beta"});
      return Pointwise{PointwiseKind::hardSigmoid, static_cast<float>(real(a, "alpha", 0.2)), static_cast<float>(real(a, "beta", 0.5))};
    }
    if (op == "Gelu") {
      const auto a = attributes(node, {"approximate"});
      const std::string approximate = a.count("approximate") ? a.at("approximate")->s() : "none";
      if (approximate != "none" && approximate != "tanh") refuse(node, "approximate = " + approximate + " is not supported");
      return Pointwise{approximate == "tanh" ? PointwiseKind::geluTanh : PointwiseKind::gelu};
    }
    if (op == "Clip") {
      const auto a = attributes(node, {"min", "max"});
      float low = -INFINITY, high = INFINITY;
      if (result_.opset < 11) {
        low = static_cast<float>(real(a, "min", -INFINITY));
        high = static_cast<float>(real(a, "max", INFINITY));
      } else {
        const auto bound = [&](int index, float otherwise) {
          if (index >= node.input_size() || node.input(index).empty()) return otherwise;
          const Value& v = operand(node, index);
          if (!v.constant || v.host.values.size() != 1) refuse(node, "min and max must be constant scalars");
          return static_cast<float>(v.host.values[0]);
        };
        low = bound(1, -INFINITY);
        high = bound(2, INFINITY);
      }
      return Pointwise{PointwiseKind::clip, low, high};
    }
    if (op == "Pow" && node.input_size() == 2) {
      const Value& exponent = operand(node, 1);
      if (exponent.constant && exponent.host.values.size() == 1 && !operand(node, 0).constant) {
        attributes(node, {});
        return Pointwise{PointwiseKind::pow, static_cast<float>(exponent.host.values[0])};
      }
    }
    return std::nullopt;
  }

  // The pointwise node that alone reads the output of `producer` (after a BatchNormalization that folds into it, if
  // `absorbsBatchNorm`: a layer importBatchNormalization folds into), or the Sigmoid and Mul of x·sigmoid(x) (SiLU)
  // that alone read it, marked to run inside the producer's kernel; `accepts` says which functions the kernel can
  // apply. Past a BatchNormalization that does not fold, the function would run before it.
  Pointwise fusedPointwise(const onnx::NodeProto& producer, const std::function<bool(const Pointwise&)>& accepts, bool absorbsBatchNorm = false) {
    std::string value = producer.output(0);
    const onnx::NodeProto* next = soleReader(value);
    if (absorbsBatchNorm && next && next->op_type() == "BatchNormalization" && next->output_size() >= 1) {
      value = next->output(0);
      next = soleReader(value);
    }
    if (!next) {
      const auto [sigmoid, product] = siluOf(value);
      if (!sigmoid || !accepts(Pointwise{PointwiseKind::silu})) return {};
      fused_.insert({sigmoid, product});
      aliases_[product] = value;
      return Pointwise{PointwiseKind::silu};
    }
    if (next->input_size() < 1) return {};
    const std::optional<Pointwise> function = pointwiseOf(*next);
    if (!function || !accepts(*function)) return {};
    fused_.insert(next);
    return *function;
  }
  // The Add that alone reads `producer`'s output and adds to it a tensor already computed and shaped as that output
  // (`shape`), with that tensor: the convolution adds it as it stores (a residual connection), marked fused.
  std::optional<std::pair<const onnx::NodeProto*, Tensor>> fusableResidual(const onnx::NodeProto& producer, const Shape& shape) {
    const onnx::NodeProto* add = soleReader(producer.output(0));
    if (!add || add->op_type() != "Add" || add->input_size() != 2 || add->output_size() != 1 || add->input(0) == add->input(1)) return std::nullopt;
    const std::string& other = add->input(add->input(0) == producer.output(0) ? 1 : 0);
    const auto found = values_.find(other);
    if (found == values_.end() || found->second.constant || shapeOf(found->second.tensor) != shape) return std::nullopt;
    fused_.insert(add);
    aliases_[add] = producer.output(0);
    return std::make_pair(add, found->second.tensor);
  }
  // Whether `node` is a Mul of exactly a and b, in either order.
  static bool multiplies(const onnx::NodeProto& node, const std::string& a, const std::string& b) {
    return node.op_type() == "Mul" && node.input_size() == 2 && node.output_size() == 1 &&
           ((node.input(0) == a && node.input(1) == b) || (node.input(0) == b && node.input(1) == a));
  }
  // The Sigmoid and the Mul that compute value·sigmoid(value) when they are value's only readers.
  std::pair<const onnx::NodeProto*, const onnx::NodeProto*> siluOf(const std::string& value) const {
    const auto found = readers_.find(value);
    if (found == readers_.end() || found->second.size() != 2 || consumers_.at(value) != 2) return {};
    for (const onnx::NodeProto* sigmoid : found->second) {
      if (sigmoid->op_type() != "Sigmoid" || sigmoid->input_size() != 1 || sigmoid->output_size() != 1 || !sigmoid->attribute().empty()) continue;
      const onnx::NodeProto* product = soleReader(sigmoid->output(0));
      if (product && multiplies(*product, value, sigmoid->output(0))) return {sigmoid, product};
    }
    return {};
  }
  // Whether every integer of an ints attribute (pads, dilations, ...) is v.
  static bool allInts(const onnx::AttributeProto& a, std::int64_t v) {
    return std::all_of(a.ints().begin(), a.ints().end(), [&](std::int64_t i) { return i == v; });
  }
  // A MaxPool that alone reads `producer`'s output (or that of the activation fused into it), with a 2×2 window,
  // stride 2, no padding, no dilation and floor rounding: a stride-1 convolution pools as it stores its output (or as
  // it sums its split), which saves the pooling's pass and the convolution's full-size output (vgg11 has five).
  const onnx::NodeProto* fusablePool(const onnx::NodeProto& producer) {
    const onnx::NodeProto* next = soleReader(producer.output(0));
    if (next && fused_.count(next)) next = next->output_size() >= 1 ? soleReader(next->output(0)) : nullptr;
    if (!next || next->op_type() != "MaxPool" || next->output_size() != 1) return nullptr;
    bool kernel = false, strides = false;
    for (const onnx::AttributeProto& a : next->attribute()) {
      const std::vector<std::int64_t> ints(a.ints().begin(), a.ints().end());
      bool fits = false;
      if (a.name() == "kernel_shape" || a.name() == "strides") {
        fits = ints == std::vector<std::int64_t>{2, 2};
        (a.name() == "kernel_shape" ? kernel : strides) = fits;
      } else if (a.name() == "pads") {
        fits = allInts(a, 0);
      } else if (a.name() == "dilations") {
        fits = allInts(a, 1);
      } else if (a.name() == "ceil_mode" || a.name() == "storage_order") {
        fits = a.i() == 0;
      } else if (a.name() == "auto_pad") {
        fits = a.s().empty() || a.s() == "NOTSET";
      }
      if (!fits) return nullptr;
    }
    return kernel && strides ? next : nullptr;
  }
  static std::optional<Activation> asActivation(const Pointwise& f) {
    if (f.kind == PointwiseKind::identity) return Activation::none;
    if (f.kind == PointwiseKind::relu) return Activation::relu;
    if (f.kind == PointwiseKind::sigmoid) return Activation::sigmoid;
    if (f.kind == PointwiseKind::tanh) return Activation::tanh;
    return std::nullopt;
  }

  // Gemm (Y = alpha·A·op(B) + beta·C) and MatMul (Y = A·B). A constant B makes a dense layer on the GEMM core
  // (A of any rank: its leading axes are rows); two computed operands make a batched product.
  void importProduct(const onnx::NodeProto& node) {
    const bool gemm = node.op_type() == "Gemm";
    const auto a = attributes(node, gemm ? std::set<std::string>{"alpha", "beta", "transA", "transB"} : std::set<std::string>{});
    const Value& right = operand(node, 1);
    if (!gemm && (!right.constant || right.host.shape.size() != 2)) {
      const Tensor x = tensorOrConstant(node, 0), y = tensorOrConstant(node, 1);
      if (shapeOf(x).size() < 2 || shapeOf(y).size() < 2) refuse(node, "products of 1-D tensors are not supported");
      apply(node, batchedMatMulOp(), {x, y}, "batched matmul");
      return;
    }
    if (integer(a, "transA", 0) != 0) refuse(node, "transA = 1 is not supported");
    const Tensor x = tensorInput(node, 0);
    const Shape xShape = shapeOf(x);
    if (xShape.size() < 2 || (gemm && xShape.size() != 2)) refuse(node, "A must be a matrix, not " + glnet::describe(xShape));
    const Constant* b = constantInput(node, 1);
    if (!b || b->shape.size() != 2) refuse(node, "B must be a constant matrix");
    const bool transposed = integer(a, "transB", 0) != 0;
    const std::int64_t inputs = transposed ? b->shape[1] : b->shape[0], outputs = transposed ? b->shape[0] : b->shape[1];
    if (inputs != xShape.back()) refuse(node, "A has " + std::to_string(xShape.back()) + " columns but B takes " + std::to_string(inputs));
    if (outputs < 1) refuse(node, "B has no columns");
    const double alpha = real(a, "alpha", 1.0), beta = real(a, "beta", 1.0);
    std::vector<double> weight(static_cast<std::size_t>(outputs * inputs));  // [out, in], as glnet's dense layer takes it
    for (std::int64_t o = 0; o < outputs; ++o) {
      for (std::int64_t i = 0; i < inputs; ++i) {
        weight[static_cast<std::size_t>(o * inputs + i)] = alpha * b->values[static_cast<std::size_t>(transposed ? o * inputs + i : i * outputs + o)];
      }
    }
    std::vector<double> bias(static_cast<std::size_t>(outputs), 0.0);
    if (const Constant* c = gemm ? constantInput(node, 2) : nullptr) {
      const std::size_t count = c->elements();
      if ((count != 1 && count != bias.size()) || (!c->shape.empty() && c->shape.back() != static_cast<std::int64_t>(count))) {
        refuse(node, "C must broadcast along the rows ([N] or a scalar), not " + describe(c->shape));
      }
      for (std::size_t o = 0; o < bias.size(); ++o) bias[o] = beta * c->values[count == 1 ? 0 : o];
    }
    const std::string name = nameOf(node);
    const Tensor weightTensor = parameter(name + ".weight", {outputs, inputs}, weight);
    const Tensor biasTensor = parameter(name + ".bias", {outputs}, bias);
    const std::uint32_t rows = static_cast<std::uint32_t>(elementCount(xShape) / xShape.back());
    const Tensor rowsView = xShape.size() == 2 ? x : graph_.apply(reshapeOp({rows, xShape.back()}), {x});
    const Activation activation = *asActivation(fusedPointwise(node, [](const Pointwise& f) { return asActivation(f).has_value(); }, xShape.size() == 2));
    Tensor out = graph_.apply(denseOp(activation), {rowsView, weightTensor, biasTensor}, name);
    layers_[out.id] = {weightTensor, biasTensor};
    if (xShape.size() != 2) {
      Shape shape(xShape.begin(), xShape.end() - 1);
      shape.push_back(static_cast<std::uint32_t>(outputs));
      out = graph_.apply(reshapeOp(shape), {out});
    }
    define(node, out, "dense");
  }

  // Add, Sub, Mul, Div, Pow, Max and Min with NumPy broadcasting; constant operands become parameters. A constant
  // row added to a dense layer's output (PyTorch's MatMul + Add) joins the layer's bias instead.
  void importBinary(const onnx::NodeProto& node) {
    attributes(node, {});
    const std::string& op = node.op_type();
    if (node.input_size() != 2) refuse(node, "only two inputs are supported");
    const Value& left = operand(node, 0);
    const Value& right = operand(node, 1);
    if (op == "Add" && (left.constant != right.constant)) {
      const Tensor x = left.constant ? right.tensor : left.tensor;
      const Constant& c = left.constant ? left.host : right.host;
      const auto layer = layers_.find(x.id);
      const Shape shape = shapeOf(x);
      if (layer != layers_.end() && shape.size() == 2 && consumers_[node.input(left.constant ? 1 : 0)] == 1 && c.elements() == shape[1] &&
          !c.shape.empty() && c.shape.back() == shape[1]) {
        std::vector<float> bias = graph_.tensor(layer->second.second).initial;
        for (std::size_t o = 0; o < bias.size(); ++o) bias[o] = static_cast<float>(bias[o] + c.values[o]);
        graph_.setInitial(layer->second.second, std::move(bias));
        layers_[x.id] = layer->second;
        values_[node.output(0)] = {false, {}, x};
        result_.nodes.push_back({node.name(), op, "folded", shape});
        return;
      }
    }
    if (op == "Mul") {
      for (const int side : {0, 1}) {
        if (!channelScale(node, side)) continue;
        const Tensor x = tensorOrConstant(node, 1 - side), scale = tensorOrConstant(node, side);
        if (scalesConvolutionInput(node, side)) {
          values_[node.output(0)] = operand(node, 1 - side);
          scaledInputs_[node.output(0)] = scale;
          result_.nodes.push_back({node.name(), op, "fused into the convolution reading it", shapeOf(x)});
          return;
        }
        const Pointwise after = fusedPointwise(node, [](const Pointwise&) { return true; });
        apply(node, channelAffineOp(false, after), {x, scale}, "channel scale");
        return;
      }
    }
    static const std::map<std::string, BinaryKind> kinds{{"Add", BinaryKind::add}, {"Sub", BinaryKind::subtract}, {"Mul", BinaryKind::multiply},
                                                         {"Div", BinaryKind::divide}, {"Pow", BinaryKind::power}, {"Max", BinaryKind::maximum},
                                                         {"Min", BinaryKind::minimum}, {"PRelu", BinaryKind::prelu}};
    const Tensor a = tensorOrConstant(node, 0), b = tensorOrConstant(node, 1);
    const Pointwise after = fusedPointwise(node, [](const Pointwise&) { return true; });
    apply(node, broadcastOp(kinds.at(op), after), {a, b}, op == "Add" ? "add" : "broadcast");
  }

  // Whether a channel-scaling Mul (channelScale) is a squeeze-excite gate, [N, C, 1, 1] computed per image, whose
  // output only a 1x1 convolution without padding, which the implicit GEMM runs, reads: that convolution then scales
  // X as it reads it (conv2dOp's inputScaled), which saves the scaled tensor's pass and a dependent dispatch
  // (mobilenet_v3_small has 9 such gates, efficientnet_b0 16).
  bool scalesConvolutionInput(const onnx::NodeProto& node, int side) const {
    const Value& scale = operand(node, side);
    const Shape xShape = shapeOf(operand(node, 1 - side).tensor);
    if (scale.constant || xShape.size() != 4 || shapeOf(scale.tensor) != Shape{xShape[0], xShape[1], 1, 1}) return false;
    const onnx::NodeProto* conv = soleReader(node.output(0));
    if (!conv || conv->op_type() != "Conv" || conv->input_size() < 2 || conv->input(0) != node.output(0) || fused_.count(conv)) return false;
    const auto weight = values_.find(conv->input(1));
    if (weight == values_.end() || !weight->second.constant) return false;
    const std::vector<std::int64_t>& w = weight->second.host.shape;
    if (w.size() != 4 || w[1] != xShape[1] || w[2] != 1 || w[3] != 1) return false;
    for (const onnx::AttributeProto& a : conv->attribute()) {
      const std::vector<std::int64_t> ints(a.ints().begin(), a.ints().end());
      bool fits = false;
      if (a.name() == "group") fits = a.i() == 1;
      else if (a.name() == "pads") fits = allInts(a, 0);
      else if (a.name() == "dilations" || a.name() == "kernel_shape") fits = allInts(a, 1);
      else if (a.name() == "strides") fits = ints.size() == 2 && ints[0] == ints[1] && ints[0] >= 1;
      else if (a.name() == "auto_pad") fits = a.s().empty() || a.s() == "NOTSET" || a.s() == "VALID";
      if (!fits) return false;
    }
    return true;
  }

  // SqueezeNet's fire module at a batch of up to 4 (expandsTogether): a 1x1 convolution and a k x k one with "same"
  // padding of the same tensor, each followed by the same function or none, whose results only one Concat along the
  // channels reads.
  struct Expansion {
    const onnx::NodeProto* point;   // the 1x1 convolution
    const onnx::NodeProto* wide;    // the k x k one
    const onnx::NodeProto* concat;
    bool pointFirst;                // the 1x1 convolution's channels come first in the Concat
    Pointwise function;
    std::vector<const onnx::NodeProto*> functionNodes;
  };
  // A convolution's kernel size when it has one group, stride 1, no dilation, a constant weight [O, C, k, k] with k
  // odd and "same" padding ((k - 1) / 2 on every side); 0 otherwise.
  std::int64_t sameKernel(const onnx::NodeProto& conv) const {
    if (conv.op_type() != "Conv" || conv.input_size() < 2 || conv.output_size() != 1) return 0;
    const auto weight = values_.find(conv.input(1));
    if (weight == values_.end() || !weight->second.constant || weight->second.host.shape.size() != 4) return 0;
    if (conv.input_size() > 2 && !conv.input(2).empty()) {
      const auto bias = values_.find(conv.input(2));
      if (bias == values_.end() || !bias->second.constant) return 0;
    }
    const std::vector<std::int64_t>& w = weight->second.host.shape;
    if (w[2] != w[3] || w[2] % 2 == 0) return 0;
    for (const onnx::AttributeProto& a : conv.attribute()) {
      bool fits = false;
      if (a.name() == "group") fits = a.i() == 1;
      else if (a.name() == "pads") fits = allInts(a, (w[2] - 1) / 2);
      else if (a.name() == "dilations" || a.name() == "strides") fits = allInts(a, 1);
      else if (a.name() == "kernel_shape") fits = allInts(a, w[2]);
      else if (a.name() == "auto_pad") fits = a.s().empty() || a.s() == "NOTSET" || (w[2] == 1 && a.s() == "VALID");
      if (!fits) return 0;
    }
    return w[2];
  }
  std::optional<Expansion> expandsTogether(const onnx::NodeProto& node) const {
    // Inputs not defined yet (a malformed model) are left to the usual import, which names them.
    const auto readers = readers_.find(node.input(0));
    const auto input = values_.find(node.input(0));
    if (readers == readers_.end() || readers->second.size() != 2 || consumers_.at(node.input(0)) != 2 || input == values_.end() ||
        input->second.constant) {
      return std::nullopt;
    }
    const onnx::NodeProto* other = readers->second[0] == &node ? readers->second[1] : readers->second[0];
    const std::int64_t k = sameKernel(node), otherK = sameKernel(*other);
    if (other->input(0) != node.input(0) || fused_.count(other) || !((k == 1 && otherK > 1) || (k > 1 && otherK == 1))) return std::nullopt;
    const Shape x = shapeOf(input->second.tensor);
    if (x.size() != 4 || x[0] > 4) return std::nullopt;
    Expansion e{k == 1 ? &node : other, k == 1 ? other : &node, nullptr, false, {}, {}};
    // Each result after its function: the names the Concat reads.
    std::string results[2];
    std::optional<Pointwise> functions[2];
    const onnx::NodeProto* convs[2] = {e.point, e.wide};
    for (int i = 0; i < 2; ++i) {
      results[i] = convs[i]->output(0);
      functions[i] = Pointwise{};
      const onnx::NodeProto* next = soleReader(results[i]);
      if (next && next->op_type() != "Concat") {
        functions[i] = pointwiseOf(*next);
        if (!functions[i] || next->output_size() != 1) return std::nullopt;
        e.functionNodes.push_back(next);
        results[i] = next->output(0);
      }
    }
    if (functions[0]->kind != functions[1]->kind || functions[0]->alpha != functions[1]->alpha || functions[0]->beta != functions[1]->beta) return std::nullopt;
    e.function = *functions[0];
    e.concat = soleReader(results[0]);
    if (!e.concat || e.concat != soleReader(results[1]) || e.concat->op_type() != "Concat" || e.concat->input_size() != 2) return std::nullopt;
    for (const onnx::AttributeProto& a : e.concat->attribute()) {
      if (a.name() != "axis" || (a.i() != 1 && a.i() != -3)) return std::nullopt;
    }
    e.pointFirst = e.concat->input(0) == results[0];
    return e;
  }

  // Whether input `side` of a Mul scales the other, computed, input [N, C, spatial...] per channel or per image and
  // channel: shaped [C, 1...], [1, C, 1...] or [N, C, 1...] (a squeeze-excite gate; BatchNorm exported as Mul).
  bool channelScale(const onnx::NodeProto& node, int side) {
    const Value& x = operand(node, 1 - side);
    if (x.constant) return false;
    const Shape xShape = shapeOf(x.tensor);
    const Value& s = operand(node, side);
    Shape sShape;
    if (s.constant) {
      for (const std::int64_t d : s.host.shape) sShape.push_back(static_cast<std::uint32_t>(d));
    } else {
      sShape = shapeOf(s.tensor);
    }
    if (xShape.size() < 3 || sShape.size() > xShape.size() || sShape.size() + 1 < xShape.size() || elementCount(xShape) == 0) return false;
    sShape.insert(sShape.begin(), xShape.size() - sShape.size(), 1);
    if (sShape[1] != xShape[1] || (sShape[0] != 1 && sShape[0] != xShape[0])) return false;
    if (sShape[0] != 1 && s.constant) return false;  // a constant per image would fix the batch size
    return std::all_of(sShape.begin() + 2, sShape.end(), [](std::uint32_t d) { return d == 1; }) && elementCount(xShape) > elementCount(sShape);
  }

  // Sum, Mean, Max and Min of any number of inputs, broadcast: a chain of binary ops (Mean scaled at the end).
  void importVariadic(const onnx::NodeProto& node) {
    attributes(node, {});
    const std::string& op = node.op_type();
    const BinaryKind kind = op == "Max" ? BinaryKind::maximum : op == "Min" ? BinaryKind::minimum : BinaryKind::add;
    Tensor total = tensorOrConstant(node, 0);
    try {
      for (int i = 1; i < node.input_size(); ++i) total = graph_.apply(broadcastOp(kind), {total, tensorOrConstant(node, i)}, nameOf(node));
      if (op == "Mean" && node.input_size() > 1) {
        const Tensor scale = parameter(nameOf(node) + ".scale", {1}, {1.0 / node.input_size()});
        total = graph_.apply(broadcastOp(BinaryKind::multiply), {total, scale}, nameOf(node));
      } else if (node.input_size() == 1) {
        total = graph_.apply(expandOp(shapeOf(total)), {total}, nameOf(node));  // a copy
      }
    } catch (const Error& error) {
      refuse(node, error.what());
    }
    define(node, total, "broadcast");
  }

  // Pads from explicit pads or auto_pad (SAME_UPPER puts the odd one at the end, SAME_LOWER at the start), as
  // [top, left, bottom, right].
  std::array<std::uint32_t, 4> windowPads(const onnx::NodeProto& node, const std::map<std::string, const onnx::AttributeProto*>& a,
                                          const Shape& x, const std::array<std::uint32_t, 2>& kernel, const std::array<std::uint32_t, 2>& strides,
                                          const std::array<std::uint32_t, 2>& dilations) const {
    const std::string autoPad = a.count("auto_pad") ? a.at("auto_pad")->s() : "NOTSET";
    std::array<std::uint32_t, 4> pads{0, 0, 0, 0};
    if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
      for (int k = 0; k < 2; ++k) {
        const std::int64_t size = x[2 + k], out = (size + strides[k] - 1) / strides[k];
        const std::int64_t total = std::max<std::int64_t>((out - 1) * strides[k] + (std::int64_t{kernel[k]} - 1) * dilations[k] + 1 - size, 0);
        const auto small = static_cast<std::uint32_t>(total / 2), large = static_cast<std::uint32_t>(total - total / 2);
        pads[k] = autoPad == "SAME_UPPER" ? small : large;
        pads[2 + k] = autoPad == "SAME_UPPER" ? large : small;
      }
      return pads;
    }
    if (autoPad != "NOTSET" && autoPad != "VALID") refuse(node, "auto_pad " + autoPad + " is not supported");
    const std::vector<std::int64_t> given = integers(a, "pads");
    if (autoPad == "VALID" || given.empty()) return pads;
    if (given.size() != 4) refuse(node, "pads must hold 4 values for a 2-D window");
    for (int k = 0; k < 4; ++k) {
      if (given[k] < 0 || given[k] > (1 << 16)) refuse(node, "a pad of " + std::to_string(given[k]) + " is not supported");
      pads[k] = static_cast<std::uint32_t>(given[k]);
    }
    return pads;
  }
  std::array<std::uint32_t, 2> pair(const onnx::NodeProto& node, const std::map<std::string, const onnx::AttributeProto*>& a,
                                    const std::string& name, std::uint32_t otherwise) const {
    const std::vector<std::int64_t> given = integers(a, name);
    if (given.empty()) return {otherwise, otherwise};
    if (given.size() != 2) refuse(node, name + " must hold 2 values: glnet runs 2-D windows");
    for (const std::int64_t v : given) {
      if (v < 1 || v > (1 << 16)) refuse(node, name + " holds " + std::to_string(v));
    }
    return {static_cast<std::uint32_t>(given[0]), static_cast<std::uint32_t>(given[1])};
  }

  // Conv: one group, the same stride along both axes and the same padding on every side run as an implicit GEMM
  // (Conv2D.glsl; split along its sum where it has too few tiles for the GPU); anything else (dilations, groups,
  // depthwise, uneven padding or strides) directly (GroupedConv.glsl).
  // A 1-D window (Conv1d, MaxPool1d, ...) runs as 2-D over a view [N, C, 1, L]: its attributes gain a leading 1
  // (pads: 0 before and after the new axis).
  static std::map<std::string, onnx::AttributeProto> widened(const std::map<std::string, const onnx::AttributeProto*>& a) {
    std::map<std::string, onnx::AttributeProto> result;
    for (const auto& [name, attribute] : a) {
      onnx::AttributeProto copy = *attribute;
      if (name == "kernel_shape" || name == "strides" || name == "dilations") {
        copy.clear_ints();
        copy.add_ints(1);
        for (const std::int64_t v : attribute->ints()) copy.add_ints(v);
      } else if (name == "pads" && attribute->ints_size() == 2) {
        copy.clear_ints();
        for (const std::int64_t v : {std::int64_t{0}, attribute->ints(0), std::int64_t{0}, attribute->ints(1)}) copy.add_ints(v);
      }
      result[name] = copy;
    }
    return result;
  }
  static std::map<std::string, const onnx::AttributeProto*> pointers(const std::map<std::string, onnx::AttributeProto>& a) {
    std::map<std::string, const onnx::AttributeProto*> result;
    for (const auto& [name, attribute] : a) result[name] = &attribute;
    return result;
  }
  Tensor asImage(const onnx::NodeProto& node, Tensor x) {
    const Shape shape = shapeOf(x);
    if (shape.size() == 4) return x;
    if (shape.size() != 3) refuse(node, "X must be [N, C, L] or [N, C, H, W]: glnet runs 1-D and 2-D windows");
    return graph_.apply(reshapeOp({shape[0], shape[1], 1, shape[2]}), {x});
  }
  // The output of a window op on asImage's view, back to [N, C, L] when the input was.
  void defineWindow(const onnx::NodeProto& node, Tensor input, Tensor out, const std::string& glnetOp) {
    const Shape shape = shapeOf(out);
    if (shapeOf(input).size() == 3) out = graph_.apply(reshapeOp({shape[0], shape[1], shape[3]}), {out});
    define(node, out, glnetOp);
  }

  // An Expansion as one k x k convolution into the Concat's tensor: the 1x1 kernel's weights at the centre tap with
  // zeros around it. One dispatch and no copy for each fire module, at k² times the 1x1 layer's multiplies, which
  // a batch this small does not notice.
  void importExpansion(const onnx::NodeProto& node, const Expansion& e) {
    const Constant& point = *constantInput(*e.point, 1);
    const Constant& wide = *constantInput(*e.wide, 1);
    const std::int64_t k = wide.shape[2], channels = wide.shape[1], pointOut = point.shape[0], wideOut = wide.shape[0];
    if (point.shape[1] != channels) refuse(node, "the two expansions read different channel counts");
    std::vector<double> weights, bias;
    for (const bool pointPart : {e.pointFirst, !e.pointFirst}) {
      const onnx::NodeProto& conv = pointPart ? *e.point : *e.wide;
      const std::int64_t outputs = pointPart ? pointOut : wideOut;
      for (std::int64_t o = 0; o < outputs; ++o) {
        for (std::int64_t c = 0; c < channels; ++c) {
          for (std::int64_t t = 0; t < k * k; ++t) {
            weights.push_back(pointPart ? (t == k * k / 2 ? point.values[static_cast<std::size_t>(o * channels + c)] : 0.0)
                                        : wide.values[static_cast<std::size_t>((o * channels + c) * k * k + t)]);
          }
        }
      }
      const Constant* b = constantInput(conv, 2);
      if (b && b->elements() != static_cast<std::size_t>(outputs)) refuse(conv, "B must be [" + std::to_string(outputs) + "]");
      for (std::int64_t o = 0; o < outputs; ++o) bias.push_back(b ? b->values[static_cast<std::size_t>(o)] : 0.0);
    }
    const std::string name = nameOf(*e.concat);
    const Tensor weight = parameter(name + ".weight", {pointOut + wideOut, channels, k, k}, weights);
    const Tensor b = parameter(name + ".bias", {pointOut + wideOut}, bias);
    const std::optional<Activation> activation = asActivation(e.function);
    const Tensor out = apply(node, conv2dOp(activation.value_or(Activation::none), static_cast<std::uint32_t>(k / 2), 1,
                                            activation ? Pointwise{} : e.function),
                             {tensorInput(node, 0), weight, b}, "joined conv");
    values_[e.concat->output(0)] = {false, {}, out};
    for (const onnx::NodeProto* joined : {e.point, e.wide, e.concat}) {
      if (joined == &node) continue;
      fused_.insert(joined);
      aliases_[joined] = e.concat->output(0);
    }
    for (const onnx::NodeProto* function : e.functionNodes) {
      fused_.insert(function);
      aliases_[function] = e.concat->output(0);
    }
  }

  void importConv(const onnx::NodeProto& node) {
    if (const std::optional<Expansion> expansion = expandsTogether(node)) {
      importExpansion(node, *expansion);
      return;
    }
    const auto given = attributes(node, {"kernel_shape", "strides", "pads", "dilations", "group", "auto_pad"});
    const Tensor input = tensorInput(node, 0);
    const Constant* w = constantInput(node, 1);
    if (!w || (w->shape.size() != 4 && w->shape.size() != 3)) refuse(node, "W must be a constant [out_c, in_c/group, (kh,) kw]: glnet runs 1-D and 2-D convolutions");
    if (shapeOf(input).size() != w->shape.size()) refuse(node, "X and W differ in rank");
    const std::map<std::string, onnx::AttributeProto> wide = w->shape.size() == 3 ? widened(given) : std::map<std::string, onnx::AttributeProto>{};
    const auto a = w->shape.size() == 3 ? pointers(wide) : given;
    std::vector<std::int64_t> wShape = w->shape;
    if (wShape.size() == 3) wShape.insert(wShape.begin() + 2, 1);
    const Tensor x = asImage(node, input);
    ConvSettings settings;
    settings.strides = pair(node, a, "strides", 1);
    settings.dilations = pair(node, a, "dilations", 1);
    const std::int64_t groups = integer(a, "group", 1);
    if (groups < 1 || groups > (1 << 20)) refuse(node, "group = " + std::to_string(groups));
    settings.groups = static_cast<std::uint32_t>(groups);
    const std::array<std::uint32_t, 2> kernel{static_cast<std::uint32_t>(wShape[2]), static_cast<std::uint32_t>(wShape[3])};
    settings.pads = windowPads(node, a, shapeOf(x), kernel, settings.strides, settings.dilations);
    std::vector<double> bias(static_cast<std::size_t>(w->shape[0]), 0.0);
    if (const Constant* b = constantInput(node, 2)) {
      if (b->elements() != bias.size()) refuse(node, "B must be [" + std::to_string(bias.size()) + "]");
      bias = b->values;
    }
    const std::string name = nameOf(node);
    const Tensor weight = parameter(name + ".weight", wShape, w->values), b = parameter(name + ".bias", {w->shape[0]}, bias);
    const bool evenPadding = std::adjacent_find(settings.pads.begin(), settings.pads.end(), std::not_equal_to<>()) == settings.pads.end() &&
                             settings.pads[0] < std::min(kernel[0], kernel[1]);
    const bool implicitGemm = settings.groups == 1 && settings.strides[0] == settings.strides[1] &&
                              settings.dilations == std::array<std::uint32_t, 2>{1, 1} && evenPadding;
    // A squeeze-excite gate this convolution applies as it reads X (scalesConvolutionInput).
    const auto scaled = scaledInputs_.find(node.input(0));
    const std::optional<Tensor> inputScale = scaled == scaledInputs_.end() ? std::nullopt : std::optional<Tensor>(scaled->second);
    const auto withScale = [&](std::vector<Tensor> inputs) {
      if (inputScale) inputs.push_back(*inputScale);
      return inputs;
    };
    Tensor out;
    bool pooled = false, residual = false;
    try {
      const Shape xShape = shapeOf(x);
      const std::uint32_t pad = settings.pads[0], stride = settings.strides[0];
      const auto residualAdd = implicitGemm && w->shape.size() == 4 && xShape[2] + 2 * pad >= kernel[0] && xShape[3] + 2 * pad >= kernel[1]
                                   ? fusableResidual(node, {xShape[0], static_cast<std::uint32_t>(wShape[0]), (xShape[2] + 2 * pad - kernel[0]) / stride + 1,
                                                            (xShape[3] + 2 * pad - kernel[1]) / stride + 1})
                                   : std::nullopt;
      if (residualAdd) {
        const Pointwise after = fusedPointwise(*residualAdd->first, [](const Pointwise&) { return true; });
        out = graph_.apply(conv2dResidualOp(pad, stride, after, inputScale.has_value()), withScale({x, weight, b, residualAdd->second}), name);
        residual = true;
      } else if (implicitGemm) {
        const Pointwise function = fusedPointwise(node, [](const Pointwise&) { return true; }, true);
        const std::optional<Activation> activation = asActivation(function);
        const onnx::NodeProto* pool = activation && !inputScale && w->shape.size() == 4 && settings.strides[0] == 1 ? fusablePool(node) : nullptr;
        const bool poolable = pool && xShape[2] + 2 * settings.pads[0] >= kernel[0] + 1 && xShape[3] + 2 * settings.pads[0] >= kernel[1] + 1;
        if (poolable) {
          out = graph_.apply(conv2dMaxPoolOp(*activation, settings.pads[0]), {x, weight, b}, name);
          fused_.insert(pool);
          pooled = true;
        } else {
          out = graph_.apply(conv2dOp(activation.value_or(Activation::none), settings.pads[0], settings.strides[0],
                                      activation ? Pointwise{} : function, inputScale.has_value()),
                             withScale({x, weight, b}), name);
        }
      } else {
        GLNET_ASSERT(!inputScale, "a scaled input is fused only into a convolution the implicit GEMM runs");
        const Pointwise after = fusedPointwise(node, [](const Pointwise&) { return true; }, true);
        out = graph_.apply(groupedConvOp(settings, after), {x, weight, b}, name);
      }
    } catch (const Error& error) {
      refuse(node, error.what());
    }
    // A BatchNormalization after the pooling cannot fold into the weights (a negative scale would turn max into min),
    // nor after a residual (it would scale the residual too).
    if (!pooled && !residual) layers_[out.id] = {weight, b};
    defineWindow(node, input, out, pooled ? "conv + max pool" : residual ? "conv + residual" : implicitGemm ? "conv" : settings.groups > 1 ? "grouped conv" : "direct conv");
    if (shapeOf(input).size() == 3) layers_[values_[node.output(0)].tensor.id] = {weight, b};
  }

  // Inference BatchNormalization, y = scale·(x − mean)/sqrt(var + epsilon) + B per channel: folded into the
  // convolution or dense layer that computes x when nothing else reads it (weights scaled per output channel,
  // bias shifted), else a per-channel multiply and add.
  void importBatchNormalization(const onnx::NodeProto& node) {
    const auto a = attributes(node, {"epsilon", "momentum", "training_mode", "spatial"});
    if (integer(a, "training_mode", 0) != 0) refuse(node, "training mode is not supported (export the model in eval mode)");
    if (integer(a, "spatial", 1) != 1) refuse(node, "spatial = 0 is not supported");
    if (node.output_size() > 1 && std::any_of(node.output().begin() + 1, node.output().end(), [](const std::string& o) { return !o.empty(); })) {
      refuse(node, "the running-statistics outputs are for training; export the model in eval mode");
    }
    const Tensor x = tensorInput(node, 0);
    const Shape shape = shapeOf(x);
    if (shape.size() < 2) refuse(node, "X must be [N, C, ...]");
    const std::size_t channels = shape[1];
    const double epsilon = real(a, "epsilon", 1e-5);
    std::vector<const Constant*> constants;
    for (int i = 1; i <= 4; ++i) {
      const Constant* c = constantInput(node, i);
      if (!c || c->elements() != channels) refuse(node, "scale, B, mean and var must be constants of " + std::to_string(channels) + " values");
      constants.push_back(c);
    }
    std::vector<double> factor(channels), shift(channels);
    for (std::size_t c = 0; c < channels; ++c) {
      if (!(constants[3]->values[c] + epsilon > 0)) refuse(node, "var + epsilon is not positive for channel " + std::to_string(c));
      factor[c] = constants[0]->values[c] / std::sqrt(constants[3]->values[c] + epsilon);
      shift[c] = constants[1]->values[c] - constants[2]->values[c] * factor[c];
    }
    const auto layer = layers_.find(x.id);
    if (layer != layers_.end() && consumers_[node.input(0)] == 1) {
      const auto [weightTensor, biasTensor] = layer->second;
      std::vector<float> weight = graph_.tensor(weightTensor).initial, bias = graph_.tensor(biasTensor).initial;
      const std::size_t perChannel = weight.size() / channels;
      for (std::size_t c = 0; c < channels; ++c) {
        for (std::size_t i = 0; i < perChannel; ++i) weight[c * perChannel + i] = static_cast<float>(weight[c * perChannel + i] * factor[c]);
        bias[c] = static_cast<float>(bias[c] * factor[c] + shift[c]);
      }
      graph_.setInitial(weightTensor, std::move(weight));
      graph_.setInitial(biasTensor, std::move(bias));
      values_[node.output(0)] = {false, {}, x};
      result_.nodes.push_back({node.name(), node.op_type(), "folded", shape});
      return;
    }
    const std::string name = nameOf(node);
    const std::vector<std::int64_t> perChannel{static_cast<std::int64_t>(channels)};
    const Pointwise after = fusedPointwise(node, [](const Pointwise&) { return true; });
    apply(node, channelAffineOp(true, after), {x, parameter(name + ".factor", perChannel, factor), parameter(name + ".shift", perChannel, shift)},
          "channel affine");
  }

  void importPool(const onnx::NodeProto& node) {
    const bool average = node.op_type() == "AveragePool";
    const auto given = attributes(node, {"kernel_shape", "strides", "pads", "dilations", "ceil_mode", "auto_pad", "storage_order", "count_include_pad"});
    if (node.output_size() > 1 && !node.output(1).empty()) refuse(node, "the indices output is not supported");
    const Tensor input = tensorInput(node, 0);
    const bool line = shapeOf(input).size() == 3;
    const std::map<std::string, onnx::AttributeProto> wide = line ? widened(given) : std::map<std::string, onnx::AttributeProto>{};
    const auto a = line ? pointers(wide) : given;
    const Tensor x = asImage(node, input);
    PoolSettings s;
    s.average = average;
    if (!a.count("kernel_shape")) refuse(node, "kernel_shape is missing");
    s.kernel = pair(node, a, "kernel_shape", 1);
    s.strides = pair(node, a, "strides", 1);
    s.dilations = pair(node, a, "dilations", 1);
    if (average && s.dilations != std::array<std::uint32_t, 2>{1, 1}) refuse(node, "dilations in average pooling are not supported");
    s.pads = windowPads(node, a, shapeOf(x), s.kernel, s.strides, s.dilations);
    s.ceilMode = integer(a, "ceil_mode", 0) != 0;
    s.countIncludePad = integer(a, "count_include_pad", 0) != 0;
    // A 1x1 window with stride 1 and no padding copies its input (vgg's AdaptiveAvgPool2d(7) on a 7x7 map).
    if (s.kernel == std::array<std::uint32_t, 2>{1, 1} && s.strides == std::array<std::uint32_t, 2>{1, 1} &&
        s.pads == std::array<std::uint32_t, 4>{0, 0, 0, 0}) {
      values_[node.output(0)] = operand(node, 0);
      result_.nodes.push_back({node.name(), node.op_type(), "identity", shapeOf(input)});
      return;
    }
    try {
      defineWindow(node, input, graph_.apply(poolOp(s), {x}, nameOf(node)), average ? "average pool" : "max pool");
    } catch (const Error& error) {
      refuse(node, error.what());
    }
  }

  // Softmax and LogSoftmax: from opset 13 along one axis; before, over the axes from `axis` on (the input
  // coerced to 2-D).
  void importSoftmax(const onnx::NodeProto& node) {
    const auto a = attributes(node, {"axis"});
    const Tensor x = tensorInput(node, 0);
    const std::size_t rank = shapeOf(x).size();
    const bool single = result_.opset >= 13;
    const auto axis = static_cast<std::uint32_t>(normalizedAxis(node, integer(a, "axis", single ? -1 : 1), rank));
    const bool log = node.op_type() == "LogSoftmax";
    const Tensor out = apply(node, axisOp(log ? AxisKind::logSoftmax : AxisKind::softmax, axis, single ? axis + 1 : static_cast<std::uint32_t>(rank)),
                             {x}, log ? "log-softmax" : "softmax");
    if (!log && rank == 2 && axis == 1) softmaxInputs_[out.id] = x;
  }

  // ReduceMean, ReduceSum, ReduceMax, ReduceMin over adjacent axes (attribute axes, or from opset 18, and 13 for
  // ReduceSum, a constant input).
  void importReduce(const onnx::NodeProto& node) {
    const auto a = attributes(node, {"axes", "keepdims", "noop_with_empty_axes"});
    const Tensor x = tensorInput(node, 0);
    const auto rank = static_cast<std::int64_t>(shapeOf(x).size());
    std::vector<std::int64_t> list = axes(node, a, 1, rank);
    if (list.empty()) {
      if (integer(a, "noop_with_empty_axes", 0) != 0) {
        values_[node.output(0)] = {false, {}, x};
        result_.nodes.push_back({node.name(), node.op_type(), "identity", shapeOf(x)});
        return;
      }
      for (std::int64_t i = 0; i < rank; ++i) list.push_back(i);
    }
    std::sort(list.begin(), list.end());
    list.erase(std::unique(list.begin(), list.end()), list.end());
    if (list.back() - list.front() + 1 != static_cast<std::int64_t>(list.size())) refuse(node, "only reductions over adjacent axes are supported");
    static const std::map<std::string, AxisKind> kinds{
        {"ReduceMean", AxisKind::mean}, {"ReduceSum", AxisKind::sum}, {"ReduceMax", AxisKind::max}, {"ReduceMin", AxisKind::min},
        {"ReduceL1", AxisKind::l1}, {"ReduceL2", AxisKind::l2}, {"ReduceSumSquare", AxisKind::sumSquare}, {"ReduceLogSum", AxisKind::logSum},
        {"ReduceLogSumExp", AxisKind::logSumExp}, {"ReduceProd", AxisKind::product}};
    apply(node, axisOp(kinds.at(node.op_type()), static_cast<std::uint32_t>(list.front()), static_cast<std::uint32_t>(list.back() + 1),
                       integer(a, "keepdims", 1) != 0),
          {x}, "reduce");
  }

  void importLayerNormalization(const onnx::NodeProto& node) {
    const auto a = attributes(node, {"axis", "epsilon", "stash_type"});
    const Tensor x = tensorInput(node, 0);
    const Shape shape = shapeOf(x);
    const auto axis = static_cast<std::uint32_t>(normalizedAxis(node, integer(a, "axis", -1), shape.size()));
    const std::size_t count = elementCount(Shape(shape.begin() + axis, shape.end()));
    const Constant* scale = constantInput(node, 1);
    const Constant* bias = constantInput(node, 2);
    if (!scale || scale->elements() != count || (bias && bias->elements() != count)) {
      refuse(node, "Scale and B must be constants of the normalized axes' " + std::to_string(count) + " values");
    }
    const std::string name = nameOf(node);
    const Tensor gamma = parameter(name + ".scale", {static_cast<std::int64_t>(count)}, scale->values);
    const Tensor beta = parameter(name + ".bias", {static_cast<std::int64_t>(count)}, bias ? bias->values : std::vector<double>(count, 0.0));
    const auto rank = static_cast<std::uint32_t>(shape.size());
    const auto epsilon = static_cast<float>(real(a, "epsilon", 1e-5));
    apply(node, axisOp(AxisKind::layerNormalization, axis, rank, true, epsilon), {x, gamma, beta}, "layer normalization");
    // The optional Mean and InvStdDev outputs, the normalized axes kept as 1.
    for (int i = 1; i < std::min(node.output_size(), 3); ++i) {
      if (node.output(i).empty()) continue;
      try {
        const Tensor statistic = graph_.apply(axisOp(i == 1 ? AxisKind::mean : AxisKind::inverseDeviation, axis, rank, true, epsilon), {x}, node.output(i));
        values_[node.output(i)] = {false, {}, statistic};
      } catch (const Error& error) {
        refuse(node, error.what());
      }
    }
  }

  // Flatten, Reshape, Squeeze and Unsqueeze of a computed tensor: views of the same memory.
  void importReshape(const onnx::NodeProto& node) {
    const std::string& op = node.op_type();
    const auto a = attributes(node, {"axis", "axes", "allowzero"});
    const Tensor x = tensorInput(node, 0);
    const Shape in = shapeOf(x);
    const auto rank = static_cast<std::int64_t>(in.size());
    Shape out;
    if (op == "Flatten") {
      const auto axis = static_cast<std::size_t>(normalizedAxis(node, integer(a, "axis", 1), in.size(), true));
      out = {static_cast<std::uint32_t>(elementCount(Shape(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(axis)))),
             static_cast<std::uint32_t>(elementCount(Shape(in.begin() + static_cast<std::ptrdiff_t>(axis), in.end())))};
    } else if (op == "Squeeze") {
      std::vector<std::int64_t> list = axes(node, a, 1, rank);
      for (std::int64_t i = 0; i < rank; ++i) {
        const bool listed = std::find(list.begin(), list.end(), i) != list.end();
        if (listed && in[static_cast<std::size_t>(i)] != 1) refuse(node, "squeezed axis " + std::to_string(i) + " is not 1");
        if (!(listed || (list.empty() && in[static_cast<std::size_t>(i)] == 1))) out.push_back(in[static_cast<std::size_t>(i)]);
      }
    } else if (op == "Unsqueeze") {
      const std::int64_t added = static_cast<std::int64_t>(integers(a, "axes").size() + (node.input_size() > 1 ? input(node, 1).values.size() : 0));
      std::vector<std::int64_t> list = axes(node, a, 1, rank + added);
      std::sort(list.begin(), list.end());
      out = in;
      for (const std::int64_t axis : list) {
        if (axis > static_cast<std::int64_t>(out.size())) refuse(node, "axis " + std::to_string(axis) + " is outside the result");
        out.insert(out.begin() + axis, 1);
      }
    } else {
      const Constant& target = input(node, 1);
      if (target.values.size() > largestRank) refuse(node, "a shape of rank " + std::to_string(target.values.size()) + " is not supported");
      std::int64_t inferred = -1;
      std::size_t known = 1;
      for (std::size_t i = 0; i < target.values.size(); ++i) {
        std::int64_t d = whole(node, target.values[i]);
        if (d == 0 && integer(a, "allowzero", 0) == 0) {
          if (i >= in.size()) refuse(node, "dimension " + std::to_string(i) + " copies an axis the input does not have");
          d = in[i];
        }
        if (d == -1) {
          if (inferred >= 0) refuse(node, "two dimensions are -1");
          inferred = static_cast<std::int64_t>(i);
          out.push_back(1);
          continue;
        }
        if (d < 1 || d > static_cast<std::int64_t>(elementCount(in))) refuse(node, "a dimension of " + std::to_string(d) + " for " + glnet::describe(in));
        out.push_back(static_cast<std::uint32_t>(d));
        known *= static_cast<std::size_t>(d);
        if (known > elementCount(in)) refuse(node, "the new shape holds more elements than " + glnet::describe(in));
      }
      if (inferred >= 0) out[static_cast<std::size_t>(inferred)] = static_cast<std::uint32_t>(elementCount(in) / known);
    }
    if (elementCount(out) != elementCount(in)) refuse(node, "the new shape " + glnet::describe(out) + " holds a different number of elements than " + glnet::describe(in));
    apply(node, reshapeOp(out), {x}, "view");
  }

  // A slice of each axis: start, count and step, clamped as NumPy does.
  struct AxisSlice {
    std::int64_t start = 0, step = 1;
    std::uint32_t count = 0;
  };
  static AxisSlice clampedSlice(std::int64_t dimension, std::int64_t start, std::int64_t end, std::int64_t step) {
    if (start < 0) start += dimension;
    if (end < 0) end += dimension;
    if (step > 0) {
      start = std::clamp<std::int64_t>(start, 0, dimension);
      end = std::clamp<std::int64_t>(end, 0, dimension);
    } else {
      start = std::clamp<std::int64_t>(start, -1, dimension - 1);
      end = std::clamp<std::int64_t>(end, -1, dimension - 1);
    }
    const std::int64_t count = step > 0 ? (end - start + step - 1) / step : (start - end - step - 1) / -step;
    return {start, step, static_cast<std::uint32_t>(std::max<std::int64_t>(count, 0))};
  }

  Tensor sliceTensor(const onnx::NodeProto& node, Tensor x, const std::vector<AxisSlice>& slices, const std::string& name) {
    std::vector<std::int64_t> starts, steps;
    Shape size;
    for (const AxisSlice& s : slices) {
      if (s.count == 0) refuse(node, "the slice is empty; glnet does not run empty tensors");
      starts.push_back(s.start);
      steps.push_back(s.step);
      size.push_back(s.count);
    }
    try {
      return graph_.apply(sliceOp(starts, steps, size), {x}, name);
    } catch (const Error& error) {
      refuse(node, error.what());
    }
  }

  void importSlice(const onnx::NodeProto& node) {
    const auto a = attributes(node, {"starts", "ends", "axes"});
    const Tensor x = tensorInput(node, 0);
    const Shape shape = shapeOf(x);
    const auto rank = static_cast<std::int64_t>(shape.size());
    const auto list = [&](int index, const std::string& attribute) {
      std::vector<std::int64_t> values;
      if (result_.opset < 10) return integers(a, attribute);
      if (index < node.input_size() && !node.input(index).empty()) {
        for (const double v : input(node, index).values) values.push_back(static_cast<std::int64_t>(std::clamp(v, -9.0e15, 9.0e15)));
      }
      return values;
    };
    const std::vector<std::int64_t> starts = list(1, "starts"), ends = list(2, "ends");
    std::vector<std::int64_t> sliceAxes = list(3, "axes"), steps = list(4, "steps");
    if (sliceAxes.empty()) {
      for (std::size_t i = 0; i < starts.size(); ++i) sliceAxes.push_back(static_cast<std::int64_t>(i));
    }
    if (steps.empty()) steps.assign(starts.size(), 1);
    if (starts.size() != ends.size() || starts.size() != sliceAxes.size() || starts.size() != steps.size()) refuse(node, "starts, ends, axes and steps differ in length");
    std::vector<AxisSlice> slices;
    for (const std::uint32_t d : shape) slices.push_back({0, 1, d});
    for (std::size_t i = 0; i < starts.size(); ++i) {
      const std::int64_t axis = normalizedAxis(node, sliceAxes[i], shape.size());
      if (steps[i] == 0) refuse(node, "a step of 0");
      slices[static_cast<std::size_t>(axis)] = clampedSlice(shape[static_cast<std::size_t>(axis)], starts[i], ends[i], steps[i]);
    }
    (void)rank;
    define(node, sliceTensor(node, x, slices, nameOf(node)), "slice");
  }

  void importSplit(const onnx::NodeProto& node) {
    const auto a = attributes(node, {"axis", "split", "num_outputs"});
    const Tensor x = tensorInput(node, 0);
    const Shape shape = shapeOf(x);
    const auto axis = static_cast<std::size_t>(normalizedAxis(node, integer(a, "axis", 0), shape.size()));
    std::vector<std::int64_t> sizes = integers(a, "split");
    if (node.input_size() > 1 && !node.input(1).empty()) {
      sizes.clear();
      for (const double v : input(node, 1).values) sizes.push_back(whole(node, v));
    }
    const auto outputs = static_cast<std::int64_t>(node.output_size());
    if (sizes.empty()) {
      const std::int64_t each = (shape[axis] + outputs - 1) / outputs;
      for (std::int64_t i = 0; i < outputs; ++i) sizes.push_back(std::min<std::int64_t>(each, shape[axis] - i * each));
    }
    if (static_cast<std::int64_t>(sizes.size()) != outputs) refuse(node, "split sizes do not match the outputs");
    std::int64_t start = 0;
    for (int i = 0; i < node.output_size(); ++i) {
      if (sizes[static_cast<std::size_t>(i)] < 1 || start + sizes[static_cast<std::size_t>(i)] > shape[axis]) refuse(node, "split sizes do not fit axis " + std::to_string(axis));
      std::vector<AxisSlice> slices;
      for (const std::uint32_t d : shape) slices.push_back({0, 1, d});
      slices[axis] = {start, 1, static_cast<std::uint32_t>(sizes[static_cast<std::size_t>(i)])};
      start += sizes[static_cast<std::size_t>(i)];
      const Tensor part = sliceTensor(node, x, slices, nameOf(node) + "." + std::to_string(i));
      values_[node.output(i)] = {false, {}, part};
      result_.nodes.push_back({node.name(), node.op_type(), "slice", shapeOf(part)});
    }
  }

  // Gather on a computed tensor with constant indices: each index a slice of the axis (joined when several).
  void importGather(const onnx::NodeProto& node) {
    const auto a = attributes(node, {"axis"});
    const Tensor x = tensorInput(node, 0);
    const Constant* indices = constantInput(node, 1);
    const Shape shape = shapeOf(x);
    const auto axis = static_cast<std::size_t>(normalizedAxis(node, integer(a, "axis", 0), shape.size()));
    if (!indices || indices->shape.size() > 1 || indices->values.empty() || indices->values.size() > 64) {
      refuse(node, "only a constant scalar index or up to 64 constant indices are supported");
    }
    std::vector<Tensor> parts;
    for (const double raw : indices->values) {
      std::int64_t index = whole(node, raw);
      if (index < -static_cast<std::int64_t>(shape[axis]) || index >= shape[axis]) refuse(node, "index " + std::to_string(index) + " is outside axis " + std::to_string(axis));
      if (index < 0) index += shape[axis];
      std::vector<AxisSlice> slices;
      for (const std::uint32_t d : shape) slices.push_back({0, 1, d});
      slices[axis] = {index, 1, 1};
      parts.push_back(sliceTensor(node, x, slices, nameOf(node)));
    }
    Shape out(shape);
    if (indices->shape.empty()) {
      out.erase(out.begin() + static_cast<std::ptrdiff_t>(axis));
      apply(node, reshapeOp(out), {parts[0]}, "slice");
      return;
    }
    if (parts.size() == 1) {
      define(node, parts[0], "slice");
      return;
    }
    apply(node, concatOp(static_cast<std::uint32_t>(axis)), parts, "gather");
  }

  void importPad(const onnx::NodeProto& node) {
    const auto a = attributes(node, {"mode", "pads", "value"});
    const std::string mode = a.count("mode") ? a.at("mode")->s() : "constant";
    if (mode != "constant") refuse(node, "mode " + mode + " is not supported (constant only)");
    const Tensor x = tensorInput(node, 0);
    const Shape shape = shapeOf(x);
    std::vector<std::int64_t> pads = integers(a, "pads");
    float value = static_cast<float>(real(a, "value", 0.0));
    if (result_.opset >= 11) {
      pads.clear();
      for (const double v : input(node, 1).values) pads.push_back(whole(node, v));
      if (node.input_size() > 2 && !node.input(2).empty()) value = static_cast<float>(scalar(node, 2));
      if (node.input_size() > 3 && !node.input(3).empty()) refuse(node, "the axes input is not supported");
    }
    if (pads.size() != 2 * shape.size()) refuse(node, "pads must hold 2 values per axis");
    std::vector<std::uint32_t> before, after;
    for (std::size_t i = 0; i < shape.size(); ++i) {
      if (pads[i] < 0 || pads[i + shape.size()] < 0 || pads[i] > (1 << 16) || pads[i + shape.size()] > (1 << 16)) refuse(node, "negative or huge pads are not supported");
      before.push_back(static_cast<std::uint32_t>(pads[i]));
      after.push_back(static_cast<std::uint32_t>(pads[i + shape.size()]));
    }
    apply(node, padOp(before, after, value), {x}, "pad");
  }

  // Shape arithmetic and other work on constants runs here, at load: a node whose inputs are all constants
  // (or, for Shape, a tensor whose shape is known for the bound batch) becomes a constant itself.
  bool foldable(const onnx::NodeProto& node) const {
    static const std::set<std::string> folded = {"Shape", "Gather", "Unsqueeze", "Squeeze", "Concat", "Cast", "Slice", "Add", "Sub",
                                                 "Mul", "Div", "ConstantOfShape", "Reshape", "Equal", "Where", "Range", "Expand"};
    if (!folded.count(node.op_type())) return false;
    if (node.op_type() == "Shape") return true;
    for (const std::string& name : node.input()) {
      if (!name.empty() && !value(name, "node '" + node.name() + "'").constant) return false;
    }
    return true;
  }

  // A constant input (a shape, axes, indices, a folded operand): a computed tensor there is refused, never read as empty.
  const Constant& input(const onnx::NodeProto& node, int index) const {
    const Value& v = operand(node, index);
    if (!v.constant) refuse(node, "input " + std::to_string(index) + " must be a constant (shapes, axes and indices are folded at load)");
    return v.host;
  }
  // A constant's value used as an integer (an index, axis or dimension): refused unless whole and in range,
  // never converted with undefined behaviour.
  std::int64_t whole(const onnx::NodeProto& node, double v) const {
    if (!std::isfinite(v) || std::abs(v) > 9.0e15 || v != std::trunc(v)) refuse(node, "a value used as an integer is not one");
    return static_cast<std::int64_t>(v);
  }
  // A folded constant's shape from values, each dimension from 0 to 2^24, at most largestFolded elements.
  std::vector<std::int64_t> foldedShape(const onnx::NodeProto& node, const std::vector<double>& values) const {
    std::vector<std::int64_t> shape;
    std::size_t count = 1;
    for (const double v : values) {
      const std::int64_t d = whole(node, v);
      if (d < 0 || d > (1 << 24)) refuse(node, "a dimension of " + std::to_string(d));
      shape.push_back(d);
      count = d == 0 ? 0 : std::min<std::size_t>(count * static_cast<std::size_t>(d), largestFolded + 1);
    }
    if (count > largestFolded) refuse(node, "a folded constant of more than " + std::to_string(largestFolded) + " elements");
    return shape;
  }

  // The product of some dimensions of a constant, which may be large where another dimension is 0 (no elements,
  // yet loops over the rest would run for ever): refused beyond largestFolded.
  std::size_t boundedProduct(const onnx::NodeProto& node, std::vector<std::int64_t>::const_iterator begin,
                             std::vector<std::int64_t>::const_iterator end) const {
    std::size_t product = 1;
    for (auto it = begin; it != end; ++it) {
      product *= static_cast<std::size_t>(*it);
      if (product > largestFolded) refuse(node, "a constant with more than " + std::to_string(largestFolded) + " rows");
    }
    return product;
  }

  // The first value of a constant input that must hold at least one.
  double scalar(const onnx::NodeProto& node, int index) const {
    const Constant& c = input(node, index);
    if (c.values.empty()) refuse(node, "input " + std::to_string(index) + " is empty where a value is needed");
    return c.values[0];
  }
  // Axis values, from an attribute (older opsets) or a constant input (newer ones), made non-negative for `rank`.
  std::vector<std::int64_t> axes(const onnx::NodeProto& node, const std::map<std::string, const onnx::AttributeProto*>& a,
                                 int inputIndex, std::int64_t rank) const {
    std::vector<std::int64_t> list = integers(a, "axes");
    if (node.input_size() > inputIndex && !node.input(inputIndex).empty()) {
      const Constant& given = input(node, inputIndex);
      list.clear();
      for (const double v : given.values) list.push_back(whole(node, v));
    }
    for (std::int64_t& axis : list) {
      if (axis < -rank || axis >= rank) refuse(node, "axis " + std::to_string(axis) + " is outside rank " + std::to_string(rank));
      if (axis < 0) axis += rank;
    }
    return list;
  }

  static std::vector<std::size_t> strides(const std::vector<std::int64_t>& shape) {
    std::vector<std::size_t> result(shape.size(), 1);
    for (std::size_t i = shape.size(); i-- > 1;) result[i - 1] = result[i] * static_cast<std::size_t>(shape[i]);
    return result;
  }

  // NumPy broadcasting of constants: `combine` over the elements of the broadcast shape.
  Constant broadcast(const onnx::NodeProto& node, const std::vector<const Constant*>& operands,
                     const std::function<double(const std::vector<double>&)>& combine) const {
    std::size_t rank = 0;
    for (const Constant* c : operands) rank = std::max(rank, c->shape.size());
    Constant result;
    result.shape.assign(rank, 1);
    for (const Constant* c : operands) {
      for (std::size_t i = 0; i < c->shape.size(); ++i) {
        std::int64_t& d = result.shape[rank - c->shape.size() + i];
        const std::int64_t e = c->shape[i];
        if (d != e && d != 1 && e != 1) refuse(node, "shapes " + describe(operands[0]->shape) + " and " + describe(c->shape) + " do not broadcast");
        d = d == 1 ? e : d;
      }
    }
    const std::size_t count = result.elements();
    if (count > largestFolded) refuse(node, "a folded constant of " + std::to_string(count) + " elements is too large");
    result.values.resize(count);
    const std::vector<std::size_t> out = strides(result.shape);
    std::vector<double> arguments(operands.size());
    for (std::size_t i = 0; i < count; ++i) {
      for (std::size_t k = 0; k < operands.size(); ++k) {
        const Constant& c = *operands[k];
        const std::vector<std::size_t> own = strides(c.shape);
        std::size_t at = 0;
        for (std::size_t axis = 0; axis < c.shape.size(); ++axis) {
          const std::size_t index = i / out[rank - c.shape.size() + axis] % static_cast<std::size_t>(result.shape[rank - c.shape.size() + axis]);
          at += (c.shape[axis] == 1 ? 0 : index) * own[axis];
        }
        arguments[k] = c.values[at];
      }
      result.values[i] = combine(arguments);
    }
    return result;
  }

  Constant fold(const onnx::NodeProto& node) {
    const std::string& op = node.op_type();
    if (op == "Shape") {
      const auto a = attributes(node, {"start", "end"});
      const Value& in = operand(node, 0);
      std::vector<std::int64_t> dims;
      if (in.constant) {
        dims = in.host.shape;
      } else {
        for (const std::uint32_t d : graph_.tensor(in.tensor).shape) dims.push_back(d);
      }
      const auto rank = static_cast<std::int64_t>(dims.size());
      const auto clampAxis = [rank](std::int64_t axis) { return std::clamp(axis < 0 ? axis + rank : axis, std::int64_t{0}, rank); };
      const std::int64_t start = clampAxis(integer(a, "start", 0)), end = clampAxis(integer(a, "end", rank));
      Constant result{{std::max<std::int64_t>(end - start, 0)}, {}, true};
      for (std::int64_t i = start; i < end; ++i) result.values.push_back(static_cast<double>(dims[static_cast<std::size_t>(i)]));
      return result;
    }
    if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Equal") {
      attributes(node, {});
      const Constant& x = input(node, 0);
      const Constant& y = input(node, 1);
      const bool integral = x.integer && y.integer;
      Constant result = broadcast(node, {&x, &y}, [&](const std::vector<double>& v) {
        if (op == "Add") return v[0] + v[1];
        if (op == "Sub") return v[0] - v[1];
        if (op == "Mul") return v[0] * v[1];
        if (op == "Equal") return v[0] == v[1] ? 1.0 : 0.0;
        if (integral && v[1] == 0) refuse(node, "integer division by zero");
        return integral ? std::trunc(v[0] / v[1]) : v[0] / v[1];
      });
      result.integer = integral || op == "Equal";
      return result;
    }
    if (op == "Where") {
      attributes(node, {});
      Constant result = broadcast(node, {&input(node, 0), &input(node, 1), &input(node, 2)},
                                  [](const std::vector<double>& v) { return v[0] != 0 ? v[1] : v[2]; });
      result.integer = input(node, 1).integer && input(node, 2).integer;
      return result;
    }
    if (op == "Cast") {
      const auto a = attributes(node, {"to", "saturate"});
      Constant result = input(node, 0);
      const std::int64_t to = integer(a, "to", 0);
      const bool integral = to == onnx::TensorProto::INT64 || to == onnx::TensorProto::INT32 || to == onnx::TensorProto::INT8 ||
                            to == onnx::TensorProto::UINT8 || to == onnx::TensorProto::INT16 || to == onnx::TensorProto::BOOL;
      if (!integral && to != onnx::TensorProto::FLOAT && to != onnx::TensorProto::DOUBLE && to != onnx::TensorProto::FLOAT16) {
        refuse(node, "a cast to ONNX type " + std::to_string(to) + " is not supported");
      }
      if (integral) {
        for (double& v : result.values) v = to == onnx::TensorProto::BOOL ? (v != 0 ? 1.0 : 0.0) : std::trunc(v);
      } else if (to == onnx::TensorProto::FLOAT || to == onnx::TensorProto::FLOAT16) {
        for (double& v : result.values) v = static_cast<float>(v);
      }
      result.integer = integral;
      return result;
    }
    if (op == "Unsqueeze" || op == "Squeeze") {
      const auto a = attributes(node, {"axes"});
      Constant result = input(node, 0);
      const auto rank = static_cast<std::int64_t>(result.shape.size());
      if (op == "Unsqueeze") {
        std::vector<std::int64_t> list = axes(node, a, 1, rank + static_cast<std::int64_t>(integers(a, "axes").size() +
                                                          (node.input_size() > 1 ? input(node, 1).values.size() : 0)));
        std::sort(list.begin(), list.end());
        for (const std::int64_t axis : list) result.shape.insert(result.shape.begin() + axis, 1);
      } else {
        std::vector<std::int64_t> list = axes(node, a, 1, rank);
        if (list.empty()) {
          result.shape.erase(std::remove(result.shape.begin(), result.shape.end(), 1), result.shape.end());
        } else {
          std::sort(list.rbegin(), list.rend());
          for (const std::int64_t axis : list) {
            if (result.shape[static_cast<std::size_t>(axis)] != 1) refuse(node, "squeezed axis " + std::to_string(axis) + " is not 1");
            result.shape.erase(result.shape.begin() + axis);
          }
        }
      }
      return result;
    }
    if (op == "Concat") {
      const auto a = attributes(node, {"axis"});
      const Constant& first = input(node, 0);
      const auto rank = static_cast<std::int64_t>(first.shape.size());
      std::int64_t axis = integer(a, "axis", 0);
      if (rank == 0 || axis < -rank || axis >= rank) refuse(node, "axis " + std::to_string(axis) + " is outside rank " + std::to_string(rank));
      if (axis < 0) axis += rank;
      Constant result = first;
      result.shape[static_cast<std::size_t>(axis)] = 0;
      const std::size_t outer = boundedProduct(node, first.shape.begin(), first.shape.begin() + axis);
      std::vector<std::vector<double>> pieces(outer);
      for (int k = 0; k < node.input_size(); ++k) {
        const Constant& part = input(node, k);
        if (part.shape.size() != first.shape.size()) refuse(node, "inputs of different ranks");
        for (std::size_t d = 0; d < part.shape.size(); ++d) {
          if (d != static_cast<std::size_t>(axis) && part.shape[d] != first.shape[d]) refuse(node, "inputs of different shapes");
        }
        result.shape[static_cast<std::size_t>(axis)] += part.shape[static_cast<std::size_t>(axis)];
        const std::size_t block = outer ? part.values.size() / outer : 0;
        for (std::size_t o = 0; o < outer; ++o) {
          pieces[o].insert(pieces[o].end(), part.values.begin() + static_cast<std::ptrdiff_t>(o * block),
                           part.values.begin() + static_cast<std::ptrdiff_t>((o + 1) * block));
        }
        result.integer = result.integer && part.integer;
      }
      result.values.clear();
      for (const auto& piece : pieces) result.values.insert(result.values.end(), piece.begin(), piece.end());
      return result;
    }
    if (op == "Gather") {
      const auto a = attributes(node, {"axis"});
      const Constant& data = input(node, 0);
      const Constant& indices = input(node, 1);
      const auto rank = static_cast<std::int64_t>(data.shape.size());
      std::int64_t axis = integer(a, "axis", 0);
      if (rank == 0 || axis < -rank || axis >= rank) refuse(node, "axis " + std::to_string(axis) + " is outside rank " + std::to_string(rank));
      if (axis < 0) axis += rank;
      const auto ax = static_cast<std::size_t>(axis);
      const std::size_t outer = boundedProduct(node, data.shape.begin(), data.shape.begin() + axis);
      const std::size_t inner = boundedProduct(node, data.shape.begin() + axis + 1, data.shape.end());
      if (outer * inner * indices.values.size() > largestFolded) refuse(node, "a folded constant is too large");
      const std::int64_t extent = data.shape[ax];
      Constant result;
      result.integer = data.integer;
      result.shape.assign(data.shape.begin(), data.shape.begin() + axis);
      result.shape.insert(result.shape.end(), indices.shape.begin(), indices.shape.end());
      result.shape.insert(result.shape.end(), data.shape.begin() + axis + 1, data.shape.end());
      for (std::size_t o = 0; o < outer; ++o) {
        for (const double raw : indices.values) {
          std::int64_t index = whole(node, raw);
          if (index < -extent || index >= extent) refuse(node, "index " + std::to_string(index) + " is outside " + std::to_string(extent));
          if (index < 0) index += extent;
          const std::size_t base = (o * static_cast<std::size_t>(extent) + static_cast<std::size_t>(index)) * inner;
          result.values.insert(result.values.end(), data.values.begin() + static_cast<std::ptrdiff_t>(base),
                               data.values.begin() + static_cast<std::ptrdiff_t>(base + inner));
        }
      }
      return result;
    }
    if (op == "Slice") {
      attributes(node, {});
      if (result_.opset < 10) refuse(node, "Slice before opset 10 is not supported");
      const Constant& data = input(node, 0);
      if (data.shape.size() != 1) refuse(node, "only slices of 1-D constants (shapes) are folded");
      const auto extent = static_cast<std::int64_t>(data.shape[0]);
      const auto startValue = static_cast<std::int64_t>(std::clamp(scalar(node, 1), -1e18, 1e18));
      const auto endValue = static_cast<std::int64_t>(std::clamp(scalar(node, 2), -1e18, 1e18));
      const std::int64_t step = node.input_size() > 4 && !node.input(4).empty() ? static_cast<std::int64_t>(std::clamp(scalar(node, 4), -1e18, 1e18)) : 1;
      if (step != 1) refuse(node, "steps other than 1 are not folded");
      const auto clamp = [extent](std::int64_t i) { return std::clamp(i < 0 ? i + extent : i, std::int64_t{0}, extent); };
      Constant result{{0}, {}, data.integer};
      for (std::int64_t i = clamp(startValue); i < clamp(endValue); ++i) result.values.push_back(data.values[static_cast<std::size_t>(i)]);
      result.shape[0] = static_cast<std::int64_t>(result.values.size());
      return result;
    }
    if (op == "ConstantOfShape") {
      const auto a = attributes(node, {"value"});
      const Constant& shape = input(node, 0);
      Constant result{foldedShape(node, shape.values), {}, false};
      double fill = 0;
      if (a.count("value")) {
        const Constant given = readTensor(a.at("value")->t());
        if (given.values.size() != 1) refuse(node, "value must hold one element");
        fill = given.values[0];
        result.integer = given.integer;
      }
      result.values.assign(result.elements(), fill);
      return result;
    }
    if (op == "Range") {
      attributes(node, {});
      const double start = scalar(node, 0), limit = scalar(node, 1), delta = scalar(node, 2);
      if (delta == 0) refuse(node, "delta is 0");
      const double count = std::max(std::ceil((limit - start) / delta), 0.0);
      if (!(count <= static_cast<double>(largestFolded))) refuse(node, "a range of more than " + std::to_string(largestFolded) + " elements");
      Constant result{{static_cast<std::int64_t>(count)}, {}, input(node, 0).integer};
      for (std::int64_t i = 0; i < static_cast<std::int64_t>(count); ++i) result.values.push_back(start + static_cast<double>(i) * delta);
      return result;
    }
    if (op == "Expand") {
      attributes(node, {});
      Constant target;
      target.shape = foldedShape(node, input(node, 1).values);
      target.values.assign(target.elements(), 0.0);
      Constant result = broadcast(node, {&input(node, 0), &target}, [](const std::vector<double>& v) { return v[0]; });
      result.integer = input(node, 0).integer;
      return result;
    }
    // Reshape of a constant.
    attributes(node, {"allowzero"});
    Constant result = input(node, 0);
    const Constant& target = input(node, 1);
    std::vector<std::int64_t> shape;
    std::int64_t inferred = -1, known = 1;
    const auto count = static_cast<std::int64_t>(result.values.size());
    for (std::size_t i = 0; i < target.values.size(); ++i) {
      std::int64_t d = whole(node, target.values[i]);
      if (d == 0 && i < result.shape.size()) d = result.shape[i];
      if (d == -1) {
        if (inferred >= 0) refuse(node, "two dimensions are -1");
        inferred = static_cast<std::int64_t>(i);
        shape.push_back(1);
        continue;
      }
      if (d < 0) refuse(node, "a dimension of " + std::to_string(d));
      // Every factor stays within the element count, so the product never overflows.
      if (d > std::max<std::int64_t>(count, 1) || (d != 0 && known > std::max<std::int64_t>(count, 1) / d)) {
        refuse(node, "the new shape holds a different number of elements");
      }
      shape.push_back(d);
      known *= d;
    }
    if (inferred >= 0 && known > 0) shape[static_cast<std::size_t>(inferred)] = count / known;
    result.shape = shape;
    if (static_cast<std::int64_t>(result.elements()) != count) refuse(node, "the new shape holds a different number of elements");
    return result;
  }

  std::string path_;
  std::uint32_t batch_;
  Graph graph_;
  OnnxModel result_;
  std::map<std::string, Value> values_;
  std::map<int, Tensor> softmaxInputs_;                  // softmax output tensor id → its input
  std::map<std::string, int> consumers_;                 // readers of each name: nodes and graph outputs
  std::map<int, std::pair<Tensor, Tensor>> layers_;      // output tensor id → weight, bias of the dense or conv computing it
  std::map<std::string, std::vector<const onnx::NodeProto*>> readers_;  // the nodes reading each name
  std::set<const onnx::NodeProto*> fused_;               // pointwise nodes run inside the kernel before them
  std::map<const onnx::NodeProto*, std::string> aliases_;  // a fused node whose result is another name's value
  std::map<std::string, Tensor> scaledInputs_;             // a gate's Mul output -> its scale, applied by the convolution reading it
  std::map<std::string, Tensor> uploaded_;               // constants made parameters, by name
};

}  // namespace

OnnxModel readOnnx(const std::string& path, std::uint32_t batch) { return Importer(path, batch).run(); }

bool isOnnxPath(const std::string& path) {
  return path.size() >= 5 && path.compare(path.size() - 5, 5, ".onnx") == 0;
}

}  // namespace glnet
