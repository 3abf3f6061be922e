#include "convert/OnnxSequencePatterns.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <tuple>

namespace glnet {
namespace {

using onnxformat::Attributes;
using onnxformat::integer;
using onnxformat::integers;
using onnxformat::real;

Attributes attributesOf(const onnx::NodeProto& node) {
  Attributes byName;
  for (const onnx::AttributeProto& attribute : node.attribute()) byName[attribute.name()] = &attribute;
  return byName;
}

HostTensor hostTensor(std::vector<std::int64_t> shape, const std::vector<double>& values) {
  return HostTensor{std::move(shape), std::vector<float>(values.begin(), values.end())};
}

// [rows, columns] → [columns, rows]: ONNX's MatMul weights are PyTorch's transposed.
HostTensor transposed(const OnnxConstant& matrix) {
  const std::size_t rows = static_cast<std::size_t>(matrix.shape[0]), columns = static_cast<std::size_t>(matrix.shape[1]);
  HostTensor out{{matrix.shape[1], matrix.shape[0]}, std::vector<float>(rows * columns)};
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < columns; ++c) out.values[c * rows + r] = static_cast<float>(matrix.values[r * columns + c]);
  }
  return out;
}

std::string withoutSuffix(const std::string& name, const std::string& suffix) {
  return name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0 ? name.substr(0, name.size() - suffix.size()) : "";
}

class Finder {
 public:
  Finder(const onnx::GraphProto& graph, std::int64_t opset, const OnnxReaders& readers, const std::map<std::string, OnnxConstant>& initializers,
         std::string output, const std::string& path)
      : graph_(graph), opset_(opset), readers_(readers), initializers_(initializers), output_(std::move(output)), constants_(initializers) {
    for (const onnx::NodeProto& node : graph.node()) {
      for (const std::string& name : node.output()) producers_[name] = &node;
      if (node.op_type() != "Constant" || node.output_size() != 1) continue;
      for (const onnx::AttributeProto& attribute : node.attribute()) {
        if (attribute.name() == "value") constants_[node.output(0)] = readOnnxTensor(attribute.t(), path);
      }
    }
  }

  std::vector<OnnxSequenceLayer> run() {
    // Attention first: its MatMuls and Adds are no linear layers.
    for (const char* op : {"Softmax", "Transpose", "MatMul", "Add", "Gather"}) {
      for (const onnx::NodeProto& node : graph_.node()) {
        if (node.op_type() != op) continue;
        const std::string kind = op;
        if (kind == "Softmax") {
          std::optional<OnnxSequenceLayer> found = attention(node);
          take(found ? std::move(found) : attentionChunked(node));
        } else {
          take(kind == "Transpose" ? tokens(node) : kind == "MatMul" ? linear(node) : kind == "Add" ? position(node) : gather(node));
        }
      }
    }
    // A padding mask is a layer of −inf and 0 where PyTorch has booleans: only attentions may read it.
    for (const onnx::NodeProto* equal : paddingMasks()) {
      const auto readers = readers_.find(equal->output(0));
      const bool attentionsAlone = equal->output(0) != output_ && std::all_of(readers->second.begin(), readers->second.end(), [&](const onnx::NodeProto* reader) {
        return claimed_.count(reader) > 0;
      });
      if (attentionsAlone) take(paddingMask(*equal));
    }
    // Attentions whose mask is read elsewhere too are left to the node-by-node reader.
    std::set<std::string> masks;
    for (const OnnxSequenceLayer& layer : found_) {
      if (layer.layer.kind == layerKindName(LayerKind::mask)) masks.insert(layer.last->output(0));
    }
    found_.erase(std::remove_if(found_.begin(), found_.end(), [&](const OnnxSequenceLayer& layer) { return layer.inputs.size() == 2 && !masks.count(layer.inputs[1]); }),
                 found_.end());
    return std::move(found_);
  }

  std::vector<const onnx::NodeProto*> paddingMasks() const {
    std::vector<const onnx::NodeProto*> equals;
    for (const OnnxSequenceLayer& layer : found_) {
      if (layer.inputs.size() != 2) continue;
      const onnx::NodeProto* equal = producedBy(layer.inputs[1], "Equal");
      if (std::find(equals.begin(), equals.end(), equal) == equals.end()) equals.push_back(equal);
    }
    return equals;
  }

  // ids == pad for a whole-number pad.
  std::optional<OnnxSequenceLayer> paddingMask(const onnx::NodeProto& equal) const {
    const int padAt = constant(equal.input(1)) ? 1 : 0;
    const OnnxConstant* pad = constant(equal.input(padAt));
    if (!pad || pad->elements() != 1 || !(pad->values[0] >= 0 && pad->values[0] < 16777216.0) || pad->values[0] != std::floor(pad->values[0]) ||
        constants_.count(equal.input(1 - padAt))) {
      return std::nullopt;
    }
    OnnxSequenceLayer found;
    found.inputs = {equal.input(1 - padAt)};
    found.last = &equal;
    found.layer.kind = layerKindName(LayerKind::mask);
    found.layer.pad = static_cast<std::uint32_t>(pad->values[0]);
    return found;
  }

  // An embedding (Gather of a table by ids) or the first position (Gather of index 0 along axis 1).
  std::optional<OnnxSequenceLayer> gather(const onnx::NodeProto& node) const {
    if (node.input_size() != 2) return std::nullopt;
    const std::int64_t axis = integer(attributesOf(node), "axis", 0);
    OnnxSequenceLayer found;
    found.last = &node;
    if (const OnnxConstant* table = initializer(node, 0, 2); table && axis == 0 && !constants_.count(node.input(1))) {
      if (table->shape[0] < 1 || table->shape[0] > (1 << 24) || table->shape[1] < 1 || table->shape[1] > (1 << 16)) return std::nullopt;
      found.inputs = {node.input(1)};
      found.layer.kind = layerKindName(LayerKind::embedding);
      found.layer.vocabulary = static_cast<std::uint32_t>(table->shape[0]);
      found.layer.outputs = static_cast<std::uint32_t>(table->shape[1]);
      found.nameHint = node.input(0);
      found.weights = {{".weight", hostTensor(table->shape, table->values)}};
      return found;
    }
    const OnnxConstant* index = constant(node.input(1));
    if (!index || !index->shape.empty() || index->values != std::vector<double>{0.0} || axis != 1 || constants_.count(node.input(0))) return std::nullopt;
    found.inputs = {node.input(0)};
    found.layer.kind = layerKindName(LayerKind::first);
    return found;
  }

 private:
  void take(std::optional<OnnxSequenceLayer> layer) {
    if (!layer || claimed_.count(layer->last)) return;
    for (const onnx::NodeProto* node : layer->inside) {
      if (claimed_.count(node)) return;
    }
    claimed_.insert(layer->last);
    claimed_.insert(layer->inside.begin(), layer->inside.end());
    found_.push_back(std::move(*layer));
  }

  // Input `index` of `node`, or "" where it has fewer (an older opset's Slice takes its starts as attributes).
  static const std::string& in(const onnx::NodeProto& node, int index) {
    static const std::string none;
    return index < node.input_size() ? node.input(index) : none;
  }
  // `reader` where it reads `node`'s output as its input 0 (a Reshape reading it as its shape would not do).
  static const onnx::NodeProto* readsFirst(const onnx::NodeProto* node, const onnx::NodeProto* reader) {
    return node && reader && reader->input_size() > 0 && reader->input(0) == node->output(0) ? reader : nullptr;
  }
  const onnx::NodeProto* producedBy(const std::string& name, const char* op) const {
    if (name.empty()) return nullptr;
    const auto found = producers_.find(name);
    return found != producers_.end() && found->second->op_type() == op ? found->second : nullptr;
  }
  // The one reader of `node`'s first output when it is of type `op` (and that output no graph output); with
  // `shapesToo`, other readers may be Shape nodes (the exporter's arithmetic for a later Reshape, which the stretch
  // then holds).
  const onnx::NodeProto* soleReader(const onnx::NodeProto* node, const char* op, bool shapesToo = false) const {
    if (!node || node->output_size() < 1 || node->output(0) == output_) return nullptr;
    const auto found = readers_.find(node->output(0));
    if (found == readers_.end()) return nullptr;
    const onnx::NodeProto* sole = nullptr;
    for (const onnx::NodeProto* reader : found->second) {
      if (reader->op_type() == op && !sole) {
        sole = reader;
      } else if (!shapesToo || reader->op_type() != "Shape") {
        return nullptr;
      }
    }
    return sole;
  }
  const OnnxConstant* constant(const std::string& name) const {
    if (name.empty()) return nullptr;
    const auto found = constants_.find(name);
    return found == constants_.end() ? nullptr : &found->second;
  }
  const OnnxConstant* initializer(const onnx::NodeProto& node, int index, std::size_t rank) const {
    if (index >= node.input_size()) return nullptr;
    const auto found = initializers_.find(node.input(index));
    return found != initializers_.end() && found->second.shape.size() == rank ? &found->second : nullptr;
  }
  // The weight [in, out] a MatMul's input `index` multiplies by: an initializer, or (without constant folding) a
  // Transpose of PyTorch's [out, in] read by that MatMul alone, given then as `transpose`.
  struct MatMulWeight {
    const OnnxConstant* value = nullptr;
    bool pytorchLayout = false;  // value is [out, in]
    const onnx::NodeProto* transpose = nullptr;
    std::string name;
  };
  MatMulWeight matMulWeight(const onnx::NodeProto& product, int index) const {
    MatMulWeight weight;
    if (index >= product.input_size()) return weight;
    if ((weight.value = initializer(product, index, 2))) {
      weight.name = product.input(index);
      return weight;
    }
    const onnx::NodeProto* transpose = producedBy(product.input(index), "Transpose");
    const std::vector<std::int64_t> permutation = transpose ? integers(attributesOf(*transpose), "perm") : std::vector<std::int64_t>{};
    if (!transpose || !(permutation.empty() || permutation == std::vector<std::int64_t>{1, 0}) || soleReader(transpose, "MatMul") != &product) return weight;
    if ((weight.value = initializer(*transpose, 0, 2))) {
      weight.pytorchLayout = true;
      weight.transpose = transpose;
      weight.name = transpose->input(0);
    }
    return weight;
  }
  static std::int64_t inputsOf(const MatMulWeight& weight) { return weight.value->shape[weight.pytorchLayout ? 1 : 0]; }
  static std::int64_t outputsOf(const MatMulWeight& weight) { return weight.value->shape[weight.pytorchLayout ? 0 : 1]; }
  // PyTorch's layout [out, in].
  static HostTensor pytorchLayout(const MatMulWeight& weight) {
    return weight.pytorchLayout ? hostTensor(weight.value->shape, weight.value->values) : transposed(*weight.value);
  }
  bool constantIs(const std::string& name, const std::vector<double>& values) const {
    const OnnxConstant* value = constant(name);
    return value && value->values == values;
  }
  static bool permutes(const onnx::NodeProto* node, const std::vector<std::int64_t>& permutation) {
    return node && integers(attributesOf(*node), "perm") == permutation;
  }

  // The nodes computing `last` from `inputs` and constants (initializers and Constant nodes, which may be shared),
  // `last` left out: empty when they reach another computed tensor (a graph input) or something outside reads one of
  // them.
  std::vector<const onnx::NodeProto*> stretch(const onnx::NodeProto& last, const std::vector<std::string>& inputs) const {
    std::set<const onnx::NodeProto*> nodes{&last};
    std::vector<const onnx::NodeProto*> pending{&last};
    while (!pending.empty()) {
      const onnx::NodeProto* node = pending.back();
      pending.pop_back();
      for (const std::string& name : node->input()) {
        if (name.empty() || std::find(inputs.begin(), inputs.end(), name) != inputs.end() || constants_.count(name)) continue;
        const auto producer = producers_.find(name);
        if (producer == producers_.end()) return {};
        if (nodes.insert(producer->second).second) pending.push_back(producer->second);
      }
    }
    for (const onnx::NodeProto* node : nodes) {
      if (node == &last) continue;
      for (const std::string& name : node->output()) {
        if (name == output_) return {};
        const auto readers = readers_.find(name);
        if (readers == readers_.end()) continue;
        for (const onnx::NodeProto* reader : readers->second) {
          if (!nodes.count(reader)) return {};
        }
      }
    }
    nodes.erase(&last);
    return {nodes.begin(), nodes.end()};
  }

  // A constant, or a Cast of one: its values.
  const OnnxConstant* constantThroughCast(const std::string& name) const {
    if (const OnnxConstant* value = constant(name)) return value;
    const onnx::NodeProto* cast = producedBy(name, "Cast");
    return cast ? constant(in(*cast, 0)) : nullptr;
  }
  bool isOne(const std::string& name) const {
    const OnnxConstant* value = constantThroughCast(name);
    return value && value->elements() == 1 && value->values[0] == 1.0;
  }

  // Where(condition, −inf, zeros of a ConstantOfShape): a mask of −inf where the condition holds, 0 elsewhere.
  bool hidesWhere(const onnx::NodeProto& where) const {
    if (where.input_size() != 3) return false;
    const OnnxConstant* hidden = constantThroughCast(in(where, 1));
    const onnx::NodeProto* zeros = producedBy(in(where, 2), "ConstantOfShape");
    if (!hidden || hidden->elements() != 1 || !(std::isinf(hidden->values[0]) && hidden->values[0] < 0) || !zeros) return false;
    const auto zeroFill = attributesOf(*zeros);
    return !zeroFill.count("value") || readOnnxTensor(zeroFill.at("value")->t(), "").values == std::vector<double>{0.0};
  }

  // The scores and the padding mask of an attention with key_padding_mask, as PyTorch 1.13 exports the sum
  // baddbmm(mask, Q, Kᵀ): Add(Mul(MatMul(Q, Kᵀ), 1), Mul(Where(Cast(Reshape(Expand(Reshape(ids == pad)))), −inf, 0), 1)).
  // The MatMul and the Equal; null where the softmax reads no such sum.
  std::pair<const onnx::NodeProto*, const onnx::NodeProto*> maskedScores(const std::string& softmaxInput) const {
    const onnx::NodeProto* sum = producedBy(softmaxInput, "Add");
    if (!sum || sum->input_size() != 2) return {nullptr, nullptr};
    for (int side = 0; side < 2; ++side) {
      const onnx::NodeProto *scaledScores = producedBy(sum->input(side), "Mul"), *scaledMask = producedBy(sum->input(1 - side), "Mul");
      if (!scaledScores || !scaledMask || scaledScores->input_size() != 2 || scaledMask->input_size() != 2 || !isOne(scaledScores->input(1)) ||
          !isOne(scaledMask->input(1))) {
        continue;
      }
      const onnx::NodeProto* scores = producedBy(scaledScores->input(0), "MatMul");
      const onnx::NodeProto* where = producedBy(scaledMask->input(0), "Where");
      if (!scores || !where || !hidesWhere(*where)) continue;
      // The condition back to the Equal through the exporter's Cast, Reshape and Expand (first inputs).
      const onnx::NodeProto* step = producedBy(in(*where, 0), "Cast");
      for (const char* op : {"Reshape", "Expand", "Reshape"}) step = step ? producedBy(in(*step, 0), op) : nullptr;
      const onnx::NodeProto* equal = step ? producedBy(in(*step, 0), "Equal") : nullptr;
      if (equal && equal->input_size() == 2) return {scores, equal};
    }
    return {nullptr, nullptr};
  }

  // The head of a query, key or value: Transpose(permutation) of Reshape of a Slice; the Slice.
  const onnx::NodeProto* headSlice(const std::string& name, const std::vector<std::int64_t>& permutation) const {
    const onnx::NodeProto* transpose = producedBy(name, "Transpose");
    const onnx::NodeProto* reshape = permutes(transpose, permutation) ? producedBy(in(*transpose, 0), "Reshape") : nullptr;
    return reshape ? producedBy(in(*reshape, 0), "Slice") : nullptr;
  }

  // The exporter's third of the projection's width, u = ⌈W/3⌉ = (W + 2) / 3 with W = Shape(projected)[−1]: its tensor.
  bool isThird(const std::string& name, const std::string& projected) const {
    const onnx::NodeProto* divide = producedBy(name, "Div");
    const onnx::NodeProto* add = divide && constantIs(in(*divide, 1), {3}) ? producedBy(in(*divide, 0), "Add") : nullptr;
    const onnx::NodeProto* width = add && constantIs(in(*add, 1), {2}) ? producedBy(in(*add, 0), "Gather") : nullptr;
    const onnx::NodeProto* shape = width && constantIs(in(*width, 1), {-1}) && integer(attributesOf(*width), "axis", 0) == 0 ? producedBy(in(*width, 0), "Shape") : nullptr;
    return shape && shape->attribute_size() == 0 && in(*shape, 0) == projected;
  }

  // Q, K and V as torch.chunk(3, −1) slices them from `projected`: starts 0, u, 2u and ends u, 2u, 3u along the last
  // axis, with u its third, each a Slice of its own.
  bool chunksInOrder(const onnx::NodeProto& q, const onnx::NodeProto& k, const onnx::NodeProto& v, const std::string& projected) const {
    if (&q == &k || &k == &v || &q == &v) return false;
    const onnx::NodeProto* slices[] = {&q, &k, &v};
    std::string third;
    for (int part = 0; part < 3; ++part) {
      const onnx::NodeProto& slice = *slices[part];
      if (slice.input_size() != 4 || in(slice, 0) != projected || !(constantIs(in(slice, 3), {-1}) || constantIs(in(slice, 3), {2}))) return false;
      if (part == 0 ? !constantIs(in(slice, 1), {0}) : in(slice, 1) != in(*slices[part - 1], 2)) return false;
      const onnx::NodeProto* end = producedBy(in(slice, 2), "Mul");
      if (!end || !constantIs(in(*end, 1), {static_cast<double>(part + 1)})) return false;
      if (part == 0) third = in(*end, 0);
      if (in(*end, 0) != third) return false;
    }
    return isThird(third, projected);
  }

  // A head Reshape's target Concat(S, N·heads, E/heads), as the exporter computes it: heads in both.
  bool reshapesToHeads(const onnx::NodeProto& slice, std::int64_t heads) const {
    const onnx::NodeProto* reshape = readsFirst(&slice, soleReader(&slice, "Reshape", true));
    const onnx::NodeProto* target = reshape ? producedBy(in(*reshape, 1), "Concat") : nullptr;
    if (!target || target->input_size() != 3) return false;
    const onnx::NodeProto* rows = producedBy(in(*target, 1), "Unsqueeze");
    const onnx::NodeProto* times = rows ? producedBy(in(*rows, 0), "Mul") : nullptr;
    const onnx::NodeProto* features = producedBy(in(*target, 2), "Unsqueeze");
    const onnx::NodeProto* step = features ? producedBy(in(*features, 0), "Cast") : nullptr;
    while (step && step->op_type() == "Cast") {
      const onnx::NodeProto* before = producedBy(in(*step, 0), "Cast");
      step = before ? before : producedBy(in(*step, 0), "Div");
    }
    const double h = static_cast<double>(heads);
    return times && step && step->op_type() == "Div" && constantIs(in(*times, 1), {h}) && constantIs(in(*step, 1), {h});
  }

  // The out-projection after the heads' product `weighted`: Transpose(mergePermutation), Reshape to rows, Gemm by a
  // weight [E, E] and bias, Reshape, Transpose to batch first; each reading the one before as its input 0. The Gemm
  // and the last Transpose.
  std::pair<const onnx::NodeProto*, const onnx::NodeProto*> outProjection(const onnx::NodeProto* weighted, const std::vector<std::int64_t>& mergePermutation) const {
    const onnx::NodeProto* merged = readsFirst(weighted, soleReader(weighted, "Transpose", true));
    const onnx::NodeProto* rows = permutes(merged, mergePermutation) ? readsFirst(merged, soleReader(merged, "Reshape", true)) : nullptr;
    const onnx::NodeProto* gemm = readsFirst(rows, soleReader(rows, "Gemm", true));
    const onnx::NodeProto* split = readsFirst(gemm, soleReader(gemm, "Reshape", true));
    const onnx::NodeProto* last = readsFirst(split, soleReader(split, "Transpose", true));
    if (!permutes(last, {1, 0, 2}) || !gemm || gemm->input_size() != 3) return {nullptr, nullptr};
    const Attributes g = attributesOf(*gemm);
    if (real(g, "alpha", 1.0) != 1.0 || real(g, "beta", 1.0) != 1.0 || integer(g, "transA", 0) != 0 || !initializer(*gemm, 1, 2) || !initializer(*gemm, 2, 1)) {
      return {nullptr, nullptr};
    }
    return {gemm, last};
  }

  // The attention layer from its parts: the in-projection Add(bias, MatMul(Transpose(x), weight)) named `projected`,
  // the out-projection, the heads, and the padding mask's Equal (or none).
  std::optional<OnnxSequenceLayer> attentionLayer(const std::string& projectedName, const onnx::NodeProto& gemm, const onnx::NodeProto& last,
                                                  std::int64_t heads, const onnx::NodeProto* padding) const {
    const onnx::NodeProto* projected = producedBy(projectedName, "Add");
    if (!projected || projected->input_size() != 2) return std::nullopt;
    const int biasAt = initializers_.count(in(*projected, 0)) ? 0 : 1;
    const OnnxConstant* inBias = initializer(*projected, biasAt, 1);
    const onnx::NodeProto* product = producedBy(in(*projected, 1 - biasAt), "MatMul");
    const MatMulWeight inWeight = product ? matMulWeight(*product, 1) : MatMulWeight{};
    const onnx::NodeProto* batchSecond = product ? producedBy(in(*product, 0), "Transpose") : nullptr;
    if (!inBias || !inWeight.value || !permutes(batchSecond, {1, 0, 2})) return std::nullopt;
    const OnnxConstant &outWeight = *initializer(gemm, 1, 2), &outBias = *initializer(gemm, 2, 1);
    const std::int64_t width = inputsOf(inWeight);
    if (outputsOf(inWeight) != 3 * width || inBias->shape[0] != 3 * width || outWeight.shape != std::vector<std::int64_t>{width, width} ||
        outBias.shape[0] != width || heads < 1 || width % heads != 0) {
      return std::nullopt;
    }
    OnnxSequenceLayer found;
    found.inputs = {in(*batchSecond, 0)};
    if (padding) found.inputs.push_back(padding->output(0));
    found.last = &last;
    found.inside = stretch(last, found.inputs);
    if (found.inside.empty()) return std::nullopt;
    found.layer.kind = layerKindName(LayerKind::attention);
    found.layer.heads = static_cast<std::uint32_t>(heads);
    const std::string module = withoutSuffix(in(gemm, 1), ".out_proj.weight");
    found.nameHint = module.empty() ? "" : module + ".weight";
    const bool outTransposed = integer(attributesOf(gemm), "transB", 0) != 0;
    found.weights = {{".in_proj_weight", pytorchLayout(inWeight)},
                     {".in_proj_bias", hostTensor(inBias->shape, inBias->values)},
                     {".out_proj.weight", outTransposed ? hostTensor(outWeight.shape, outWeight.values) : transposed(outWeight)},
                     {".out_proj.bias", hostTensor(outBias.shape, outBias.values)}};
    return found;
  }

  // The Softmax along the last axis (its axis given before opset 13, when a missing one means everything after axis 1)
  // and the MatMul reading its probabilities as input 0.
  const onnx::NodeProto* probabilitiesProduct(const onnx::NodeProto& softmax) const {
    const Attributes softmaxAttributes = attributesOf(softmax);
    const std::int64_t axis = integer(softmaxAttributes, "axis", -1);
    if ((opset_ < 13 && !softmaxAttributes.count("axis")) || (axis != -1 && axis != 2 && axis != 3)) return nullptr;
    const onnx::NodeProto* weighted = soleReader(&softmax, "MatMul");
    return weighted && in(*weighted, 0) == softmax.output(0) && weighted->input_size() == 2 ? weighted : nullptr;
  }

  // As PyTorch 1.x exports nn.MultiheadAttention: torch.chunk's three Slices of the projection, heads [N·H, S, D], Q
  // divided by √D, the heads merged by Transpose [1, 0, 2].
  std::optional<OnnxSequenceLayer> attention(const onnx::NodeProto& softmax) const {
    const onnx::NodeProto* weighted = probabilitiesProduct(softmax);
    const auto [maskedScoreProduct, padding] = maskedScores(in(softmax, 0));
    const onnx::NodeProto* scores = padding ? maskedScoreProduct : producedBy(in(softmax, 0), "MatMul");
    if (!weighted || !scores || scores->input_size() != 2 || (integer(attributesOf(softmax), "axis", -1) == 3)) return std::nullopt;
    const auto [gemm, last] = outProjection(weighted, {1, 0, 2});
    if (!gemm) return std::nullopt;
    // Before: Q scaled by 1/√D, the three heads sliced from one in-projection of Transpose(x).
    const onnx::NodeProto* scaled = producedBy(in(*scores, 0), "Div");
    const bool divided = scaled != nullptr;
    if (!scaled) scaled = producedBy(in(*scores, 0), "Mul");
    const OnnxConstant* factor = scaled ? constant(in(*scaled, 1)) : nullptr;
    if (!factor || factor->elements() != 1 || !(factor->values[0] > 0)) return std::nullopt;
    const onnx::NodeProto* q = headSlice(in(*scaled, 0), {1, 0, 2});
    const onnx::NodeProto* k = headSlice(in(*scores, 1), {1, 2, 0});
    const onnx::NodeProto* v = headSlice(in(*weighted, 1), {1, 0, 2});
    if (!q || !k || !v || !chunksInOrder(*q, *k, *v, in(*q, 0))) return std::nullopt;
    // The scale gives D (√D as the float PyTorch divides by), the head Reshapes the heads: they must agree.
    const std::int64_t width = initializer(*gemm, 1, 2)->shape[0];
    const double scale = factor->values[0], features = divided ? scale * scale : 1 / (scale * scale);
    const auto headFeatures = static_cast<std::int64_t>(std::llround(features));
    if (!(std::abs(features - static_cast<double>(headFeatures)) <= 1e-6 * features) || headFeatures < 1 || width % headFeatures != 0) return std::nullopt;
    const std::int64_t heads = width / headFeatures;
    if (!reshapesToHeads(*q, heads) || !reshapesToHeads(*k, heads) || !reshapesToHeads(*v, heads)) return std::nullopt;
    return attentionLayer(in(*q, 0), *gemm, *last, heads, padding);
  }

  // One head operand as PyTorch 2.x exports it: Reshape to [N, H, S, D] of Transpose [1, 0, 2] of Reshape to
  // [S, N·H, D] of Gather(index `part`, axis 0) of the projection unflattened to [3, S, N, E] (Reshape, Unsqueeze,
  // Transpose [3, 1, 2, 0, 4], Squeeze). The Reshape to [N, H, S, D] and the Reshape that unflattens the projection.
  std::pair<const onnx::NodeProto*, const onnx::NodeProto*> chunkedHead(const std::string& name, int part) const {
    const onnx::NodeProto* heads = producedBy(name, "Reshape");
    const onnx::NodeProto* transpose = heads ? producedBy(in(*heads, 0), "Transpose") : nullptr;
    const onnx::NodeProto* rows = permutes(transpose, {1, 0, 2}) ? producedBy(in(*transpose, 0), "Reshape") : nullptr;
    const onnx::NodeProto* gather = rows ? producedBy(in(*rows, 0), "Gather") : nullptr;
    if (!gather || gather->input_size() != 2 || integer(attributesOf(*gather), "axis", 0) != 0) return {nullptr, nullptr};
    const OnnxConstant* index = constant(in(*gather, 1));
    if (!index || !index->shape.empty() || index->values != std::vector<double>{static_cast<double>(part)}) return {nullptr, nullptr};
    const onnx::NodeProto* squeeze = producedBy(in(*gather, 0), "Squeeze");
    const onnx::NodeProto* unflattenedAxes = squeeze ? producedBy(in(*squeeze, 0), "Transpose") : nullptr;
    const onnx::NodeProto* unsqueeze = permutes(unflattenedAxes, {3, 1, 2, 0, 4}) ? producedBy(in(*unflattenedAxes, 0), "Unsqueeze") : nullptr;
    const onnx::NodeProto* unflatten = unsqueeze ? producedBy(in(*unsqueeze, 0), "Reshape") : nullptr;
    return unflatten ? std::make_pair(heads, unflatten) : std::make_pair(nullptr, nullptr);
  }

  // As PyTorch 2.x exports nn.MultiheadAttention: the projection unflattened to [3, S, N, E] and its Q, K and V
  // gathered, heads [N, H, S, D], Q and Kᵀ each multiplied by the fourth root of 1/D, a padding mask added to the
  // scores, the heads merged by Transpose [2, 0, 1, 3]. H is the second entry of Q's Reshape target.
  std::optional<OnnxSequenceLayer> attentionChunked(const onnx::NodeProto& softmax) const {
    const onnx::NodeProto* weighted = probabilitiesProduct(softmax);
    const onnx::NodeProto* padding = nullptr;
    const onnx::NodeProto* scores = producedBy(in(softmax, 0), "MatMul");
    if (const onnx::NodeProto* sum = scores ? nullptr : producedBy(in(softmax, 0), "Add"); sum && sum->input_size() == 2) {
      for (int side = 0; side < 2 && !scores; ++side) {
        const onnx::NodeProto* product = producedBy(in(*sum, side), "MatMul");
        const onnx::NodeProto* mask = product ? keyPaddingMask(in(*sum, 1 - side)) : nullptr;
        if (mask) std::tie(scores, padding) = std::make_pair(product, mask);
      }
    }
    // The scores [N, H, S, S] normalised along the keys alone.
    const std::int64_t axis = integer(attributesOf(softmax), "axis", -1);
    if (!weighted || !scores || scores->input_size() != 2 || (axis != -1 && axis != 3)) return std::nullopt;
    const auto [gemm, last] = outProjection(weighted, {2, 0, 1, 3});
    if (!gemm) return std::nullopt;
    const onnx::NodeProto* scaledQ = producedBy(in(*scores, 0), "Mul");
    const onnx::NodeProto* scaledK = producedBy(in(*scores, 1), "Mul");
    const onnx::NodeProto* keysTransposed = scaledK ? producedBy(in(*scaledK, 0), "Transpose") : nullptr;
    if (!scaledQ || !permutes(keysTransposed, {0, 1, 3, 2})) return std::nullopt;
    const auto [q, unflatten] = chunkedHead(in(*scaledQ, 0), 0);
    const auto [k, kUnflatten] = chunkedHead(in(*keysTransposed, 0), 1);
    const auto [v, vUnflatten] = chunkedHead(in(*weighted, 1), 2);
    if (!q || !k || !v || unflatten != kUnflatten || unflatten != vUnflatten) return std::nullopt;
    const std::int64_t heads = headsOf(*q);
    if (heads < 1 || headsOf(*k) != heads || headsOf(*v) != heads) return std::nullopt;
    const std::int64_t width = initializer(*gemm, 1, 2)->shape[0];
    if (width % heads != 0 || !scalesByFourthRoot(in(*scaledQ, 1), q->output(0), width / heads) ||
        !scalesByFourthRoot(in(*scaledK, 1), q->output(0), width / heads)) {
      return std::nullopt;
    }
    return attentionLayer(in(*unflatten, 0), *gemm, *last, heads, padding);
  }

  // H of a head Reshape to [N, H, S, D]: its target's second entry, a constant (folded) or an Unsqueeze of one; 0 where
  // it is neither.
  std::int64_t headsOf(const onnx::NodeProto& reshape) const {
    const onnx::NodeProto* target = producedBy(in(reshape, 1), "Concat");
    if (!target || target->input_size() != 4) return 0;
    const onnx::NodeProto* unsqueeze = producedBy(in(*target, 1), "Unsqueeze");
    const OnnxConstant* heads = constant(unsqueeze ? in(*unsqueeze, 0) : in(*target, 1));
    if (!heads || heads->elements() != 1 || !(heads->values[0] >= 1 && heads->values[0] <= 4096) || heads->values[0] != std::floor(heads->values[0])) return 0;
    return static_cast<std::int64_t>(heads->values[0]);
  }

  // The factor PyTorch 2.x multiplies Q and Kᵀ by: (1/√D)^½ computed from Q's last dimension, Sqrt(Cast(Div(1,
  // Sqrt(Cast(Slice(Shape(heads), −1)))))), or that constant folded.
  bool scalesByFourthRoot(const std::string& name, const std::string& heads, std::int64_t features) const {
    if (const OnnxConstant* folded = constant(name)) {
      const double wanted = std::pow(static_cast<double>(features), -0.25);
      return folded->elements() == 1 && std::abs(folded->values[0] - wanted) <= 1e-6 * wanted;
    }
    const onnx::NodeProto* root = producedBy(name, "Sqrt");
    const onnx::NodeProto* inverse = root ? producedBy(in(*root, 0), "Cast") : nullptr;
    const onnx::NodeProto* divide = inverse ? producedBy(in(*inverse, 0), "Div") : nullptr;
    if (!divide || !constantIs(in(*divide, 0), {1.0})) return false;
    const onnx::NodeProto* sqrtFeatures = producedBy(in(*divide, 1), "Sqrt");
    const onnx::NodeProto* features64 = sqrtFeatures ? producedBy(in(*sqrtFeatures, 0), "Cast") : nullptr;
    const onnx::NodeProto* last = features64 ? producedBy(in(*features64, 0), "Slice") : nullptr;
    const onnx::NodeProto* shape = last && constantIs(in(*last, 1), {-1}) ? producedBy(in(*last, 0), "Shape") : nullptr;
    return shape && shape->attribute_size() == 0 && in(*shape, 0) == heads;
  }

  // The key padding mask added to the scores as PyTorch 2.x exports it: Reshape, Expand and Reshapes (first inputs) of
  // Where(Cast(ids == pad), −inf, zeros). The Equal.
  const onnx::NodeProto* keyPaddingMask(const std::string& name) const {
    const onnx::NodeProto* step = producedBy(name, "Reshape");
    for (const char* op : {"Reshape", "Expand", "Reshape"}) step = step ? producedBy(in(*step, 0), op) : nullptr;
    const onnx::NodeProto* where = step ? producedBy(in(*step, 0), "Where") : nullptr;
    if (!where || !hidesWhere(*where)) return nullptr;
    const onnx::NodeProto* cast = producedBy(in(*where, 0), "Cast");
    const onnx::NodeProto* equal = cast ? producedBy(in(*cast, 0), "Equal") : nullptr;
    return equal && equal->input_size() == 2 ? equal : nullptr;
  }

  std::optional<OnnxSequenceLayer> linear(const onnx::NodeProto& product) const {
    const MatMulWeight weight = matMulWeight(product, 1);
    if (!weight.value || product.input_size() != 2 || constants_.count(product.input(0))) return std::nullopt;
    const std::int64_t outputs = outputsOf(weight);
    if (outputs < 1 || outputs > (1 << 16)) return std::nullopt;
    OnnxSequenceLayer found;
    found.inputs = {product.input(0)};
    found.last = &product;
    if (weight.transpose) found.inside = {weight.transpose};
    const OnnxConstant* bias = nullptr;
    if (const onnx::NodeProto* add = soleReader(&product, "Add"); add && add->input_size() == 2) {
      const int biasAt = add->input(0) == product.output(0) ? 1 : 0;
      bias = initializer(*add, biasAt, 1);
      if (bias && bias->shape[0] == outputs) {
        found.last = add;
        found.inside.push_back(&product);
        const std::string module = withoutSuffix(add->input(biasAt), ".bias");
        if (!module.empty()) found.nameHint = module + ".weight";
      } else {
        bias = nullptr;
      }
    }
    if (found.nameHint.empty()) found.nameHint = weight.name;
    found.layer.kind = layerKindName(LayerKind::linear);
    found.layer.outputs = static_cast<std::uint32_t>(outputs);
    found.weights = {{".weight", pytorchLayout(weight)},
                     {".bias", hostTensor({outputs}, bias ? bias->values : std::vector<double>(static_cast<std::size_t>(outputs), 0.0))}};
    return found;
  }

  std::optional<OnnxSequenceLayer> tokens(const onnx::NodeProto& transpose) const {
    const onnx::NodeProto* reshape = producedBy(in(transpose, 0), "Reshape");
    if (!permutes(&transpose, {0, 2, 1}) || !reshape || soleReader(reshape, "Transpose") != &transpose || reshape->input_size() != 2) return std::nullopt;
    const std::string& x = reshape->input(0);
    // The target [N, C, -1]: computed as Concat(Shape(x)[0:2], [-1]), or a constant [0, C, -1] whose C is the
    // channels of the convolution that makes x.
    const onnx::NodeProto* concat = producedBy(reshape->input(1), "Concat");
    const onnx::NodeProto* slice = concat && concat->input_size() == 2 ? producedBy(concat->input(0), "Slice") : nullptr;
    const onnx::NodeProto* shape = slice && slice->input_size() >= 3 ? producedBy(slice->input(0), "Shape") : nullptr;
    bool flattened = shape && in(*shape, 0) == x && shape->attribute_size() == 0 && constantIs(slice->input(1), {0}) &&
                     constantIs(slice->input(2), {2}) && (slice->input_size() < 4 || constantIs(slice->input(3), {0})) &&
                     slice->input_size() < 5 && constantIs(concat->input(1), {-1});
    if (const OnnxConstant* target = constant(reshape->input(1)); !flattened && target && target->values.size() == 3) {
      const onnx::NodeProto* conv = producedBy(x, "Conv");
      const OnnxConstant* weight = conv ? initializer(*conv, 1, 4) : nullptr;
      flattened = weight && target->values[0] == 0 && target->values[1] == static_cast<double>(weight->shape[0]) && target->values[2] == -1;
    }
    if (!flattened) return std::nullopt;
    OnnxSequenceLayer found;
    found.inputs = {x};
    found.last = &transpose;
    found.inside = stretch(transpose, found.inputs);
    if (found.inside.empty()) return std::nullopt;
    found.layer.kind = layerKindName(LayerKind::tokens);
    return found;
  }

  std::optional<OnnxSequenceLayer> position(const onnx::NodeProto& add) const {
    if (add.input_size() != 2) return std::nullopt;
    const int weightAt = initializers_.count(add.input(0)) ? 0 : 1;
    const std::string& x = add.input(1 - weightAt);
    const OnnxConstant* weight = initializers_.count(add.input(weightAt)) ? &initializers_.at(add.input(weightAt)) : nullptr;
    if (!weight || constants_.count(x)) return std::nullopt;
    std::vector<std::int64_t> shape = weight->shape;
    if (shape.size() == 3 && shape[0] == 1) shape.erase(shape.begin());
    // A table of at least 2 × 2: a [C, 1] or [1, E] weight broadcasts as a bias does, which no position layer is.
    if (shape.size() != 2 || shape[0] < 2 || shape[1] < 2) return std::nullopt;
    OnnxSequenceLayer found;
    found.inputs = {x};
    found.last = &add;
    found.layer.kind = layerKindName(LayerKind::position);
    const std::string& name = add.input(weightAt);
    found.nameHint = withoutSuffix(name, ".weight").empty() ? name + ".weight" : name;
    found.weights = {{".weight", hostTensor(shape, weight->values)}};
    return found;
  }

  const onnx::GraphProto& graph_;
  std::int64_t opset_;
  const OnnxReaders& readers_;
  const std::map<std::string, OnnxConstant>& initializers_;
  std::string output_;
  std::map<std::string, OnnxConstant> constants_;  // the initializers and the Constant nodes' values
  std::map<std::string, const onnx::NodeProto*> producers_;
  std::set<const onnx::NodeProto*> claimed_;
  std::vector<OnnxSequenceLayer> found_;
};

}  // namespace

std::vector<OnnxSequenceLayer> findSequenceLayers(const onnx::GraphProto& graph, std::int64_t opset, const OnnxReaders& readers,
                                                  const std::map<std::string, OnnxConstant>& initializers,
                                                  const std::string& output, const std::string& path) {
  return Finder(graph, opset, readers, initializers, output, path).run();
}

}  // namespace glnet
