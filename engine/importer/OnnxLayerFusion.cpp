// The lookaheads of transformer layers (OnnxImporter.h): a dense layer's bias Add, GELU as exporters write it out; a
// constant scale per channel folded into the layer before it.
#include "importer/OnnxImporter.h"

#include <algorithm>
#include <cmath>

namespace glnet::onnximport {

namespace {

// Exporters write GELU's constants as float32 (1.4142135 for √2): a match within float32's rounding.
bool near(const std::optional<double>& c, double v) { return c && std::abs(*c - v) <= 1e-6 * std::abs(v); }

}  // namespace

std::optional<std::pair<const onnx::NodeProto*, const Constant*>> Importer::fusableBias(const onnx::NodeProto& product, std::int64_t outputs,
                                                                                       std::size_t rank) {
  const onnx::NodeProto* add = soleReader(product.output(0));
  if (!add || add->op_type() != "Add" || add->input_size() != 2 || add->output_size() != 1) return std::nullopt;
  const auto found = values_.find(add->input(add->input(0) == product.output(0) ? 1 : 0));
  if (found == values_.end() || !found->second.constant) return std::nullopt;
  const Constant& c = found->second.host;
  // A row [outputs], [1, outputs], ... of no higher rank than the product's (which it would otherwise widen), finite
  // (an infinite constant stays a broadcast add rather than a weight, which refuses it).
  if (c.elements() != static_cast<std::size_t>(outputs) || c.shape.empty() || c.shape.back() != outputs || c.shape.size() > rank ||
      !std::all_of(c.values.begin(), c.values.end(), [](double v) { return std::isfinite(v); })) {
    return std::nullopt;
  }
  fused_.insert(add);
  aliases_[add] = product.output(0);
  return std::make_pair(add, &c);
}

const onnx::NodeProto* Importer::soleSingleReader(const onnx::NodeProto& node) const {
  if (node.output_size() != 1) return nullptr;
  const onnx::NodeProto* next = soleReader(node.output(0));
  return next && next->output_size() == 1 ? next : nullptr;
}

std::optional<double> Importer::scalarAhead(const std::string& name) const {
  if (values_.count(name)) return scalarConstant(name);
  const auto producer = producers_.find(name);
  if (producer == producers_.end() || producer->second->op_type() != "Constant" || producer->second->attribute_size() != 1 ||
      producer->second->attribute(0).name() != "value") {
    return std::nullopt;
  }
  const Constant c = readTensor(producer->second->attribute(0).t());
  return c.elements() == 1 ? std::optional<double>(c.values[0]) : std::nullopt;
}

bool Importer::scales(const onnx::NodeProto* node, const std::string& x, double factor) const {
  if (!node || (node->op_type() != "Mul" && node->op_type() != "Div") || node->input_size() != 2 || node->output_size() != 1) return false;
  if (node->op_type() == "Div") return node->input(0) == x && near(scalarAhead(node->input(1)), 1 / factor);
  return (node->input(0) == x && near(scalarAhead(node->input(1)), factor)) || (node->input(1) == x && near(scalarAhead(node->input(0)), factor));
}

bool Importer::addsOne(const onnx::NodeProto* node, const std::string& x) const {
  return node && node->op_type() == "Add" && node->input_size() == 2 && node->output_size() == 1 &&
         ((node->input(0) == x && near(scalarAhead(node->input(1)), 1)) || (node->input(1) == x && near(scalarAhead(node->input(0)), 1)));
}

std::optional<Importer::GeluMatch> Importer::geluOf(const std::string& x) const {
  const auto found = readers_.find(x);
  // x is computed, or about to be (the lookahead of the kernel that makes it).
  const auto value = values_.find(x);
  if (found == readers_.end() || (value != values_.end() && value->second.constant)) return std::nullopt;
  const std::vector<const onnx::NodeProto*>& readers = found->second;
  if (consumers_.at(x) != static_cast<int>(readers.size()) || (readers.size() != 2 && readers.size() != 3)) return std::nullopt;
  const auto unary = [](const onnx::NodeProto* node, const char* op, const std::string& in) {
    return node && node->op_type() == op && node->input_size() == 1 && node->input(0) == in && node->output_size() == 1 && node->attribute().empty();
  };
  GeluMatch match;
  // The factor 1 + erf(x/√2), or 1 + tanh(√(2/π)·(x + 0.044715·x³)), as `one`; match.nodes the readers of x among them.
  const onnx::NodeProto* one = nullptr;
  for (const onnx::NodeProto* reader : readers) {
    if (readers.size() == 2 && scales(reader, x, 1 / std::sqrt(2.0))) {
      const onnx::NodeProto* erf = soleSingleReader(*reader);
      if (!unary(erf, "Erf", reader->output(0))) continue;
      one = soleSingleReader(*erf);
      if (!addsOne(one, erf->output(0))) return std::nullopt;
      match = {PointwiseKind::gelu, {reader, erf, one}};
      break;
    }
    if (readers.size() == 3 && reader->op_type() == "Pow" && reader->input_size() == 2 && reader->input(0) == x && reader->output_size() == 1 &&
        near(scalarAhead(reader->input(1)), 3)) {
      const onnx::NodeProto* cubic = soleSingleReader(*reader);
      if (!scales(cubic, reader->output(0), 0.044715)) return std::nullopt;
      const onnx::NodeProto* inner = soleSingleReader(*cubic);
      if (!inner || inner->op_type() != "Add" || inner->input_size() != 2 ||
          !((inner->input(0) == x && inner->input(1) == cubic->output(0)) || (inner->input(1) == x && inner->input(0) == cubic->output(0)))) {
        return std::nullopt;
      }
      const onnx::NodeProto* scaled = soleSingleReader(*inner);
      if (!scales(scaled, inner->output(0), std::sqrt(2 / M_PI))) return std::nullopt;
      const onnx::NodeProto* tanh = soleSingleReader(*scaled);
      if (!unary(tanh, "Tanh", scaled->output(0))) return std::nullopt;
      one = soleSingleReader(*tanh);
      if (!addsOne(one, tanh->output(0))) return std::nullopt;
      match = {PointwiseKind::geluTanh, {reader, cubic, inner, scaled, tanh, one}};
      break;
    }
  }
  if (!one) return std::nullopt;
  // The one reader of x left is the product's: x·(1 + f)·0.5, x·((1 + f)·0.5) or (x·0.5)·(1 + f).
  const onnx::NodeProto* product = nullptr;
  for (const onnx::NodeProto* reader : readers) {
    if (std::find(match.nodes.begin(), match.nodes.end(), reader) != match.nodes.end()) continue;
    if (product) return std::nullopt;
    product = reader;
  }
  const onnx::NodeProto* afterOne = soleSingleReader(*one);
  if (!product || !afterOne) return std::nullopt;
  std::vector<const onnx::NodeProto*> rest;
  if (afterOne == product && multiplies(*product, x, one->output(0)) && scales(soleSingleReader(*product), product->output(0), 0.5)) {
    rest = {product, soleSingleReader(*product)};
  } else if (scales(afterOne, one->output(0), 0.5) && soleSingleReader(*afterOne) == product && multiplies(*product, x, afterOne->output(0))) {
    rest = {afterOne, product};
  } else if (scales(product, x, 0.5) && soleSingleReader(*product) == afterOne && multiplies(*afterOne, product->output(0), one->output(0))) {
    rest = {product, afterOne};
  } else {
    return std::nullopt;
  }
  match.nodes.insert(match.nodes.end(), rest.begin(), rest.end());
  match.result = rest.back();
  return match;
}

void Importer::fuseGelu(const GeluMatch& match, const std::string& value) {
  for (const onnx::NodeProto* node : match.nodes) {
    fused_.insert(node);
    aliases_[node] = value;
  }
}

bool Importer::importsGelu(const onnx::NodeProto& node) {
  const std::string& op = node.op_type();
  if ((op != "Div" && op != "Mul" && op != "Pow") || node.input_size() != 2) return false;
  for (const std::string& x : node.input()) {
    const std::optional<GeluMatch> match = geluOf(x);
    if (!match || std::find(match->nodes.begin(), match->nodes.end(), &node) == match->nodes.end()) continue;
    // This node, the first of the chain in the file, computes GELU; the others, the last one included, take its value.
    const Pointwise function{match->kind};
    apply(node, pointwiseOp(function), {value(x, "node '" + node.name() + "'").tensor},
          function.name() + " (fused: " + std::to_string(match->nodes.size()) + " nodes)");
    GeluMatch others = *match;
    others.nodes.erase(std::find(others.nodes.begin(), others.nodes.end(), &node));
    fuseGelu(others, node.output(0));
    return true;
  }
  return false;
}

bool Importer::sumsIntoNormalization(const onnx::NodeProto& add) {
  if (add.op_type() != "Add" || add.input_size() != 2 || add.output_size() != 1) return false;
  const onnx::NodeProto* norm = soleReader(add.output(0));
  if (!norm || norm->op_type() != "LayerNormalization" || norm->input_size() < 1 || norm->input(0) != add.output(0)) return false;
  // Its Mean and InvStdDev outputs (training's) would be of the one operand the sum's name stands for.
  if (std::any_of(norm->output().begin() + 1, norm->output().end(), [](const std::string& o) { return !o.empty(); })) return false;
  const Value& a = operand(add, 0);
  const Value& b = operand(add, 1);
  if (a.constant || b.constant || shapeOf(a.tensor) != shapeOf(b.tensor)) return false;
  residualSums_[add.output(0)] = {a.tensor, b.tensor};
  values_[add.output(0)] = a;  // its shape for the normalization; the sum itself is residualSums_'
  result_.nodes.push_back({add.name(), add.op_type(), "fused into the layer normalization reading it", shapeOf(a.tensor)});
  return true;
}

void Importer::foldIntoLayer(const Layer& layer, const std::vector<double>& factor, const std::vector<double>& shift) {
  std::vector<float> weight = graph_.tensor(layer.weight).initial, bias = graph_.tensor(layer.bias).initial;
  const std::size_t channels = bias.size(), perChannel = weight.size() / channels;
  for (std::size_t c = 0; c < channels; ++c) {
    for (std::size_t i = 0; i < perChannel; ++i) weight[c * perChannel + i] = static_cast<float>(weight[c * perChannel + i] * factor[c]);
    bias[c] = static_cast<float>(bias[c] * factor[c] + shift[c]);
  }
  graph_.setInitial(layer.weight, std::move(weight));
  graph_.setInitial(layer.bias, std::move(bias));
}

bool Importer::scalesLayer(const onnx::NodeProto& node) {
  for (const int side : {0, 1}) {
    const Value& scale = operand(node, side);
    const Value& x = operand(node, 1 - side);
    if (!scale.constant || x.constant || consumers_[node.input(1 - side)] != 1) continue;
    const auto layer = layers_.find(x.tensor.id);
    if (layer == layers_.end() || layer->second.functionPastBatchNorm) continue;
    const Shape shape = shapeOf(x.tensor);
    const Constant& c = scale.host;
    const std::size_t channels = graph_.tensor(layer->second.bias).initial.size(), axis = layer->second.channelAxis;
    // Broadcast against X, the constant must vary along the channel axis alone (NumPy's rule: aligned at the last axis).
    if (c.shape.size() > shape.size() || c.elements() != channels || axis >= shape.size() || shape[axis] != channels) continue;
    bool perChannel = true;
    for (std::size_t k = 0; k < c.shape.size(); ++k) {
      const std::size_t at = shape.size() - c.shape.size() + k;
      perChannel = perChannel && c.shape[k] == (at == axis ? static_cast<std::int64_t>(channels) : 1);
    }
    // An infinite scale stays a Mul: folded, inf·0 in the weights would turn a product of inf into NaN.
    if (!perChannel || !std::all_of(c.values.begin(), c.values.end(), [](double v) { return std::isfinite(v); })) continue;
    foldIntoLayer(layer->second, c.values, std::vector<double>(channels, 0.0));
    values_[node.output(0)] = x;
    result_.nodes.push_back({node.name(), node.op_type(), "folded", shape});
    return true;
  }
  return false;
}

}  // namespace glnet::onnximport
