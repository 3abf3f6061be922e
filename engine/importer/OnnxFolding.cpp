// The importer's constant folding: shape arithmetic and other work on constants, done at load (OnnxImporter.h).
#include "importer/OnnxImporter.h"

#include <algorithm>
#include <cmath>

namespace glnet::onnximport {

bool Importer::foldable(const onnx::NodeProto& node, const OnnxOp& op) const {
  if (op.folding != OnnxFolding::constantInputs) return op.folding == OnnxFolding::always;
  for (const std::string& name : node.input()) {
    if (!name.empty() && !value(name, "node '" + node.name() + "'").constant) return false;
  }
  return true;
}

const Constant& Importer::input(const onnx::NodeProto& node, int index) const {
  const Value& v = operand(node, index);
  if (!v.constant) refuse(node, "input " + std::to_string(index) + " must be a constant (shapes, axes and indices are folded at load)");
  return v.host;
}

std::int64_t Importer::whole(const onnx::NodeProto& node, double v) const {
  if (!std::isfinite(v) || std::abs(v) > 9.0e15 || v != std::trunc(v)) refuse(node, "a value used as an integer is not one");
  return static_cast<std::int64_t>(v);
}

std::vector<std::int64_t> Importer::foldedShape(const onnx::NodeProto& node, const std::vector<double>& values) const {
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

std::size_t Importer::boundedProduct(const onnx::NodeProto& node, std::vector<std::int64_t>::const_iterator begin,
                                     std::vector<std::int64_t>::const_iterator end) const {
  std::size_t product = 1;
  for (auto it = begin; it != end; ++it) {
    product *= static_cast<std::size_t>(*it);
    if (product > largestFolded) refuse(node, "a constant with more than " + std::to_string(largestFolded) + " rows");
  }
  return product;
}

double Importer::scalar(const onnx::NodeProto& node, int index) const {
  const Constant& c = input(node, index);
  if (c.values.empty()) refuse(node, "input " + std::to_string(index) + " is empty where a value is needed");
  return c.values[0];
}

std::vector<std::int64_t> Importer::axes(const onnx::NodeProto& node, const std::map<std::string, const onnx::AttributeProto*>& a,
                                         int inputIndex, std::int64_t rank) const {
  std::vector<std::int64_t> list = integers(a, "axes");
  if (node.input_size() > inputIndex && !node.input(inputIndex).empty()) {
    const Constant& given = input(node, inputIndex);
    list.clear();
    for (const double v : given.values) list.push_back(whole(node, v));
  }
  std::set<std::int64_t> seen;
  for (std::int64_t& axis : list) {
    if (axis < -rank || axis >= rank) refuse(node, "axis " + std::to_string(axis) + " is outside rank " + std::to_string(rank));
    if (axis < 0) axis += rank;
    // ONNX allows each axis once; a repeat would be dropped or applied twice depending on the op.
    if (!seen.insert(axis).second) refuse(node, "axis " + std::to_string(axis) + " is listed twice");
  }
  return list;
}

std::vector<std::size_t> Importer::strides(const std::vector<std::int64_t>& shape) {
  std::vector<std::size_t> result(shape.size(), 1);
  for (std::size_t i = shape.size(); i-- > 1;) result[i - 1] = result[i] * static_cast<std::size_t>(shape[i]);
  return result;
}

Constant Importer::broadcast(const onnx::NodeProto& node, const std::vector<const Constant*>& operands,
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

Constant Importer::fold(const onnx::NodeProto& node, const Attributes& a) {
  const std::string& op = node.op_type();
  if (std::optional<Constant> folded = foldIndexing(node, a)) return *std::move(folded);
  if (op == "Shape") {
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
  if (std::optional<Constant> logic = foldLogic(node, a)) return std::move(*logic);
  // Functions and products of constants (the scale sqrt(head size) of torchvision's attention, Swin V2's relative
  // position MLP) by the float64 references their GPU ops are tested against.
  if (findOnnxOp(op) && findOnnxOp(op)->import == &Importer::importPointwise) {
    const std::optional<Pointwise> function = pointwiseOf(node);
    // ONNX's functions keep their input's type (Neg, Abs, Relu, Sign of a shape's integers stay integers).
    if (function) return foldWithReference(node, pointwiseOp(*function), {&input(node, 0)}, input(node, 0).integer);
    // Pow of a base and an exponent that are not one number: broadcast.
    return broadcast(node, {&input(node, 0), &input(node, 1)}, [](const std::vector<double>& v) { return std::pow(v[0], v[1]); });
  }
  if (op == "MatMul") {
    const Constant& x = input(node, 0);
    const Constant& y = input(node, 1);
    // Its float64 reference costs a multiply-add per element of A and column of B: bounded like a folded constant's size.
    if (!y.shape.empty() && static_cast<double>(x.elements()) * static_cast<double>(y.shape.back()) > static_cast<double>(largestFolded) * 64) {
      refuse(node, "a product of constants too large to fold at load");
    }
    return foldWithReference(node, batchedMatMulOp(), {&x, &y}, x.integer && y.integer);
  }
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") {
    const Constant& x = input(node, 0);
    const Constant& y = input(node, 1);
    const bool integral = x.integer && y.integer;
    Constant result = broadcast(node, {&x, &y}, [&](const std::vector<double>& v) {
      if (op == "Add") return v[0] + v[1];
      if (op == "Sub") return v[0] - v[1];
      if (op == "Mul") return v[0] * v[1];
      if (integral && v[1] == 0) refuse(node, "integer division by zero");
      return integral ? std::trunc(v[0] / v[1]) : v[0] / v[1];
    });
    result.integer = integral;
    return result;
  }
  if (op == "Where") {
    Constant result = broadcast(node, {&input(node, 0), &input(node, 1), &input(node, 2)},
                                [](const std::vector<double>& v) { return v[0] != 0 ? v[1] : v[2]; });
    result.integer = input(node, 1).integer && input(node, 2).integer;
    return result;
  }
  if (op == "Cast") {
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
  if (op == "ConstantOfShape") {
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
    const double start = scalar(node, 0), limit = scalar(node, 1), delta = scalar(node, 2);
    if (delta == 0) refuse(node, "delta is 0");
    const double count = std::max(std::ceil((limit - start) / delta), 0.0);
    if (!(count <= static_cast<double>(largestFolded))) refuse(node, "a range of more than " + std::to_string(largestFolded) + " elements");
    Constant result{{static_cast<std::int64_t>(count)}, {}, input(node, 0).integer};
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(count); ++i) result.values.push_back(start + static_cast<double>(i) * delta);
    return result;
  }
  if (op == "Expand") {
    Constant target;
    target.shape = foldedShape(node, input(node, 1).values);
    target.values.assign(target.elements(), 0.0);
    Constant result = broadcast(node, {&input(node, 0), &target}, [](const std::vector<double>& v) { return v[0]; });
    result.integer = input(node, 0).integer;
    return result;
  }
  // Reshape of a constant.
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

}  // namespace glnet::onnximport
