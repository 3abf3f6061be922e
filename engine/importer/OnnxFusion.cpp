// The importer's lookaheads: which nodes run inside the kernel of the node before them (OnnxImporter.h).
#include "importer/OnnxImporter.h"

#include <algorithm>
#include <cmath>

namespace glnet::onnximport {

const onnx::NodeProto* Importer::soleReader(const std::string& name) const {
  const auto found = readers_.find(name);
  if (found == readers_.end() || found->second.size() != 1 || consumers_.at(name) != 1) return nullptr;
  return found->second[0];
}

const std::map<std::string, PointwiseKind>& Importer::plainPointwise() {
  // The kinds with an ONNX op type of their own and no attributes (numbers/PointwiseKinds.h's ONNX column).
  static const std::map<std::string, PointwiseKind> plain = [] {
    std::map<std::string, PointwiseKind> kinds;
#define GLNET_PLAIN_ONNX(cpp, glsl, name, onnx, ...) \
  if (*onnx) kinds.emplace(onnx, PointwiseKind::cpp);
    GLNET_POINTWISE_KINDS(GLNET_PLAIN_ONNX)
#undef GLNET_PLAIN_ONNX
    return kinds;
  }();
  return plain;
}

std::optional<Pointwise> Importer::pointwiseOf(const onnx::NodeProto& node) const {
  const std::string& op = node.op_type();
  const std::map<std::string, PointwiseKind>& plain = plainPointwise();
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
  if (op == "Not" || op == "IsNaN") {
    attributes(node, {});
    return Pointwise{op == "Not" ? PointwiseKind::logicalNot : PointwiseKind::isNan};
  }
  if (op == "IsInf") {
    const auto a = attributes(node, {"detect_negative", "detect_positive"});
    return Pointwise{PointwiseKind::isInf, integer(a, "detect_negative", 1) != 0 ? 1.0f : 0.0f, integer(a, "detect_positive", 1) != 0 ? 1.0f : 0.0f};
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

Pointwise Importer::fusedPointwise(const onnx::NodeProto& producer, const std::function<bool(const Pointwise&)>& accepts, bool absorbsBatchNorm) {
  std::string value = producer.output(0);
  const onnx::NodeProto* next = soleReader(value);
  if (absorbsBatchNorm && next && next->op_type() == "BatchNormalization" && next->output_size() >= 1) {
    value = next->output(0);
    next = soleReader(value);
  }
  // A function commutes with a view: it runs before a Reshape (GPT-2's Gemm, then its [B, S, O] view, then GELU).
  if (next && next->op_type() == "Reshape" && next->output_size() == 1 && next->input(0) == value) {
    const onnx::NodeProto* after = soleReader(next->output(0));
    if ((after && pointwiseOf(*after)) || (!after && geluOf(next->output(0)))) {
      value = next->output(0);
      next = after;
    }
  }
  if (!next) {
    if (const std::optional<GeluMatch> gelu = geluOf(value)) {
      if (!accepts(Pointwise{gelu->kind})) return {};
      fuseGelu(*gelu, value);
      return Pointwise{gelu->kind};
    }
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

std::optional<std::pair<const onnx::NodeProto*, Tensor>> Importer::fusableResidual(const onnx::NodeProto& producer, const Shape& shape) {
  const onnx::NodeProto* add = soleReader(producer.output(0));
  if (!add || add->op_type() != "Add" || add->input_size() != 2 || add->output_size() != 1 || add->input(0) == add->input(1)) return std::nullopt;
  const std::string& other = add->input(add->input(0) == producer.output(0) ? 1 : 0);
  const auto found = values_.find(other);
  if (found == values_.end() || found->second.constant || shapeOf(found->second.tensor) != shape) return std::nullopt;
  fused_.insert(add);
  aliases_[add] = producer.output(0);
  return std::make_pair(add, found->second.tensor);
}

bool Importer::multiplies(const onnx::NodeProto& node, const std::string& a, const std::string& b) {
  return node.op_type() == "Mul" && node.input_size() == 2 && node.output_size() == 1 &&
         ((node.input(0) == a && node.input(1) == b) || (node.input(0) == b && node.input(1) == a));
}

std::pair<const onnx::NodeProto*, const onnx::NodeProto*> Importer::siluOf(const std::string& value) const {
  const auto found = readers_.find(value);
  if (found == readers_.end() || found->second.size() != 2 || consumers_.at(value) != 2) return {};
  for (const onnx::NodeProto* sigmoid : found->second) {
    if (sigmoid->op_type() != "Sigmoid" || sigmoid->input_size() != 1 || sigmoid->output_size() != 1 || !sigmoid->attribute().empty()) continue;
    const onnx::NodeProto* product = soleReader(sigmoid->output(0));
    if (product && multiplies(*product, value, sigmoid->output(0))) return {sigmoid, product};
  }
  return {};
}

bool Importer::allInts(const onnx::AttributeProto& a, std::int64_t v) {
  return std::all_of(a.ints().begin(), a.ints().end(), [&](std::int64_t i) { return i == v; });
}

const onnx::NodeProto* Importer::fusablePool(const onnx::NodeProto& producer) {
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

std::optional<Activation> Importer::asActivation(const Pointwise& f) {
  if (f.kind == PointwiseKind::identity) return Activation::none;
  if (f.kind == PointwiseKind::relu) return Activation::relu;
  if (f.kind == PointwiseKind::sigmoid) return Activation::sigmoid;
  if (f.kind == PointwiseKind::tanh) return Activation::tanh;
  return std::nullopt;
}

bool Importer::scalesConvolutionInput(const onnx::NodeProto& node, int side) const {
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

std::int64_t Importer::sameKernel(const onnx::NodeProto& conv) const {
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

std::optional<Importer::Expansion> Importer::expandsTogether(const onnx::NodeProto& node) const {
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

bool Importer::channelScale(const onnx::NodeProto& node, int side) {
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

}  // namespace glnet::onnximport
