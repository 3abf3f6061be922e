// Scaled dot-product attention as PyTorch exports it, recognised and run as one fused kernel (attentionOp): see
// importAttention in OnnxImporter.h.
#include "importer/OnnxImporter.h"

#include <algorithm>
#include <cmath>

namespace glnet::onnximport {

namespace {

// A node of the default domain, whose input and output counts the file's check has verified.
bool ofDefaultDomain(const onnx::NodeProto* node) { return node && (node->domain().empty() || node->domain() == "ai.onnx"); }

// A Softmax over the last axis of scores of rank `rank`.
bool isRowSoftmax(const onnx::NodeProto& node, std::int64_t opset, std::size_t rank) {
  if (node.op_type() != "Softmax") return false;
  std::int64_t axis = opset >= 13 ? -1 : 1;
  for (const onnx::AttributeProto& attribute : node.attribute()) {
    if (attribute.name() == "axis") axis = attribute.i();
  }
  // Before opset 13 Softmax coerces to 2-D from `axis` on: over the last axis only for the last axis.
  return axis == -1 || axis == static_cast<std::int64_t>(rank) - 1;
}

}  // namespace

bool Importer::fillsLowest(const onnx::NodeProto& where) const {
  const std::optional<double> fill = scalarAhead(where.input(2));
  return fill && *fill <= -1e30;
}

bool Importer::passesProbabilities(const onnx::NodeProto& node) const {
  // The eager GPT-2 export casts the probabilities to the value's type (to float, the identity); Swin's attention drops
  // some while training (Dropout, the identity in inference, its mask unread).
  if (node.op_type() == "Cast") {
    return node.attribute_size() >= 1 && node.attribute(0).name() == "to" && node.attribute(0).i() == onnx::TensorProto::FLOAT;
  }
  if (node.op_type() == "Identity") return true;
  if (node.op_type() != "Dropout") return false;
  // As importIdentity takes a Dropout: its mask unread, and not in training mode unless its ratio is 0. Inputs that are
  // not constants (yet) decline it.
  if (node.output_size() > 1 && !node.output(1).empty() && consumers_.count(node.output(1)) && consumers_.at(node.output(1)) > 0) return false;
  if (node.input_size() <= 2 || node.input(2).empty()) return true;
  const std::optional<double> training = scalarAhead(node.input(2));
  if (!training) return false;
  if (*training == 0) return true;
  if (node.input_size() <= 1 || node.input(1).empty()) {
    for (const onnx::AttributeProto& attribute : node.attribute()) {
      if (attribute.name() == "ratio") return attribute.f() == 0;
    }
    return false;  // the default ratio, 0.5
  }
  const std::optional<double> ratio = scalarAhead(node.input(1));
  return ratio && *ratio == 0;
}

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

std::vector<const onnx::NodeProto*> Importer::headsMerge(const onnx::NodeProto& valueProduct) const {
  const onnx::NodeProto* after = soleReader(valueProduct.output(0));
  if (!after || after->op_type() != "Transpose") return {};
  for (const onnx::AttributeProto& attribute : after->attribute()) {
    // [batch · heads, sequence, features] to [sequence, batch · heads, features] (nn.MultiheadAttention's merge).
    if (attribute.name() == "perm" && attribute.ints_size() == 3) {
      return attribute.ints(0) == 1 && attribute.ints(1) == 0 && attribute.ints(2) == 2 ? std::vector<const onnx::NodeProto*>{after}
                                                                                       : std::vector<const onnx::NodeProto*>{};
    }
    if (attribute.name() != "perm" || attribute.ints_size() != 4) continue;
    std::array<bool, 4> seen{};
    for (const std::int64_t axis : attribute.ints()) {
      if (axis < 0 || axis > 3 || seen[static_cast<std::size_t>(axis)]) return {};
      seen[static_cast<std::size_t>(axis)] = true;
    }
    return {after};
  }
  return {};
}

AttentionSettings::Layout Importer::mergedLayout(const onnx::NodeProto& transpose) {
  // The Transpose's output axis k is the op's logical axis perm[k]: logical axis perm[k] is stored as axis k.
  AttentionSettings::Layout layout{};
  for (const onnx::AttributeProto& attribute : transpose.attribute()) {
    if (attribute.name() != "perm") continue;
    // Rank 3's [sequence, batch · heads, features], of the op's [batch · heads, 1, ...] or [batch, heads, ...].
    if (attribute.ints_size() == 3) return {1, 2, 0, 3};
    for (int k = 0; k < 4; ++k) layout[static_cast<std::size_t>(attribute.ints(k))] = static_cast<std::uint32_t>(k);
  }
  return layout;
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
  // GPT-2's eager export: Where(causal, scores, the lowest float) keeps the keys at or before each query. The condition
  // is folded from the model's triangular buffer, often after this node; buildAttention reads it.
  const onnx::NodeProto* causalWhere = nullptr;
  if (next && next->op_type() == "Where" && next->input_size() == 3 && next->input(1) == current && next->input(0) != current &&
      next->input(2) != current) {
    if (!fillsLowest(*next)) return "the Where before Softmax fills with no -inf or lowest float";
    causalWhere = next;
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
  // Scores of rank 4 [batch, heads, queries, keys], or 3 with batch and heads as one axis (PyTorch's
  // nn.MultiheadAttention, as torchvision's ViT uses it).
  const std::size_t rank = shapeOf(tensorInput(product, 0)).size();
  if (!next || !isRowSoftmax(*next, result_.opset, rank)) return "no Softmax over the keys reads the scores alone";
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
  while (next && passesProbabilities(*next)) {
    chain.push_back(next);
    current = next->output(0);
    next = soleReader(current);
  }
  if (!next || next->op_type() != "MatMul" || next->input(0) != current || next->input(1) == current) return "no MatMul with V reads the softmax";
  const onnx::NodeProto& valueProduct = *next;
  chain.push_back(next);
  AttentionMatch match{&product, &valueProduct, chain, headsMerge(valueProduct), mask, scale, zeroesEmptyRows, causalWhere, {}, {}};
  const Value& queryValue = operand(product, 0);
  const Value& keyValue = operand(product, 1);
  if (queryValue.constant || keyValue.constant) return "Q or K is a constant";
  if ((rank != 3 && rank != 4) || shapeOf(keyValue.tensor).size() != rank) {
    return "Q and Kᵀ are not of rank 4 [batch, heads, sequence, features] or 3 [batch · heads, sequence, features]";
  }
  for (const std::string& name : {valueProduct.input(1), mask}) {
    if (!name.empty() && values_.count(name) && values_.at(name).constant && name == valueProduct.input(1)) return "V is a constant";
  }
  // The nodes after Q·Kᵀ run inside the fused op; V and the mask may come later in the file (SDPA's export computes the
  // mask just before it adds it), so the op is made where the product with V is, at the latest. Made now, a shape the
  // op does not take leaves the ops to run one by one; made later, it refuses the model.
  // A causal condition computed after Q·Kᵀ leaves the ops to run one by one until the product with V, where
  // importLateAttention finds them all computed (and, failing, leaves them running: no refusal).
  if (causalWhere && !values_.count(causalWhere->input(0))) return "the Where's condition is computed after Q·Kᵀ";
  const bool ready = values_.count(valueProduct.input(1)) && (mask.empty() || values_.count(mask));
  // A rank-3 attention whose V or mask comes later is left to the late match, which declines what it cannot fuse
  // (a mask that widens the scores to rank 4, say) where a pending one would have to refuse the model.
  if (!ready && rank == 3) return "V or the mask is computed after Q·Kᵀ";
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

std::string Importer::importLateAttention(const onnx::NodeProto& valueProduct) {
  // Back from P·V to Q·Kᵀ: casts to float, Softmax over the keys, an optional additive mask, an optional Where(causal,
  // scores, lowest), an optional scale; each result read by the next node alone.
  const auto producerReadOnce = [this](const std::string& name) -> const onnx::NodeProto* {
    const auto producer = producers_.find(name);
    return producer != producers_.end() && ofDefaultDomain(producer->second) && soleReader(name) ? producer->second : nullptr;
  };
  std::vector<const onnx::NodeProto*> chain;  // backwards, reversed below
  std::string current = valueProduct.input(0);
  const onnx::NodeProto* node = producerReadOnce(current);
  while (node && passesProbabilities(*node)) {
    chain.push_back(node);
    current = node->input(0);
    node = producerReadOnce(current);
  }
  if (!node || !isRowSoftmax(*node, result_.opset, shapeOf(tensorInput(*node, 0)).size())) return "no Softmax over the keys";
  chain.push_back(node);
  current = node->input(0);
  node = producerReadOnce(current);
  // Swin's shifted windows: the scores viewed as [batch / windows, windows, heads, queries, keys], a constant added per
  // window, and viewed back.
  std::string windowMask;
  Shape windowedScores;
  if (node && node->op_type() == "Reshape") {
    const onnx::NodeProto* add = producerReadOnce(node->input(0));
    const auto constant = [this](const std::string& name) {
      const auto found = values_.find(name);
      return found != values_.end() && found->second.constant;
    };
    if (add && add->op_type() == "Add" && add->input_size() == 2 && constant(add->input(0)) != constant(add->input(1))) {
      const int scores = constant(add->input(0)) ? 1 : 0;
      const onnx::NodeProto* split = producerReadOnce(add->input(scores));
      if (split && split->op_type() != "Reshape") split = nullptr;
      // [batch, heads, queries, keys] viewed as [batch / windows, windows, heads, queries, keys] and back.
      const Shape scoreShape = split ? shapeOf(tensorInput(*split, 0)) : Shape{};
      const Shape windowed = split ? shapeOf(values_.at(split->output(0)).tensor) : Shape{};
      if (split && scoreShape == shapeOf(values_.at(node->output(0)).tensor) && scoreShape.size() == 4 &&
          windowed.size() == 5 && std::uint64_t{windowed[0]} * windowed[1] == scoreShape[0] &&
          std::equal(windowed.begin() + 2, windowed.end(), scoreShape.begin() + 1)) {
        windowMask = add->input(1 - scores);
        windowedScores = windowed;
        chain.insert(chain.end(), {node, add, split});
        current = split->input(0);
        node = producerReadOnce(current);
      }
    }
  }
  // The scores' side of an Add is the one made by a Where, a scale or a product of two computed tensors.
  const auto onScoresPath = [this](const std::string& name) {
    const auto producer = producers_.find(name);
    if (producer == producers_.end()) return false;
    const onnx::NodeProto& p = *producer->second;
    return p.op_type() == "Where" || scaledBy(p) || (p.op_type() == "MatMul" && !operand(p, 0).constant && !operand(p, 1).constant);
  };
  std::string mask;
  if (node && node->op_type() == "Add" && node->input_size() == 2 && node->input(0) != node->input(1)) {
    const int scores = onScoresPath(node->input(0)) ? 0 : onScoresPath(node->input(1)) ? 1 : -1;
    if (scores < 0) return "no scores path through the mask's Add";
    mask = node->input(1 - scores);
    chain.push_back(node);
    current = node->input(scores);
    node = producerReadOnce(current);
  }
  const onnx::NodeProto* causalWhere = nullptr;
  if (node && node->op_type() == "Where" && node->input_size() == 3 && node->input(0) != node->input(1) && node->input(2) != node->input(1)) {
    if (!fillsLowest(*node)) return "the Where before Softmax fills with no -inf or lowest float";
    if (!windowMask.empty()) return "a Where before a window mask";
    causalWhere = node;
    chain.push_back(node);
    current = node->input(1);
    node = producerReadOnce(current);
  }
  double scale = 1;
  if (node && scaledBy(*node) && !values_.at(scaledBy(*node)->first).constant) {
    scale = scaledBy(*node)->second;
    chain.push_back(node);
    current = scaledBy(*node)->first;
    node = producerReadOnce(current);
  }
  if (!node || node->op_type() != "MatMul" || operand(*node, 0).constant || operand(*node, 1).constant) return "no Q·Kᵀ before the scores";
  const onnx::NodeProto& product = *node;
  std::reverse(chain.begin(), chain.end());
  chain.push_back(&valueProduct);
  AttentionMatch match{&product, &valueProduct, chain, headsMerge(valueProduct), mask, scale, false, causalWhere, windowMask, windowedScores};
  const std::string why = buildAttention(match);
  if (!why.empty()) return why;
  // The ops already made for the chain are read by nothing now, and left out of the plan (Graph::pruned).
  for (OnnxNodeSummary& summary : result_.nodes) {
    const bool inside = summary.name == product.name() || std::any_of(chain.begin(), chain.end() - 1, [&](const onnx::NodeProto* n) {
                          return n->name() == summary.name;
                        });
    if (inside && !summary.name.empty()) {
      summary.glnetOp = "fused into the attention";
      summary.outputShape = {};
    }
  }
  for (const onnx::NodeProto* merged : match.merged) {
    fused_.insert(merged);
    aliases_[merged] = valueProduct.output(0);
  }
  return "";
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

  // Q, Kᵀ and V of one rank, 4 or 3 (the layouts below index their axes).
  const std::size_t rank = shapeOf(value(product.input(0), "the attention").tensor).size();
  if ((rank != 3 && rank != 4) || shapeOf(value(product.input(1), "the attention").tensor).size() != rank ||
      shapeOf(valueValue.tensor).size() != rank) {
    return fail("Q, Kᵀ and V are not all of rank 4 [batch, heads, sequence, features] or 3 [batch · heads, sequence, features]");
  }
  // Each operand read in place through the layout of the Transpose (and the scale of the Mul) that made it.
  AttentionSettings settings;
  // Q and Kᵀ may arrive scaled (the scale joins the op's); V's scale is V's own.
  std::array<std::vector<std::string>, 3> paths;  // each operand's names from the op's input to what it reads
  const auto source = [&](const std::string& name, AttentionSettings::Layout& layout, bool transposed, bool scalable,
                          std::vector<std::string>& path) {
    std::string at = name;
    path.push_back(at);
    const auto producer = producers_.find(at);
    // A scale whose input has another rank (a constant of more axes broadcasting it) is no part of the attention's layout.
    if (scalable && producer != producers_.end() && scaledBy(*producer->second) && !values_.at(scaledBy(*producer->second)->first).constant &&
        shapeOf(values_.at(scaledBy(*producer->second)->first).tensor).size() == shapeOf(values_.at(at).tensor).size()) {
      scale *= scaledBy(*producer->second)->second;
      at = scaledBy(*producer->second)->first;
      path.push_back(at);
    }
    // Through every Transpose before it (BERT's eager Kᵀ is the head split's transpose, transposed again): the composite
    // permutation, perm[k] the axis of `at` that the operand's axis k is.
    const std::size_t rank = shapeOf(values_.at(at).tensor).size();
    std::vector<std::uint32_t> perm{0, 1, 2, 3};
    perm.resize(std::min<std::size_t>(rank, 4));
    // A Transpose fused into an earlier attention's output (its heads' merge) was never run: its value is that output.
    for (auto transpose = producers_.find(at);
         transpose != producers_.end() && transpose->second->op_type() == "Transpose" && !fused_.count(transpose->second);
         transpose = producers_.find(at)) {
      const Value& input = values_.at(transpose->second->input(0));
      if (input.constant || shapeOf(input.tensor).size() != rank) break;
      const onnx::AttributeProto* permAttribute = nullptr;
      for (const onnx::AttributeProto& attribute : transpose->second->attribute()) {
        if (attribute.name() == "perm") permAttribute = &attribute;
      }
      if (!permAttribute || static_cast<std::size_t>(permAttribute->ints_size()) != rank) break;
      for (std::uint32_t& axis : perm) axis = static_cast<std::uint32_t>(permAttribute->ints(static_cast<int>(axis)));
      at = transpose->second->input(0);
      path.push_back(at);
    }
    if (rank != 3) {
      // K arrives as Kᵀ: its logical axes [B, H, S, D] are Kᵀ's axes 0, 1, 3, 2.
      layout = transposed ? AttentionSettings::Layout{perm[0], perm[1], perm[3], perm[2]} : AttentionSettings::Layout{perm[0], perm[1], perm[2], perm[3]};
      return values_.at(at).tensor;
    }
    // [batch · heads, sequence, features] (Kᵀ: features, sequence) read as [1, ...]: batch · heads as the batch, the
    // new axis as one head.
    const Tensor stored = values_.at(at).tensor;
    const Shape& shape = shapeOf(stored);
    const std::uint32_t sequence = perm[transposed ? 2 : 1] + 1, feature = perm[transposed ? 1 : 2] + 1;
    layout = AttentionSettings::Layout{perm[0] + 1, 0, sequence, feature};
    return graph_.apply(reshapeOp({1, shape[0], shape[1], shape[2]}), {stored});
  };
  const Tensor query = source(product.input(0), settings.query, false, true, paths[0]);
  const Tensor key = source(product.input(1), settings.key, true, true, paths[1]);
  const Tensor valueTensor = source(valueProduct.input(1), settings.value, false, false, paths[2]);
  const bool headsJoined = rank == 3;  // [batch · heads, sequence, features]
  // Where(condition, scores, lowest): the op's causal flag where the condition is a constant keeping key j for query i
  // exactly where j <= i + Sk - Sq (over [Sq, Sk], leading axes of 1) and no mask follows. Otherwise an additive mask of
  // 0 and the fill, summed with the mask, gives the same scores: score + lowest rounds to lowest for any |score| < 1e31,
  // and lowest + lowest to -inf, as the Where and the Add give. (The causal flag would differ from them on a row whose
  // visible keys the mask hides all: there the lowest float of the hidden later keys takes part in the softmax.) A NaN
  // or +inf score at a hidden key, which the Where drops, makes its row NaN: NaN in, NaN out.
  std::optional<Tensor> whereMask;
  if (const onnx::NodeProto* where = match.causalWhere) {
    const std::uint32_t sq = shapeOf(query)[settings.query[2]], sk = shapeOf(key)[settings.key[2]];
    const Value& condition = value(where->input(0), "the attention");
    const Constant& c = condition.host;
    // With Sq > Sk the first queries see no key: the Where keeps the lowest float there, where the op would see none.
    bool causal = match.mask.empty() && sq <= sk && condition.constant && c.shape.size() >= 2 && c.shape[c.shape.size() - 2] == sq &&
                  c.shape.back() == sk && c.elements() == std::size_t{sq} * sk;
    for (std::size_t i = 0; causal && i < sq; ++i) {
      for (std::size_t j = 0; causal && j < sk; ++j) causal = (c.values[i * sk + j] != 0) == (j + sq <= i + sk);
    }
    settings.causal = causal;
    if (!causal) {
      try {
        whereMask = graph_.apply(whereOp(), {tensorOrConstant(*where, 0), parameter(nameOf(*where) + ".kept", {}, {0.0}), tensorOrConstant(*where, 2)},
                                 nameOf(*where));
      } catch (const Error& error) {
        return fail(error.what());
      }
    }
  }
  const std::optional<JoinedProjections> joined = joinedProjections(paths, {shapeOf(query), shapeOf(key), shapeOf(valueTensor)}, headsJoined, settings);
  if (!match.merged.empty()) settings.output = mergedLayout(*match.merged.front());
  settings.scale = static_cast<float>(scale);
  settings.emptyRowsZero = match.zeroesEmptyRows;
  std::vector<Tensor> inputs{query, key, valueTensor};
  if (joined) inputs = {joined->output, joined->output, joined->output};
  std::optional<Tensor> windowedMask;
  if (!match.windowMask.empty()) {
    if (const std::string why = joinWindowMask(match, windowedMask); !why.empty()) return fail(why);
    // Batch b (image · windows + window) reads the mask of its window, b mod windows.
    if (const std::uint32_t windows = shapeOf(*windowedMask)[0]; windows > 1) settings.maskBatchPeriod = windows;
  }
  Tensor out;
  try {
    if (windowedMask) {
      inputs.push_back(*windowedMask);
    } else if (!match.mask.empty()) {
      const Value& maskValue = value(match.mask, "the attention");
      const auto add = std::find_if(match.chain.begin(), match.chain.end(), [](const onnx::NodeProto* n) { return n->op_type() == "Add"; });
      inputs.push_back(maskValue.constant ? tensorOrConstant(**add, (*add)->input(0) == match.mask ? 0 : 1) : maskValue.tensor);
      if (whereMask) inputs.back() = graph_.apply(broadcastOp(BinaryKind::add), {*whereMask, inputs.back()}, nameOf(**add));
    } else if (whereMask) {
      inputs.push_back(*whereMask);
    }
    // A mask or condition of more axes than Q·Kᵀ widens the scores (rank-3 scores to [1, batch · heads, ...]) and the
    // output with them: not this op's output.
    if (match.causalWhere && shapeOf(tensorOrConstant(*match.causalWhere, 0)).size() > rank) {
      return fail("the Where's condition has more axes than the scores");
    }
    if (inputs.size() == 4 && shapeOf(inputs.back()).size() > rank) return fail("the mask has more axes than the scores");
    // A mask of [batch · heads, queries, keys] read as [batch · heads, 1, queries, keys], or as [batch, heads, ...]
    // where the views split batch and heads apart.
    const std::uint32_t splitHeads = headsJoined && settings.queryView ? settings.queryView->sizes[1] : 1;
    if (const Shape m = inputs.size() == 4 ? shapeOf(inputs.back()) : Shape{}; headsJoined && m.size() == 3) {
      const std::uint32_t heads = m[0] > 1 ? splitHeads : 1;
      inputs.back() = graph_.apply(reshapeOp({m[0] / heads, heads, m[1], m[2]}), {inputs.back()});
    }
    out = graph_.apply(attentionOp(settings), inputs, nameOf(valueProduct));
    if (headsJoined) {
      // [batch · heads, 1, sequence, features] or [batch, heads, ...]; with the merge, sequence first.
      const Shape o = shapeOf(out);
      out = graph_.apply(reshapeOp(match.merged.empty() ? Shape{o[0] * o[1], o[2], o[3]} : Shape{o[0], o[1] * o[2], o[3]}), {out});
    }
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

std::string Importer::joinWindowMask(const AttentionMatch& match, std::optional<Tensor>& joined) {
  const Shape& windowed = match.windowedScores;  // [batch / windows, windows, heads, queries, keys]
  const std::array<std::int64_t, 5> target{1, windowed[1], windowed[2], windowed[3], windowed[4]};
  // A constant aligned at the last axis of `target` (NumPy's rule), each axis 1 or the target's.
  const auto fits = [&](const Constant& c) {
    if (c.shape.size() > target.size()) return false;
    for (std::size_t k = 0; k < c.shape.size(); ++k) {
      const std::int64_t length = c.shape[k], wanted = target[target.size() - c.shape.size() + k];
      if (length != 1 && length != wanted) return false;
    }
    return true;
  };
  const Value& window = value(match.windowMask, "the attention");
  if (!window.constant || !fits(window.host)) return "the windows' mask is no constant of [1, windows, heads, queries, keys]";
  Constant mask;  // a scalar 0 without a mask before the windows'
  mask.values = {0.0};
  if (!match.mask.empty()) {
    const Value& before = value(match.mask, "the attention");
    // Added to [batch, heads, queries, keys]: as [1, 1, heads, queries, keys] when it does not vary along the batch.
    if (!before.constant || before.host.shape.size() > 4 || (before.host.shape.size() == 4 && before.host.shape[0] != 1)) {
      return "the mask before the windows' is no constant shared by the batch";
    }
    mask = before.host;
    if (!fits(mask)) return "the mask before the windows' does not fit the scores";
  }
  std::size_t elements = 1;
  for (std::size_t k = 0; k < target.size(); ++k) {
    std::int64_t length = 1;
    for (const Constant* c : std::array<const Constant*, 2>{&mask, &window.host}) {
      if (c->shape.size() + k >= target.size()) length = std::max(length, c->shape[k + c->shape.size() - target.size()]);
    }
    elements *= static_cast<std::size_t>(length);
  }
  if (elements > largestFolded) return "the windows' mask joined with the mask before it is too large to fold";
  Constant sum = broadcast(*match.valueProduct, {&mask, &window.host}, [](const std::vector<double>& v) { return v[0] + v[1]; });
  sum.shape.insert(sum.shape.begin(), target.size() - sum.shape.size(), 1);
  sum.shape.erase(sum.shape.begin());  // [windows, heads, queries, keys], each 1 or the scores'
  joined = parameter(nameOf(*match.valueProduct) + ".window_mask", sum.shape, sum.values, true);
  return "";
}

bool Importer::importsEinsumAttention(const onnx::NodeProto& product, const Einsum& e) {
  // Terms batch + i + d and batch + j + d into batch + i + j: the same batch letters in the same order, i, j, d distinct.
  if (e.inputs.size() != 2 || e.inputs[0].size() < 3 || e.inputs[0].size() != e.inputs[1].size() || e.output.size() != e.inputs[0].size()) return false;
  const std::size_t rank = e.output.size();
  const std::string batch = e.output.substr(0, rank - 2);
  const char i = e.inputs[0][rank - 2], d = e.inputs[0][rank - 1], j = e.inputs[1][rank - 2];
  if (e.inputs[0] != batch + i + d || e.inputs[1] != batch + j + d || e.output != batch + i + j || i == j || d == i || d == j ||
      batch.find_first_of({i, j, d}) != std::string::npos) {
    return false;
  }
  // Q and K computed, of the equation's rank (importEinsum refuses the rest, naming them).
  for (const int side : {0, 1}) {
    if (operand(product, side).constant || shapeOf(operand(product, side).tensor).size() != rank) return false;
  }
  const auto soleReader = [this](const std::string& name) -> const onnx::NodeProto* {
    const onnx::NodeProto* reader = Importer::soleReader(name);
    return ofDefaultDomain(reader) ? reader : nullptr;
  };
  std::vector<const onnx::NodeProto*> chain;
  std::string current = product.output(0);
  const onnx::NodeProto* next = soleReader(current);
  std::optional<Constant> mask;
  if (next && next->op_type() == "Add" && next->input_size() == 2 && next->input(0) != next->input(1)) {
    const auto found = values_.find(next->input(next->input(0) == current ? 1 : 0));
    if (found == values_.end() || !found->second.constant) return false;
    mask = found->second.host;
    chain.push_back(next);
    current = next->output(0);
    next = soleReader(current);
  }
  if (!next || !isRowSoftmax(*next, result_.opset, rank)) return false;
  chain.push_back(next);
  current = next->output(0);
  next = soleReader(current);
  while (next && passesProbabilities(*next)) {
    chain.push_back(next);
    current = next->output(0);
    next = soleReader(current);
  }
  // The product with V: batch + i + j and batch + j + e into batch + i + e.
  if (!next || next->op_type() != "Einsum" || next->input_size() != 2 || next->input(0) != current || next->input(1) == current) return false;
  const onnx::NodeProto& valueProduct = *next;
  const Einsum ev = parseEinsum(valueProduct, attributes(valueProduct, {"equation"}));
  if (ev.inputs.size() != 2 || ev.inputs[0] != batch + i + j || ev.inputs[1].size() != rank || ev.inputs[1].substr(0, rank - 1) != batch + j) return false;
  const char f = ev.inputs[1][rank - 1];
  if (ev.output != batch + i + f || f == i || f == j || batch.find(f) != std::string::npos) return false;
  chain.push_back(&valueProduct);
  const auto v = values_.find(valueProduct.input(1));
  // V computed later, a constant or of another rank: the products run one by one.
  if (v == values_.end() || v->second.constant || shapeOf(v->second.tensor).size() != rank) return false;

  // Q (its scale joining the op's), K and V as [batch..., sequence, features], viewed as [outer batch, last batch
  // letter, sequence, features]; an operand that a Transpose of the last three axes made (MaxViT's head split) is read
  // in place from that Transpose's input. The output likewise, where a Transpose of the last three axes alone reads
  // it: written in that order. The mask is taken where it varies along the last three axes of the scores only.
  const auto permutationOf = [&](const onnx::NodeProto* node) -> std::optional<std::vector<std::int64_t>> {
    if (!node || node->op_type() != "Transpose" || fused_.count(node)) return std::nullopt;
    for (const onnx::AttributeProto& attribute : node->attribute()) {
      if (attribute.name() != "perm" || static_cast<std::size_t>(attribute.ints_size()) != rank) continue;
      std::vector<std::int64_t> perm(attribute.ints().begin(), attribute.ints().end());
      std::vector<std::int64_t> sorted = perm;
      std::sort(sorted.begin(), sorted.end());
      bool trailing = std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end() && sorted.front() == 0 &&
                      sorted.back() == static_cast<std::int64_t>(rank) - 1;
      for (std::size_t k = 0; k < rank; ++k) trailing = trailing && (k + 3 < rank ? perm[k] == static_cast<std::int64_t>(k) : perm[k] + 3 >= static_cast<std::int64_t>(rank));
      if (trailing) return perm;
    }
    return std::nullopt;
  };
  const auto asFour = [&](const Tensor& t) {
    const Shape& shape = shapeOf(t);
    std::uint32_t outer = 1;
    for (std::size_t k = 0; k + 3 < shape.size(); ++k) outer *= shape[k];
    return graph_.apply(reshapeOp({outer, shape[shape.size() - 3], shape[shape.size() - 2], shape.back()}), {t});
  };
  // `path`: the names from the op's input back to the tensor read (joinedProjections).
  const auto operandAt = [&](std::string name, AttentionSettings::Layout& layout, std::vector<std::string>& path) {
    path.push_back(name);
    const auto producer = producers_.find(name);
    const auto perm = permutationOf(producer == producers_.end() ? nullptr : producer->second);
    const Value* input = perm ? &values_.at(producer->second->input(0)) : nullptr;
    if (!perm || input->constant || shapeOf(input->tensor).size() != rank) return asFour(values_.at(name).tensor);
    // The operand's axis rank - 3 + m is the stored axis perm[rank - 3 + m]: as [outer, ...] axes, 1 + that - (rank - 3).
    for (std::size_t m = 0; m < 3; ++m) layout[m + 1] = static_cast<std::uint32_t>(perm->at(rank - 3 + m) + 4 - static_cast<std::int64_t>(rank));
    layout[0] = 0;
    path.push_back(producer->second->input(0));
    return asFour(input->tensor);
  };
  // Q's and K's scales (MaxViT scales K) join the op's.
  double scale = 1;
  std::array<std::vector<std::string>, 3> paths;
  const auto unscaled = [&](int side) {
    std::string name = product.input(side);
    if (const auto producer = producers_.find(name); producer != producers_.end() && scaledBy(*producer->second)) {
      const Value& input = values_.at(scaledBy(*producer->second)->first);
      if (!input.constant && shapeOf(input.tensor) == shapeOf(tensorInput(product, side))) {
        paths[static_cast<std::size_t>(side)].push_back(name);
        scale *= scaledBy(*producer->second)->second;
        name = scaledBy(*producer->second)->first;
      }
    }
    return name;
  };
  const std::string queryName = unscaled(0), keyName = unscaled(1);
  Shape resultShape = shapeOf(v->second.tensor);
  resultShape[rank - 2] = shapeOf(tensorInput(product, 0))[rank - 2];
  const onnx::NodeProto* merge = soleReader(valueProduct.output(0));
  const auto mergePerm = permutationOf(merge);
  AttentionSettings settings;
  std::vector<Tensor> inputs;
  std::string how;  // where Q, K and V are read from, when joinedProjections found them
  std::vector<std::size_t> summaries;
  Tensor out;
  try {
    inputs = {operandAt(queryName, settings.query, paths[0]), operandAt(keyName, settings.key, paths[1]),
              operandAt(valueProduct.input(1), settings.value, paths[2])};
    std::vector<std::int64_t> last(3, 1);  // the mask's last three axes
    if (mask) {
      if (mask->shape.size() > rank) return false;
      for (std::size_t k = 0; k < mask->shape.size(); ++k) {
        const std::size_t fromEnd = mask->shape.size() - k;
        if (fromEnd > 3 && mask->shape[k] != 1) return false;  // varies along the merged batch: not one mask per head
        if (fromEnd <= 3) last[3 - fromEnd] = mask->shape[k];
      }
    }
    // After the checks that decline: a joined projection made here would be left unread.
    if (const std::optional<JoinedProjections> joined = joinedProjections(paths, {shapeOf(inputs[0]), shapeOf(inputs[1]), shapeOf(inputs[2])}, false, settings)) {
      inputs = {joined->output, joined->output, joined->output};
      how = "; " + joined->how;
      summaries = joined->summaries;
    }
    if (mask) {
      inputs.push_back(parameter(nameOf(*chain.front()) + ".mask", {1, last[0], last[1], last[2]}, mask->values, true));
    }
    Shape stored = resultShape;
    if (mergePerm) {
      // The Transpose's output axis k is the result's axis perm[k]: logical axis m (after the outer one) is stored at
      // the k where perm[k] = rank - 4 + m, as [outer, ...] axis k - (rank - 4).
      for (std::size_t k = 0; k < rank; ++k) {
        stored[k] = resultShape[static_cast<std::size_t>(mergePerm->at(k))];
        if (k + 3 >= rank) settings.output[static_cast<std::size_t>(mergePerm->at(k) + 4 - static_cast<std::int64_t>(rank))] = static_cast<std::uint32_t>(k + 4 - rank);
      }
    }
    settings.scale = static_cast<float>(scale);
    settings.emptyRowsZero = false;
    out = graph_.apply(reshapeOp(stored), {graph_.apply(attentionOp(settings), inputs, nameOf(valueProduct))});
  } catch (const Error&) {
    return false;  // a shape the fused op does not take: the products run one by one
  }
  if (mergePerm) {
    fused_.insert(merge);
    aliases_[merge] = valueProduct.output(0);
  }
  for (const onnx::NodeProto* node : chain) insideAttention_.insert(node);
  values_[product.output(0)] = {false, {}, out};
  values_[valueProduct.output(0)] = {false, {}, out};
  result_.nodes.push_back({product.name(), product.op_type(),
                           "attention (fused: Q·Kᵀ and " + std::to_string(chain.size()) + " nodes, written as Einsum" + how + ")", shapeOf(out)});
  for (const std::size_t row : summaries) result_.nodes[row].glnetOp = "dense (joined with the attention's other projections)";
  return true;
}

}  // namespace glnet::onnximport
