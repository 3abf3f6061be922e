// The importer's logic ops (OnnxImporter.h): comparisons, And, Or, Xor, Not, IsNaN, IsInf, Mod and Where, on the GPU
// where an input is computed (masks of BERT and GPT-2 exports) and folded where all are constants (Swin's shape
// arithmetic takes a Mod of constants).
#include "importer/OnnxImporter.h"

#include "ref/Reference.h"

namespace glnet::onnximport {

BinaryKind Importer::binaryKindOf(const onnx::NodeProto& node, const Attributes& a) {
  static const std::map<std::string, BinaryKind> kinds{
      {"Add", BinaryKind::add},         {"Sub", BinaryKind::subtract},          {"Mul", BinaryKind::multiply},
      {"Div", BinaryKind::divide},      {"Pow", BinaryKind::power},             {"Max", BinaryKind::maximum},
      {"Min", BinaryKind::minimum},     {"PRelu", BinaryKind::prelu},           {"Equal", BinaryKind::equal},
      {"Less", BinaryKind::less},       {"LessOrEqual", BinaryKind::lessOrEqual}, {"Greater", BinaryKind::greater},
      {"GreaterOrEqual", BinaryKind::greaterOrEqual}, {"And", BinaryKind::logicalAnd}, {"Or", BinaryKind::logicalOr},
      {"Xor", BinaryKind::logicalXor}};
  if (node.op_type() == "Mod") return integer(a, "fmod", 0) != 0 ? BinaryKind::fmod : BinaryKind::mod;
  return kinds.at(node.op_type());
}

void Importer::importWhere(const onnx::NodeProto& node, const Attributes&) {
  if (node.input_size() != 3) refuse(node, "Where takes a condition and two tensors");
  const Tensor condition = tensorOrConstant(node, 0), x = tensorOrConstant(node, 1), y = tensorOrConstant(node, 2);
  apply(node, whereOp(), {condition, x, y}, "where");
}

std::optional<Constant> Importer::foldLogic(const onnx::NodeProto& node, const Attributes& a) const {
  const std::string& op = node.op_type();
  if (op == "Not" || op == "IsNaN" || op == "IsInf") {
    const Pointwise function = *pointwiseOf(node);
    Constant result = input(node, 0);
    for (double& v : result.values) v = function(v);
    result.integer = true;  // booleans
    return result;
  }
  static const std::set<std::string> binary{"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or", "Xor", "Mod"};
  if (!binary.count(op)) return std::nullopt;
  if (node.input_size() != 2) refuse(node, "it takes two inputs");
  const Constant& x = input(node, 0);
  const Constant& y = input(node, 1);
  const BinaryKind kind = binaryKindOf(node, a);
  const bool integral = x.integer && y.integer;
  if (op == "Mod") {
    // ONNX: a remainder of floats takes fmod = 1 (C's fmod); of integers either.
    if (!integral && kind == BinaryKind::mod) refuse(node, "fmod = 0 (the divisor's sign) is for integers; a Mod of floats takes fmod = 1");
    if (integral && std::find(y.values.begin(), y.values.end(), 0.0) != y.values.end()) refuse(node, "integer division by zero");
  }
  Constant result = broadcast(node, {&x, &y}, [kind](const std::vector<double>& v) { return ref::combine(kind, v[0], v[1]); });
  result.integer = op != "Mod" || integral;  // comparisons and logic make booleans
  return result;
}

}  // namespace glnet::onnximport
