#include "formats/Onnx.h"

#include "gl/FileInput.h"
#include "gl/check.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <set>

namespace glnet {
namespace {

// A constant on the host: an initializer, a Constant node's value, or a folded result.
// Folded constants are shapes and small tables; anything larger is no shape arithmetic.
constexpr std::size_t largestFolded = std::size_t{1} << 22;

struct Constant {
  std::vector<std::int64_t> shape;
  std::vector<double> values;
  bool integer = false;  // int32/int64 data: division truncates, casts round toward zero
  std::size_t elements() const {
    std::size_t count = 1;
    for (const std::int64_t d : shape) count *= static_cast<std::size_t>(d);
    return count;
  }
};

// A tensor name's value while the graph is built: a constant on the host, or a tensor of the glnet graph.
struct Value {
  bool constant = false;
  Constant host;
  Tensor tensor;
};

std::string describe(const std::vector<std::int64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

class Importer {
 public:
  Importer(std::string path, std::uint32_t batch) : path_(std::move(path)), batch_(batch) {}

  OnnxModel run() {
    const std::string bytes = readRegularFile(path_, largestOnnxBytes);
    onnx::ModelProto model;
    if (!model.ParseFromString(bytes)) throw Error(path_ + ": not an ONNX model (the protobuf does not parse)");
    for (const onnx::OperatorSetIdProto& set : model.opset_import()) {
      if (set.domain().empty() || set.domain() == "ai.onnx") result_.opset = set.version();
    }
    if (result_.opset == 0) throw Error(path_ + ": the model imports no opset of the default ONNX domain");
    if (result_.opset < 7 || result_.opset > 18) {
      throw Error(path_ + ": opset " + std::to_string(result_.opset) + "; glnet reads opsets 7 to 18");
    }
    for (const onnx::StringStringEntryProto& entry : model.metadata_props()) result_.metadata[entry.key()] = entry.value();
    result_.producer = model.producer_name() + (model.producer_version().empty() ? "" : " " + model.producer_version());
    const onnx::GraphProto& graph = model.graph();
    for (const onnx::NodeProto& node : graph.node()) {
      for (const std::string& name : node.input()) ++consumers_[name];
    }
    for (const onnx::ValueInfoProto& output : graph.output()) ++consumers_[output.name()];
    for (const onnx::TensorProto& initializer : graph.initializer()) values_[initializer.name()] = {true, readTensor(initializer), {}};
    readInput(graph);
    for (const onnx::NodeProto& node : graph.node()) importNode(node);
    if (graph.output_size() != 1) {
      throw Error(path_ + ": the model has " + std::to_string(graph.output_size()) + " outputs; glnet runs models with one output so far");
    }
    result_.outputName = graph.output(0).name();
    const Value& output = value(result_.outputName, "the graph output");
    if (output.constant) throw Error(path_ + ": the output " + result_.outputName + " is a constant; nothing to run");
    result_.output = output.tensor;
    const auto softmax = softmaxInputs_.find(output.tensor.id);
    result_.logits = softmax == softmaxInputs_.end() ? output.tensor : softmax->second;
    result_.graph = std::move(graph_);
    return std::move(result_);
  }

 private:
  [[noreturn]] void refuse(const onnx::NodeProto& node, const std::string& why) const {
    throw Error(path_ + ": node '" + node.name() + "' (" + node.op_type() + ", opset " + std::to_string(result_.opset) + "): " + why);
  }

  Constant readTensor(const onnx::TensorProto& tensor) {
    Constant constant;
    for (const std::int64_t d : tensor.dims()) {
      if (d < 0 || d > (std::int64_t{1} << 32)) throw Error(path_ + ": tensor " + tensor.name() + " has a dimension of " + std::to_string(d));
      constant.shape.push_back(d);
    }
    std::size_t count = 1;
    for (const std::int64_t d : constant.shape) {
      if (d != 0 && count > (std::size_t{1} << 31) / static_cast<std::size_t>(d)) throw Error(path_ + ": tensor " + tensor.name() + " is too large");
      count *= static_cast<std::size_t>(d);
    }
    std::string external;
    const std::string* raw = tensor.has_raw_data() ? &tensor.raw_data() : nullptr;
    if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
      external = externalData(tensor);
      raw = &external;
    }
    // The data must hold exactly the shape's elements, checked before anything is allocated for them.
    const auto element = [&](std::size_t bytes, int typedValues) {
      if (raw && raw->size() != count * bytes) {
        throw Error(path_ + ": tensor " + tensor.name() + " holds " + std::to_string(raw->size()) + " bytes for shape " +
                    describe(constant.shape));
      }
      if (!raw && static_cast<std::size_t>(typedValues) != count) throw Error(path_ + ": tensor " + tensor.name() + " has the wrong number of values");
      constant.values.resize(count);
    };
    switch (tensor.data_type()) {
      case onnx::TensorProto::FLOAT:
        element(4, tensor.float_data_size());
        for (std::size_t i = 0; i < count; ++i) {
          float v;
          if (raw) std::memcpy(&v, raw->data() + 4 * i, 4); else v = tensor.float_data(static_cast<int>(i));
          constant.values[i] = v;
        }
        break;
      case onnx::TensorProto::DOUBLE:
        element(8, tensor.double_data_size());
        for (std::size_t i = 0; i < count; ++i) {
          double v;
          if (raw) std::memcpy(&v, raw->data() + 8 * i, 8); else v = tensor.double_data(static_cast<int>(i));
          constant.values[i] = v;
        }
        break;
      case onnx::TensorProto::INT64:
        constant.integer = true;
        element(8, tensor.int64_data_size());
        for (std::size_t i = 0; i < count; ++i) {
          std::int64_t v;
          if (raw) std::memcpy(&v, raw->data() + 8 * i, 8); else v = tensor.int64_data(static_cast<int>(i));
          constant.values[i] = static_cast<double>(v);
        }
        break;
      case onnx::TensorProto::INT32:
        constant.integer = true;
        element(4, tensor.int32_data_size());
        for (std::size_t i = 0; i < count; ++i) {
          std::int32_t v;
          if (raw) std::memcpy(&v, raw->data() + 4 * i, 4); else v = tensor.int32_data(static_cast<int>(i));
          constant.values[i] = v;
        }
        break;
      default:
        throw Error(path_ + ": tensor " + tensor.name() + " has ONNX data type " + std::to_string(tensor.data_type()) +
                    "; glnet reads float, double, int32 and int64 constants");
    }
    return constant;
  }

  // A tensor stored beside the model (the format's external data: location, offset, length), read with the
  // same checks as the model file: a regular file in the model's directory, the range inside it.
  std::string externalData(const onnx::TensorProto& tensor) const {
    std::string location;
    std::uint64_t offset = 0, length = 0;
    bool hasLength = false;
    for (const onnx::StringStringEntryProto& entry : tensor.external_data()) {
      try {
        if (entry.key() == "location") location = entry.value();
        if (entry.key() == "offset") offset = std::stoull(entry.value());
        if (entry.key() == "length") length = std::stoull(entry.value()), hasLength = true;
      } catch (const std::exception&) {
        throw Error(path_ + ": tensor " + tensor.name() + " has a bad external_data " + entry.key());
      }
    }
    const std::filesystem::path relative(location);
    if (location.empty() || relative.is_absolute() ||
        std::any_of(relative.begin(), relative.end(), [](const std::filesystem::path& part) { return part == ".."; })) {
      throw Error(path_ + ": tensor " + tensor.name() + " names external data '" + location.substr(0, 100) +
                  "'; it must be a file beside the model");
    }
    const std::string file = (std::filesystem::path(path_).parent_path() / relative).string();
    const std::string bytes = readRegularFile(file, largestOnnxBytes);
    if (offset > bytes.size() || (hasLength && length > bytes.size() - offset)) {
      throw Error(path_ + ": tensor " + tensor.name() + ": its external data runs past the end of " + file);
    }
    return bytes.substr(offset, hasLength ? length : std::string::npos);
  }

  void readInput(const onnx::GraphProto& graph) {
    std::vector<const onnx::ValueInfoProto*> inputs;
    for (const onnx::ValueInfoProto& input : graph.input()) {
      if (!values_.count(input.name())) inputs.push_back(&input);  // older exporters list initializers as inputs too
    }
    if (inputs.size() != 1) {
      throw Error(path_ + ": the model has " + std::to_string(inputs.size()) + " inputs; glnet runs models with one input so far");
    }
    const onnx::ValueInfoProto& input = *inputs[0];
    if (!input.type().has_tensor_type() || input.type().tensor_type().elem_type() != onnx::TensorProto::FLOAT) {
      throw Error(path_ + ": input " + input.name() + " is not a float tensor");
    }
    Shape shape;
    const auto& dims = input.type().tensor_type().shape().dim();
    if (dims.empty()) throw Error(path_ + ": input " + input.name() + " has no shape");
    for (int i = 0; i < dims.size(); ++i) {
      if (dims[i].has_dim_value()) {
        const std::int64_t d = dims[i].dim_value();
        if (d < 1 || d > (1 << 24)) throw Error(path_ + ": input " + input.name() + " has dimension " + std::to_string(d));
        shape.push_back(static_cast<std::uint32_t>(d));
      } else if (i == 0) {
        shape.push_back(batch_ == 0 ? 1 : batch_);
        result_.dynamicBatch = true;
      } else {
        throw Error(path_ + ": input " + input.name() + " has a symbolic dimension " + std::to_string(i) + "; only the batch may be");
      }
    }
    if (batch_ != 0 && shape[0] != batch_) {
      throw Error(path_ + ": the model's batch is fixed at " + std::to_string(shape[0]) + ", not " + std::to_string(batch_));
    }
    result_.inputName = input.name();
    result_.input = graph_.input(input.name(), shape);
    values_[input.name()] = {false, {}, result_.input};
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

  static std::int64_t integer(const std::map<std::string, const onnx::AttributeProto*>& attributes, const std::string& name, std::int64_t otherwise) {
    const auto found = attributes.find(name);
    return found == attributes.end() ? otherwise : found->second->i();
  }
  static double real(const std::map<std::string, const onnx::AttributeProto*>& attributes, const std::string& name, double otherwise) {
    const auto found = attributes.find(name);
    return found == attributes.end() ? otherwise : found->second->f();
  }
  static std::vector<std::int64_t> integers(const std::map<std::string, const onnx::AttributeProto*>& attributes, const std::string& name) {
    const auto found = attributes.find(name);
    if (found == attributes.end()) return {};
    return {found->second->ints().begin(), found->second->ints().end()};
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
    if (foldable(node)) {
      values_[node.output(0)] = {true, fold(node), {}};
      result_.nodes.push_back({node.name(), node.op_type(), "folded", {}});
      return;
    }
    const std::string& op = node.op_type();
    if (op == "Softmax") {
      const auto a = attributes(node, {"axis"});
      const Tensor x = tensorInput(node, 0);
      const std::int64_t axis = integer(a, "axis", result_.opset >= 13 ? -1 : 1);
      if (graph_.tensor(x).shape.size() != 2 || (axis != 1 && axis != -1)) refuse(node, "only the softmax of each row of a [batch, classes] tensor is supported yet");
      softmaxInputs_[apply(node, softmaxOp(), {x}, "softmax").id] = x;
    } else if (op == "Constant") {
      const auto a = attributes(node, {"value"});
      if (!a.count("value")) refuse(node, "only the value attribute is supported");
      values_[node.output(0)] = {true, readTensor(a.at("value")->t()), {}};
      result_.nodes.push_back({node.name(), op, "folded", {}});
    } else if (op == "Identity" || op == "Dropout") {
      attributes(node, {"seed", "ratio"});
      if (node.output_size() > 1 && !node.output(1).empty()) refuse(node, "the mask output is not supported (inference only)");
      const Value& in = operand(node, 0);
      values_[node.output(0)] = in;
      result_.nodes.push_back({node.name(), op, "identity", in.constant ? Shape{} : graph_.tensor(in.tensor).shape});
    } else if (op == "Gemm" || op == "MatMul") {
      importDense(node);
    } else if (op == "Add") {
      attributes(node, {});
      importAdd(node);
    } else if (op == "Relu" || op == "Sigmoid" || op == "Tanh") {
      attributes(node, {});
      const Activation activation = op == "Relu" ? Activation::relu : op == "Sigmoid" ? Activation::sigmoid : Activation::tanh;
      apply(node, activationOp(activation), {tensorInput(node, 0)}, "activation");
    } else if (op == "Conv") {
      importConv(node);
    } else if (op == "BatchNormalization") {
      importBatchNormalization(node);
    } else if (op == "MaxPool") {
      const auto a = attributes(node, {"kernel_shape", "strides", "pads", "dilations", "ceil_mode", "auto_pad", "storage_order"});
      const auto pads = integers(a, "pads");
      const auto dilations = integers(a, "dilations");
      if (integers(a, "kernel_shape") != std::vector<std::int64_t>{2, 2} || integers(a, "strides") != std::vector<std::int64_t>{2, 2} ||
          std::any_of(pads.begin(), pads.end(), [](std::int64_t p) { return p != 0; }) ||
          std::any_of(dilations.begin(), dilations.end(), [](std::int64_t d) { return d != 1; }) || integer(a, "ceil_mode", 0) != 0 ||
          (a.count("auto_pad") && a.at("auto_pad")->s() != "NOTSET")) {
        refuse(node, "only 2x2 pooling with stride 2, no padding and floor rounding is supported so far");
      }
      if (node.output_size() > 1 && !node.output(1).empty()) refuse(node, "the indices output is not supported");
      apply(node, maxPoolOp(), {tensorInput(node, 0)}, "max pool");
    } else if (op == "Flatten") {
      const auto a = attributes(node, {"axis"});
      if (integer(a, "axis", 1) != 1) refuse(node, "only axis 1 (keep the batch) is supported");
      apply(node, flattenOp(), {tensorInput(node, 0)}, "view");
    } else if (op == "Reshape") {
      attributes(node, {"allowzero"});
      importReshape(node);
    } else {
      refuse(node, "the op " + op + " is not supported yet (glnet runs Gemm, MatMul, Add, Relu, Sigmoid, Tanh, Softmax, Conv, "
                   "BatchNormalization after Conv or Gemm, MaxPool, Flatten, Reshape, Identity, Dropout and Constant so far, "
                   "and folds shape arithmetic on constants)");
    }
  }

  // Gemm (Y = alpha·A·op(B) + beta·C) and MatMul (Y = A·B) with a constant B: one dense layer.
  void importDense(const onnx::NodeProto& node) {
    const bool gemm = node.op_type() == "Gemm";
    const auto a = attributes(node, gemm ? std::set<std::string>{"alpha", "beta", "transA", "transB"} : std::set<std::string>{});
    if (integer(a, "transA", 0) != 0) refuse(node, "transA = 1 is not supported");
    const Tensor x = tensorInput(node, 0);
    const Shape& xShape = graph_.tensor(x).shape;
    if (xShape.size() != 2) refuse(node, "A must be [batch, features] for glnet so far, not rank " + std::to_string(xShape.size()));
    const Constant* b = constantInput(node, 1);
    if (!b || b->shape.size() != 2) refuse(node, "B must be a constant matrix");
    const bool transposed = integer(a, "transB", 0) != 0;
    const std::int64_t inputs = transposed ? b->shape[1] : b->shape[0], outputs = transposed ? b->shape[0] : b->shape[1];
    if (inputs != xShape[1]) refuse(node, "A has " + std::to_string(xShape[1]) + " columns but B takes " + std::to_string(inputs));
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
      if (count != 1 && count != bias.size()) refuse(node, "C must broadcast along the rows ([N] or a scalar), not " + describe(c->shape));
      for (std::size_t o = 0; o < bias.size(); ++o) bias[o] = beta * c->values[count == 1 ? 0 : o];
    }
    const std::string name = node.name().empty() ? node.output(0) : node.name();
    const Tensor weightTensor = parameter(name + ".weight", {outputs, inputs}, weight);
    const Tensor biasTensor = parameter(name + ".bias", {outputs}, bias);
    layers_[apply(node, denseOp(Activation::none), {x, weightTensor, biasTensor}, "dense").id] = {weightTensor, biasTensor};
  }

  void importAdd(const onnx::NodeProto& node) {
    const Value& left = operand(node, 0);
    const Value& right = operand(node, 1);
    if (!left.constant && !right.constant) {
      if (graph_.tensor(left.tensor).shape != graph_.tensor(right.tensor).shape) refuse(node, "broadcasting between two computed tensors is not supported yet");
      apply(node, addOp(), {left.tensor, right.tensor}, "add");
      return;
    }
    if (left.constant && right.constant) refuse(node, "adding two constants is not folded yet");
    const Tensor x = left.constant ? right.tensor : left.tensor;
    const Constant& c = left.constant ? left.host : right.host;
    const Shape& shape = graph_.tensor(x).shape;
    if (shape.size() != 2 || c.elements() != shape[1] || (!c.shape.empty() && c.shape.back() != shape[1])) {
      refuse(node, "only a constant row [" + std::to_string(shape.size() == 2 ? shape[1] : 0) + "] added to a [batch, features] tensor is supported, not " +
                   describe(c.shape));
    }
    const std::string name = node.name().empty() ? node.output(0) : node.name();
    apply(node, biasAddOp(), {x, parameter(name + ".bias", {static_cast<std::int64_t>(shape[1])}, c.values)}, "bias add");
  }

  void importConv(const onnx::NodeProto& node) {
    const auto a = attributes(node, {"kernel_shape", "strides", "pads", "dilations", "group", "auto_pad"});
    const auto ones = [](const std::vector<std::int64_t>& v) { return std::all_of(v.begin(), v.end(), [](std::int64_t x) { return x == 1; }); };
    if (!ones(integers(a, "strides"))) refuse(node, "strides other than 1 are not supported yet");
    if (!ones(integers(a, "dilations"))) refuse(node, "dilations other than 1 are not supported yet");
    if (integer(a, "group", 1) != 1) refuse(node, "grouped convolutions are not supported yet");
    if (a.count("auto_pad") && a.at("auto_pad")->s() != "NOTSET") refuse(node, "auto_pad is not supported; export with explicit pads");
    const auto pads = integers(a, "pads");
    if (!pads.empty() && (pads.size() != 4 || std::adjacent_find(pads.begin(), pads.end(), std::not_equal_to<>()) != pads.end())) {
      refuse(node, "only the same padding on every side is supported yet");
    }
    const Tensor x = tensorInput(node, 0);
    const Constant* w = constantInput(node, 1);
    if (!w || w->shape.size() != 4) refuse(node, "W must be a constant [out_c, in_c, kh, kw]");
    if (!pads.empty() && (pads[0] < 0 || pads[0] >= std::min(w->shape[2], w->shape[3]))) {
      refuse(node, "pads of " + std::to_string(pads[0]) + " for a " + std::to_string(w->shape[2]) + "x" + std::to_string(w->shape[3]) + " kernel");
    }
    std::vector<double> bias(static_cast<std::size_t>(w->shape[0]), 0.0);
    if (const Constant* b = constantInput(node, 2)) {
      if (b->elements() != bias.size()) refuse(node, "B must be [" + std::to_string(bias.size()) + "]");
      bias = b->values;
    }
    const std::string name = node.name().empty() ? node.output(0) : node.name();
    const Tensor weight = parameter(name + ".weight", w->shape, w->values), b = parameter(name + ".bias", {w->shape[0]}, bias);
    layers_[apply(node, conv2dOp(Activation::none, static_cast<std::uint32_t>(pads.empty() ? 0 : pads[0])), {x, weight, b}, "conv").id] = {weight, b};
  }

  // Inference BatchNormalization, y = scale·(x − mean)/sqrt(var + epsilon) + B per channel, folded into the
  // convolution or dense layer that computes x (its only reader): weights scaled per output channel, bias shifted.
  void importBatchNormalization(const onnx::NodeProto& node) {
    const auto a = attributes(node, {"epsilon", "momentum", "training_mode", "spatial"});
    if (integer(a, "training_mode", 0) != 0) refuse(node, "training mode is not supported (export the model in eval mode)");
    if (integer(a, "spatial", 1) != 1) refuse(node, "spatial = 0 is not supported");
    if (node.output_size() > 1 && std::any_of(node.output().begin() + 1, node.output().end(), [](const std::string& o) { return !o.empty(); })) {
      refuse(node, "the running-statistics outputs are for training; export the model in eval mode");
    }
    const Tensor x = tensorInput(node, 0);
    const auto layer = layers_.find(x.id);
    if (layer == layers_.end() || consumers_[node.input(0)] != 1) {
      refuse(node, "only a BatchNormalization right after a Conv or Gemm that nothing else reads is supported (it is folded into it)");
    }
    const double epsilon = real(a, "epsilon", 1e-5);
    const Constant* scale = constantInput(node, 1);
    const Constant* shift = constantInput(node, 2);
    const Constant* mean = constantInput(node, 3);
    const Constant* variance = constantInput(node, 4);
    const auto [weightTensor, biasTensor] = layer->second;
    std::vector<float> weight = graph_.tensor(weightTensor).initial, bias = graph_.tensor(biasTensor).initial;
    const std::size_t channels = bias.size();
    for (const Constant* c : {scale, shift, mean, variance}) {
      if (!c || c->elements() != channels) refuse(node, "scale, B, mean and var must be constants of " + std::to_string(channels) + " values");
    }
    const std::size_t perChannel = weight.size() / channels;
    for (std::size_t c = 0; c < channels; ++c) {
      if (!(variance->values[c] + epsilon > 0)) refuse(node, "var + epsilon is not positive for channel " + std::to_string(c));
      const double factor = scale->values[c] / std::sqrt(variance->values[c] + epsilon);
      for (std::size_t i = 0; i < perChannel; ++i) weight[c * perChannel + i] = static_cast<float>(weight[c * perChannel + i] * factor);
      bias[c] = static_cast<float>((bias[c] - mean->values[c]) * factor + shift->values[c]);
    }
    graph_.setInitial(weightTensor, std::move(weight));
    graph_.setInitial(biasTensor, std::move(bias));
    values_[node.output(0)] = {false, {}, x};
    result_.nodes.push_back({node.name(), node.op_type(), "folded", graph_.tensor(x).shape});
  }

  // Reshape to [batch, features] (torch's x.view(x.size(0), -1), folded to a constant shape) is a flatten.
  void importReshape(const onnx::NodeProto& node) {
    const Tensor x = tensorInput(node, 0);
    const Constant* target = constantInput(node, 1);
    const Shape& shape = graph_.tensor(x).shape;
    std::size_t features = 1;
    for (std::size_t i = 1; i < shape.size(); ++i) features *= shape[i];
    const bool flattening = target && target->values.size() == 2 &&
                            (target->values[0] == 0 || target->values[0] == shape[0] || target->values[0] == -1) &&
                            (target->values[1] == -1 || target->values[1] == static_cast<double>(features)) &&
                            !(target->values[0] == -1 && target->values[1] == -1);
    if (!flattening) refuse(node, "only a reshape to [batch, features] is supported yet");
    apply(node, flattenOp(), {x}, "view");
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

  const Constant& input(const onnx::NodeProto& node, int index) const { return operand(node, index).host; }
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
};

}  // namespace

OnnxModel readOnnx(const std::string& path, std::uint32_t batch) { return Importer(path, batch).run(); }

bool isOnnxPath(const std::string& path) {
  return path.size() >= 5 && path.compare(path.size() - 5, 5, ".onnx") == 0;
}

}  // namespace glnet
