// Scaled dot-product attention as PyTorch exports it, recognised and run as one fused kernel (attentionOp): see
// importAttention in OnnxImporter.h.
#include "importer/OnnxImporter.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace glnet::onnximport {

namespace {

// A node of the default domain, whose input and output counts the file's check has verified.
bool ofDefaultDomain(const onnx::NodeProto* node) { return node && (node->domain().empty() || node->domain() == "ai.onnx"); }

bool isRowSoftmax(const onnx::NodeProto& node, std::int64_t opset) {
  if (node.op_type() != "Softmax") return false;
  std::int64_t axis = opset >= 13 ? -1 : 1;
  for (const onnx::AttributeProto& attribute : node.attribute()) {
    if (attribute.name() == "axis") axis = attribute.i();
  }
  // Before opset 13 Softmax coerces to 2-D from `axis` on: over the last axis of a rank-4 tensor only for axis 3.
  return axis == -1 || axis == 3;
}

}  // namespace

std::optional<double> Importer::scalarConstant(const std::string& name) const {
  const auto found = values_.find(name);
  if (found == values_.end() || !found->second.constant || found->second.host.elements() != 1) return std::nullopt;
  return found->second.host.values[0];
}

std::optional<std::pair<std::string, double>> Importer::scaledBy(const onnx::NodeProto& node) const {
  if ((node.op_type() != "Mul" && node.op_type() != "Div") || node.input_size() != 2 || !ofDefaultDomain(&node)) return std::nullopt;
  for (const int side : {0, 1}) {
    if (node.op_type() == "Div" && side == 0) continue;  // c / x is no scaling
    const std::optional<double> c = scalarConstant(node.input(side));
    if (!c || !std::isfinite(*c) || *c == 0) continue;
    return std::pair{node.input(1 - side), node.op_type() == "Mul" ? *c : 1 / *c};
  }
  return std::nullopt;
}

std::string Importer::importAttention(const onnx::NodeProto& product) {
  // Only nodes of the default domain join the chain: their input and output counts are checked (a node of another
  // domain is refused later, when it is imported).
  const auto soleReader = [this](const std::string& name) -> const onnx::NodeProto* {
    const onnx::NodeProto* reader = Importer::soleReader(name);
    return ofDefaultDomain(reader) ? reader : nullptr;
  };
  // Forward from Q·Kᵀ: an optional scale, an optional additive mask, Softmax over the keys, SDPA's Where(IsNaN(p), 0,
  // p), then P·V. Each step's result read by the next alone, so that nothing else needs the scores.
  std::vector<const onnx::NodeProto*> chain;
  double scale = 1;
  std::string current = product.output(0);
  const onnx::NodeProto* next = soleReader(current);
  if (next && scaledBy(*next) && scaledBy(*next)->first == current) {
    scale *= scaledBy(*next)->second;
    chain.push_back(next);
    current = next->output(0);
    next = soleReader(current);
  }
  std::string mask;
  bool zeroesEmptyRows = false;
  if (next && next->op_type() == "Add" && next->input_size() == 2) {
    mask = next->input(next->input(0) == current ? 1 : 0);
    if (mask == current) return "the scores are added to themselves";
    if (mask.empty()) return "the mask's name is empty";
    chain.push_back(next);
    current = next->output(0);
    next = soleReader(current);
  }
  if (!next || !isRowSoftmax(*next, result_.opset)) return "no Softmax over the keys reads the scores alone";
  const onnx::NodeProto& softmax = *next;
  chain.push_back(next);
  current = softmax.output(0);
  const auto readers = readers_.find(current);
  if (readers == readers_.end()) return "nothing reads the softmax";
  if (readers->second.size() == 2 && consumers_.at(current) == 2) {
    // SDPA's export: Where(IsNaN(p), 0, p) zeroes the rows that saw no key (fused attention writes 0 there).
    const onnx::NodeProto* isNan = readers->second[0]->op_type() == "IsNaN" ? readers->second[0] : readers->second[1];
    const onnx::NodeProto* where = isNan == readers->second[0] ? readers->second[1] : readers->second[0];
    if (!ofDefaultDomain(isNan) || !ofDefaultDomain(where)) return "the softmax has readers of another domain";
    const std::optional<double> zero = where->input_size() == 3 ? scalarConstant(where->input(1)) : std::nullopt;
    if (isNan->op_type() != "IsNaN" || where->op_type() != "Where" || soleReader(isNan->output(0)) != where ||
        where->input(0) != isNan->output(0) || where->input(2) != current || !zero || *zero != 0) {
      return "the softmax has readers other than the product with V";
    }
    chain.push_back(isNan);
    chain.push_back(where);
    current = where->output(0);
    zeroesEmptyRows = true;
  } else if (consumers_.at(current) != 1) {
    return "the softmax has readers other than the product with V";
  }
  next = soleReader(current);
  // The eager GPT-2 export casts the probabilities to the value's type: to float, the identity.
  while (next && next->op_type() == "Cast" && next->attribute_size() >= 1 && next->attribute(0).name() == "to" &&
      next->attribute(0).i() == onnx::TensorProto::FLOAT) {
    chain.push_back(next);
    current = next->output(0);
    next = soleReader(current);
  }
  if (!next || next->op_type() != "MatMul" || next->input(0) != current || next->input(1) == current) return "no MatMul with V reads the softmax";
  const onnx::NodeProto& valueProduct = *next;
  chain.push_back(next);
  AttentionMatch match{&product, &valueProduct, chain, {}, mask, scale, zeroesEmptyRows};
  // A Transpose back to [B, S, H, D] after the product, as the heads' merge begins: written in that order at once.
  const onnx::NodeProto* after = soleReader(valueProduct.output(0));
  if (after && after->op_type() == "Transpose") {
    for (const onnx::AttributeProto& attribute : after->attribute()) {
      if (attribute.name() == "perm" && attribute.ints_size() == 4 && attribute.ints(0) == 0 && attribute.ints(1) == 2 && attribute.ints(2) == 1 &&
          attribute.ints(3) == 3) {
        match.merged.push_back(after);
      }
    }
  }
  const Value& queryValue = operand(product, 0);
  const Value& keyValue = operand(product, 1);
  if (queryValue.constant || keyValue.constant) return "Q or K is a constant";
  if (shapeOf(queryValue.tensor).size() != 4 || shapeOf(keyValue.tensor).size() != 4) return "Q and Kᵀ are not rank 4 [batch, heads, sequence, features]";
  for (const std::string& name : {valueProduct.input(1), mask}) {
    if (!name.empty() && values_.count(name) && values_.at(name).constant && name == valueProduct.input(1)) return "V is a constant";
  }
  // The nodes after Q·Kᵀ run inside the fused op; V and the mask may come later in the file (SDPA's export computes the
  // mask just before it adds it), so the op is made where the product with V is, at the latest. Made now, a shape the
  // op does not take leaves the ops to run one by one; made later, it refuses the model.
  const bool ready = values_.count(valueProduct.input(1)) && (mask.empty() || values_.count(mask));
  if (ready) {
    const std::string why = buildAttention(match);
    if (!why.empty()) return why;
  }
  for (const onnx::NodeProto* node : chain) insideAttention_.insert(node);
  for (const onnx::NodeProto* node : match.merged) {
    fused_.insert(node);
    aliases_[node] = valueProduct.output(0);
  }
  if (ready) return "";
  insideAttention_.insert(&product);
  insideAttention_.erase(&valueProduct);
  pendingAttention_[&valueProduct] = match;
  return "";
}

std::optional<Importer::JoinedProjections> Importer::joinedProjections(const std::array<std::vector<std::string>, 3>& operands,
                                                                         AttentionSettings& settings) {
  // Whether one node alone reads the data of `name` (Shape nodes read only its shape, which is known at load).
  const auto readOnce = [this](const std::string& name) {
    const auto found = readers_.find(name);
    if (found == readers_.end()) return false;
    const auto shapeReaders = std::count_if(found->second.begin(), found->second.end(), [](const onnx::NodeProto* n) { return n->op_type() == "Shape"; });
    return found->second.size() - static_cast<std::size_t>(shapeReaders) == 1 && consumers_.at(name) - shapeReaders == 1;
  };
  // Each operand back from what the op reads in its layout, through Reshapes (views of the same memory), to a
  // projection's output or a part of a split along the last axis; every name on the way read by the next node alone.
  std::array<const Projection*, 3> projections{};
  std::array<const SplitPart*, 3> parts{};
  std::array<Shape, 3> stored;
  for (std::size_t i = 0; i < 3; ++i) {
    std::vector<std::string> path = operands[i];
    stored[i] = shapeOf(values_.at(path.back()).tensor);
    while (!projections[i] && !parts[i]) {
      const std::string& at = path.back();
      const auto v = values_.find(at);
      if (v == values_.end() || v->second.constant || !readOnce(at)) return std::nullopt;
      if (const auto projection = projections_.find(v->second.tensor.id); projection != projections_.end()) {
        projections[i] = &projection->second;
      } else if (const auto part = splitParts_.find(v->second.tensor.id); part != splitParts_.end()) {
        parts[i] = &part->second;
      } else {
        const auto producer = producers_.find(at);
        if (producer == producers_.end() || producer->second->op_type() != "Reshape") return std::nullopt;
        path.push_back(producer->second->input(0));
      }
    }
    for (const std::string& name : operands[i]) {
      if (!readOnce(name)) return std::nullopt;
    }
  }
  // Where each operand's columns lie in the rows of the tensor the op reads: a split's parts in their source (GPT-2's
  // c_attn), or three projections of one input joined into one dense layer (BERT's query, key and value).
  std::array<std::uint32_t, 3> offsets{}, widths{};
  std::uint32_t width = 0;
  JoinedProjections joined;
  if (parts[0] && parts[1] && parts[2]) {
    if (parts[0]->source.id != parts[1]->source.id || parts[1]->source.id != parts[2]->source.id) return std::nullopt;
    for (std::size_t i = 0; i < 3; ++i) {
      offsets[i] = parts[i]->offset;
      widths[i] = parts[i]->width;
    }
    width = shapeOf(parts[0]->source).back();
    joined.output = parts[0]->source;
    joined.how = "Q, K and V read in place from their split";
  } else if (projections[0] && projections[1] && projections[2]) {
    const Projection &q = *projections[0], &k = *projections[1], &v = *projections[2];
    if (&q == &k || &k == &v || &q == &v || q.input.id != k.input.id || k.input.id != v.input.id) return std::nullopt;
    widths = {q.outputs, k.outputs, v.outputs};
    offsets = {0, q.outputs, q.outputs + k.outputs};
    width = q.outputs + k.outputs + v.outputs;
    const std::uint64_t rows = elementCount(shapeOf(q.rows)) / shapeOf(q.rows).back();
    if (rows * width > std::numeric_limits<std::uint32_t>::max()) return std::nullopt;
  } else {
    return std::nullopt;
  }
  const std::array<AttentionSettings::Layout, 3> layouts{settings.query, settings.key, settings.value};
  std::array<AttentionSettings::View, 3> views;
  for (std::size_t i = 0; i < 3; ++i) {
    // The stored tensor is [rows, widths[i]] in another shape: its axes from `split` on span one row.
    const Shape& shape = stored[i];
    std::vector<std::uint64_t> strides(shape.size());
    std::uint64_t span = 1;
    std::optional<std::size_t> split;
    for (std::size_t a = shape.size(); a-- > 0;) {
      strides[a] = span;
      span *= shape[a];
      if (span == widths[i]) split = a;
    }
    if (!split) return std::nullopt;
    for (std::size_t a = 0; a < *split; ++a) strides[a] = strides[a] / widths[i] * width;
    for (std::size_t j = 0; j < 4; ++j) {
      views[i].sizes[j] = shape[layouts[i][j]];
      views[i].strides[j] = static_cast<std::uint32_t>(strides[layouts[i][j]]);
    }
    views[i].offset = offsets[i];
  }
  if (projections[0]) {
    const Projection& q = *projections[0];
    std::vector<double> weight, bias;
    for (const Projection* p : projections) {
      const std::vector<float>& w = graph_.tensor(p->weight).initial;
      const std::vector<float>& b = graph_.tensor(p->bias).initial;
      weight.insert(weight.end(), w.begin(), w.end());
      bias.insert(bias.end(), b.begin(), b.end());
      joined.summaries.push_back(p->summary);
    }
    std::string name = graph_.tensor(q.weight).name;  // the query's layer name and ".weight"
    name = name.substr(0, name.rfind(".weight")) + "+k+v";
    const std::int64_t inputs = shapeOf(q.rows).back();
    const Tensor joinedWeight = parameter(name + ".weight", {width, inputs}, weight);
    const Tensor joinedBias = parameter(name + ".bias", {width}, bias);
    joined.output = graph_.apply(denseOp(Activation::none), {q.rows, joinedWeight, joinedBias}, name);
    joined.how = "Q, K and V from one dense layer";
  }
  settings.queryView = views[0];
  settings.keyView = views[1];
  settings.valueView = views[2];
  return joined;
}

std::string Importer::buildAttention(const AttentionMatch& match) {
  const onnx::NodeProto& product = *match.product;
  const onnx::NodeProto& valueProduct = *match.valueProduct;
  double scale = match.scale;
  const bool pending = pendingAttention_.count(&valueProduct) > 0;
  // A fused op that cannot be made: a reason where the ops can still run one by one, else a refusal.
  const auto fail = [&](const std::string& why) {
    if (pending) refuse(valueProduct, "the fused attention: " + why);
    return why;
  };
  const Value& valueValue = value(valueProduct.input(1), "the attention");
  if (valueValue.constant) return fail("V is a constant");

  // Each operand read in place through the layout of the Transpose (and the scale of the Mul) that made it.
  AttentionSettings settings;
  // Q and Kᵀ may arrive scaled (the scale joins the op's); V's scale is V's own.
  std::array<std::vector<std::string>, 3> paths;  // each operand's names from the op's input to what it reads
  const auto source = [&](const std::string& name, AttentionSettings::Layout& layout, bool transposed, bool scalable,
                          std::vector<std::string>& path) {
    std::string at = name;
    path.push_back(at);
    const auto producer = producers_.find(at);
    if (scalable && producer != producers_.end() && scaledBy(*producer->second) && !values_.at(scaledBy(*producer->second)->first).constant) {
      scale *= scaledBy(*producer->second)->second;
      at = scaledBy(*producer->second)->first;
      path.push_back(at);
    }
    // Through every Transpose before it (BERT's eager Kᵀ is the head split's transpose, transposed again): the composite
    // permutation, perm[k] the axis of `at` that the operand's axis k is.
    std::array<std::uint32_t, 4> perm{0, 1, 2, 3};
    for (auto transpose = producers_.find(at); transpose != producers_.end() && transpose->second->op_type() == "Transpose";
         transpose = producers_.find(at)) {
      const Value& input = values_.at(transpose->second->input(0));
      if (input.constant || shapeOf(input.tensor).size() != 4) break;
      const onnx::AttributeProto* permAttribute = nullptr;
      for (const onnx::AttributeProto& attribute : transpose->second->attribute()) {
        if (attribute.name() == "perm") permAttribute = &attribute;
      }
      if (!permAttribute || permAttribute->ints_size() != 4) break;
      for (std::uint32_t& axis : perm) axis = static_cast<std::uint32_t>(permAttribute->ints(static_cast<int>(axis)));
      at = transpose->second->input(0);
      path.push_back(at);
    }
    // K arrives as Kᵀ: its logical axes [B, H, S, D] are Kᵀ's axes 0, 1, 3, 2.
    layout = transposed ? AttentionSettings::Layout{perm[0], perm[1], perm[3], perm[2]} : AttentionSettings::Layout{perm[0], perm[1], perm[2], perm[3]};
    return values_.at(at).tensor;
  };
  const Tensor query = source(product.input(0), settings.query, false, true, paths[0]);
  const Tensor key = source(product.input(1), settings.key, true, true, paths[1]);
  const Tensor valueTensor = source(valueProduct.input(1), settings.value, false, false, paths[2]);
  if (shapeOf(valueTensor).size() != 4) return fail("V is not rank 4 [batch, heads, sequence, features]");
  const std::optional<JoinedProjections> joined = joinedProjections(paths, settings);
  if (!match.merged.empty()) settings.output = AttentionSettings::sequenceBeforeHeads;
  settings.scale = static_cast<float>(scale);
  settings.emptyRowsZero = match.zeroesEmptyRows;
  std::vector<Tensor> inputs{query, key, valueTensor};
  if (joined) inputs = {joined->output, joined->output, joined->output};
  if (!match.mask.empty()) {
    const Value& maskValue = value(match.mask, "the attention");
    const auto add = std::find_if(match.chain.begin(), match.chain.end(), [](const onnx::NodeProto* n) { return n->op_type() == "Add"; });
    inputs.push_back(maskValue.constant ? tensorOrConstant(**add, (*add)->input(0) == match.mask ? 0 : 1) : maskValue.tensor);
  }
  Tensor out;
  try {
    out = graph_.apply(attentionOp(settings), inputs, nameOf(valueProduct));
  } catch (const Error& error) {
    return fail(error.what());
  }
  if (joined) {
    for (const std::size_t row : joined->summaries) result_.nodes[row].glnetOp = "dense (joined with the attention's other projections)";
  }
  values_[product.output(0)] = {false, {}, out};
  values_[valueProduct.output(0)] = {false, {}, out};
  result_.nodes.push_back({valueProduct.name(), valueProduct.op_type(),
                           "attention (fused: Q·Kᵀ and " + std::to_string(match.chain.size() + match.merged.size()) + " nodes" +
                               (joined ? "; " + joined->how : "") + ")",
                           shapeOf(out)});
  return "";
}

}  // namespace glnet::onnximport
