// The importer's indexing ops (OnnxImporter.h): Gather, GatherND, ScatterND, Trilu, Einsum and the folds of Slice and
// Transpose, on
// the GPU where an input is computed (graph/IndexingOps.cpp) and folded where all are constants. A folded op computes
// its value with the graph op's own float64 reference, so the two cannot disagree.
#include "importer/OnnxImporter.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <numeric>

namespace glnet::onnximport {

namespace {

Shape shapeOfConstant(const Constant& c) { return Shape(c.shape.begin(), c.shape.end()); }

}  // namespace

Constant Importer::foldWithReference(const onnx::NodeProto& node, const std::shared_ptr<const Op>& op, const std::vector<const Constant*>& in,
                                     bool integer, std::size_t largest) const {
  std::vector<HostTensor64> tensors;
  std::vector<Shape> shapes;
  for (const Constant* c : in) {
    tensors.push_back({&c->values, shapeOfConstant(*c)});
    shapes.push_back(tensors.back().shape);
  }
  Constant result;
  try {
    const Shape out = op->outputShape(shapes);
    if (elementCount(out) > largest) refuse(node, "a folded constant of more than " + std::to_string(largest) + " elements");
    result.shape.assign(out.begin(), out.end());
    result.values = op->referenceForward(tensors);
  } catch (const Error& error) {
    refuse(node, error.what());
  }
  result.integer = integer;
  return result;
}

std::vector<std::vector<std::int64_t>> Importer::checkedIndices(const onnx::NodeProto& node, const Constant& indices,
                                                                const std::vector<std::int64_t>& dims) const {
  std::vector<std::vector<std::int64_t>> rows;
  const std::size_t depth = dims.size();
  for (std::size_t i = 0; i < indices.values.size(); ++i) {
    if (i % depth == 0) rows.emplace_back();
    std::int64_t index = whole(node, indices.values[i]);
    const std::int64_t d = dims[i % depth];
    if (index < -d || index >= d) refuse(node, "index " + std::to_string(index) + " is outside an axis of " + std::to_string(d));
    rows.back().push_back(index < 0 ? index + d : index);
  }
  return rows;
}

std::vector<std::int64_t> Importer::gatherNdDims(const onnx::NodeProto& node, const std::vector<std::int64_t>& data,
                                                 const std::vector<std::int64_t>& indices, std::int64_t batchDims) const {
  const auto rank = static_cast<std::int64_t>(data.size());
  if (batchDims < 0 || indices.empty() || batchDims >= static_cast<std::int64_t>(indices.size()) || batchDims >= rank) {
    refuse(node, "batch_dims " + std::to_string(batchDims) + " does not fit data " + describe(data) + " and indices " + describe(indices));
  }
  const std::int64_t depth = indices.back();
  if (depth < 1 || batchDims + depth > rank) refuse(node, "indices " + describe(indices) + " do not index data " + describe(data));
  return {data.begin() + batchDims, data.begin() + batchDims + depth};
}

std::vector<Importer::AxisSlice> Importer::sliceSpec(const onnx::NodeProto& node, const Attributes& a, const std::vector<std::int64_t>& shape) const {
  const auto list = [&](int index, const std::string& attribute) {
    if (result_.opset < 10) return integers(a, attribute);
    std::vector<std::int64_t> values;
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
  for (const std::int64_t d : shape) slices.push_back({0, 1, static_cast<std::uint32_t>(d)});
  std::set<std::int64_t> sliced;
  for (std::size_t i = 0; i < starts.size(); ++i) {
    const std::int64_t axis = normalizedAxis(node, sliceAxes[i], shape.size());
    if (!sliced.insert(axis).second) refuse(node, "axis " + std::to_string(axis) + " is listed twice");
    if (steps[i] == 0) refuse(node, "a step of 0");
    slices[static_cast<std::size_t>(axis)] = clampedSlice(shape[static_cast<std::size_t>(axis)], starts[i], ends[i], steps[i]);
  }
  return slices;
}

Constant Importer::foldSlice(const onnx::NodeProto& node, const Attributes& a) const {
  const Constant& data = input(node, 0);
  const std::vector<AxisSlice> slices = sliceSpec(node, a, data.shape);
  Constant result{{}, {}, data.integer};
  for (const AxisSlice& s : slices) result.shape.push_back(s.count);
  const std::size_t count = result.elements();
  const std::vector<std::size_t> in = strides(data.shape), out = strides(result.shape);
  result.values.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    std::int64_t at = 0;
    for (std::size_t k = 0; k < slices.size(); ++k) {
      const auto c = static_cast<std::int64_t>(i / out[k] % static_cast<std::size_t>(result.shape[k]));
      at += (slices[k].start + c * slices[k].step) * static_cast<std::int64_t>(in[k]);
    }
    result.values.push_back(data.values[static_cast<std::size_t>(at)]);
  }
  return result;
}

std::vector<std::uint32_t> Importer::permutation(const Attributes& a, std::size_t rank) {
  std::vector<std::uint32_t> list;
  for (const std::int64_t p : integers(a, "perm")) list.push_back(static_cast<std::uint32_t>(std::clamp<std::int64_t>(p, 0, 1 << 20)));
  if (!a.count("perm")) {
    for (std::size_t i = rank; i-- > 0;) list.push_back(static_cast<std::uint32_t>(i));
  }
  return list;
}

std::optional<Constant> Importer::foldIndexing(const onnx::NodeProto& node, const Attributes& a) {
  const std::string& op = node.op_type();
  if (op == "Slice") return foldSlice(node, a);
  if (op == "Gather") {
    const Constant& data = input(node, 0);
    const std::size_t axis = static_cast<std::size_t>(normalizedAxis(node, integer(a, "axis", 0), data.shape.size()));
    checkedIndices(node, input(node, 1), {data.shape[axis]});
    return foldWithReference(node, gatherOp(static_cast<std::uint32_t>(axis)), {&data, &input(node, 1)}, data.integer);
  }
  if (op == "GatherND") {
    const Constant &data = input(node, 0), &indices = input(node, 1);
    const std::int64_t batchDims = integer(a, "batch_dims", 0);
    checkedIndices(node, indices, gatherNdDims(node, data.shape, indices.shape, batchDims));
    return foldWithReference(node, gatherNdOp(static_cast<std::uint32_t>(batchDims)), {&data, &indices}, data.integer);
  }
  if (op == "ScatterND") {
    checkScatterNd(node, a, false);
    const Constant& data = input(node, 0);
    return foldWithReference(node, scatterNdOp(), {&data, &input(node, 1), &input(node, 2)}, data.integer && input(node, 2).integer);
  }
  if (op == "Trilu") {
    const Constant& data = input(node, 0);
    return foldWithReference(node, triluOp(integer(a, "upper", 1) != 0, triluDiagonal(node)), {&data}, data.integer);
  }
  if (op == "Einsum") return foldEinsum(node, a);
  // A layout change of a constant (Swin's attention mask in torch.export's graph is sliced and transposed; GPT-2's
  // tied embedding transposed as its LM head's weight, the size of a weight).
  if (op == "Transpose") {
    const Constant& data = input(node, 0);
    return foldWithReference(node, transposeOp(permutation(a, data.shape.size())), {&data}, data.integer, largestTransposedConstant);
  }
  return std::nullopt;
}

void Importer::importGather(const onnx::NodeProto& node, const Attributes& a) {
  const Value& data = operand(node, 0);
  const Value& indices = operand(node, 1);
  const std::vector<std::int64_t> dataShape = data.constant ? data.host.shape : std::vector<std::int64_t>(shapeOf(data.tensor).begin(), shapeOf(data.tensor).end());
  const auto axis = static_cast<std::size_t>(normalizedAxis(node, integer(a, "axis", 0), dataShape.size()));
  // One constant index of a computed tensor is a slice of it (ViT's class token, x[:, 0]): a copy, or a view.
  if (!data.constant && indices.constant && indices.host.values.size() == 1) {
    const std::int64_t index = checkedIndices(node, indices.host, {dataShape[axis]})[0][0];
    const Shape shape = shapeOf(data.tensor);
    std::vector<AxisSlice> slices;
    for (const std::uint32_t d : shape) slices.push_back({0, 1, d});
    slices[axis] = {index, 1, 1};
    const Tensor part = sliceTensor(node, data.tensor, slices, nameOf(node));
    Shape out(shape.begin(), shape.begin() + static_cast<std::ptrdiff_t>(axis));
    out.insert(out.end(), indices.host.shape.begin(), indices.host.shape.end());
    out.insert(out.end(), shape.begin() + static_cast<std::ptrdiff_t>(axis) + 1, shape.end());
    if (out == shape) {
      define(node, part, "slice");
    } else {
      apply(node, reshapeOp(out), {part}, "slice");
    }
    return;
  }
  // Constant indices are checked here; computed ones give NaN where they fall outside the axis.
  if (indices.constant) checkedIndices(node, indices.host, {dataShape[axis]});
  const Tensor x = tensorOrConstant(node, 0), i = tensorOrConstant(node, 1);
  apply(node, gatherOp(static_cast<std::uint32_t>(axis)), {x, i}, data.constant ? "embedding" : "gather");
}

void Importer::importGatherND(const onnx::NodeProto& node, const Attributes& a) {
  const Tensor x = tensorOrConstant(node, 0), i = tensorOrConstant(node, 1);
  const Shape &dataShape = shapeOf(x), &indexShape = shapeOf(i);
  const std::int64_t batchDims = integer(a, "batch_dims", 0);
  const std::vector<std::int64_t> dims = gatherNdDims(node, {dataShape.begin(), dataShape.end()}, {indexShape.begin(), indexShape.end()}, batchDims);
  if (const Value& indices = operand(node, 1); indices.constant) checkedIndices(node, indices.host, dims);
  apply(node, gatherNdOp(static_cast<std::uint32_t>(batchDims)), {x, i}, "gather nd");
}

void Importer::checkScatterNd(const onnx::NodeProto& node, const Attributes& a, bool onGpu) const {
  if (a.count("reduction") && a.at("reduction")->s() != "none") refuse(node, "reduction " + a.at("reduction")->s() + " is not supported (none only)");
  const Value& data = operand(node, 0);
  const Value& indices = operand(node, 1);
  if (!indices.constant) refuse(node, "the indices must be constants: a computed index could write outside the tensor or twice to one place");
  const std::vector<std::int64_t> dataShape = data.constant ? data.host.shape : std::vector<std::int64_t>(shapeOf(data.tensor).begin(), shapeOf(data.tensor).end());
  const std::vector<std::int64_t>& indexShape = indices.host.shape;
  if (indexShape.empty() || indexShape.back() < 1 || indexShape.back() > static_cast<std::int64_t>(dataShape.size())) {
    refuse(node, "indices " + describe(indexShape) + " do not index data " + describe(dataShape));
  }
  const std::vector<std::vector<std::int64_t>> rows =
      checkedIndices(node, indices.host, {dataShape.begin(), dataShape.begin() + indexShape.back()});
  // The GPU writes rows in any order, so two rows at one place would leave either (ONNX leaves it undefined).
  if (onGpu && std::set<std::vector<std::int64_t>>(rows.begin(), rows.end()).size() != rows.size()) refuse(node, "two index rows name the same place");
}

void Importer::importScatterND(const onnx::NodeProto& node, const Attributes& a) {
  checkScatterNd(node, a, true);
  apply(node, scatterNdOp(), {tensorOrConstant(node, 0), tensorOrConstant(node, 1), tensorOrConstant(node, 2)}, "scatter nd");
}

std::int64_t Importer::triluDiagonal(const onnx::NodeProto& node) const {
  if (node.input_size() < 2 || node.input(1).empty()) return 0;
  const Constant& k = input(node, 1);
  if (k.values.size() != 1) refuse(node, "k must hold one value");
  return whole(node, k.values[0]);
}

void Importer::importTrilu(const onnx::NodeProto& node, const Attributes& a) {
  apply(node, triluOp(integer(a, "upper", 1) != 0, triluDiagonal(node)), {tensorInput(node, 0)}, "trilu");
}

Importer::Einsum Importer::parseEinsum(const onnx::NodeProto& node, const Attributes& a) const {
  const std::string given = a.count("equation") ? a.at("equation")->s() : "";
  std::string text;
  for (const char c : given) {
    if (c != ' ') text += c;
  }
  const auto refuseEquation = [&](const std::string& why) { refuse(node, "equation '" + given + "': " + why); };
  Einsum e;
  e.equation = given;
  const std::size_t arrow = text.find("->");
  std::string left = text.substr(0, arrow);
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = left.find(',', start);
    e.inputs.push_back(left.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (arrow != std::string::npos) {
    e.output = text.substr(arrow + 2);
  } else {
    // Implicit output: the letters seen once, in alphabetical order.
    std::map<char, int> seen;
    for (const std::string& term : e.inputs) {
      for (const char c : term) ++seen[c];
    }
    for (const auto& [c, n] : seen) {
      if (n == 1) e.output += c;
    }
  }
  if (static_cast<int>(e.inputs.size()) != node.input_size()) refuseEquation(std::to_string(e.inputs.size()) + " terms for " + std::to_string(node.input_size()) + " inputs");
  for (const std::string& term : e.inputs) {
    for (const char c : term) {
      if (!std::isalpha(static_cast<unsigned char>(c))) refuseEquation("glnet reads letters only (no ellipsis)");
    }
  }
  for (const char c : e.output) {
    if (!std::isalpha(static_cast<unsigned char>(c)) || std::count(e.output.begin(), e.output.end(), c) != 1) refuseEquation("the output's letters must be distinct letters");
    if (std::none_of(e.inputs.begin(), e.inputs.end(), [c](const std::string& t) { return t.find(c) != std::string::npos; })) refuseEquation(std::string("output letter ") + c + " is in no input");
  }
  return e;
}

Constant Importer::foldEinsum(const onnx::NodeProto& node, const Attributes& a) const {
  const Einsum e = parseEinsum(node, a);
  std::map<char, std::int64_t> sizes;
  bool integral = true;
  for (std::size_t t = 0; t < e.inputs.size(); ++t) {
    const Constant& c = input(node, static_cast<int>(t));
    integral = integral && c.integer;
    if (c.shape.size() != e.inputs[t].size()) refuse(node, "term " + e.inputs[t] + " does not fit input " + describe(c.shape));
    for (std::size_t k = 0; k < c.shape.size(); ++k) {
      const auto [at, added] = sizes.emplace(e.inputs[t][k], c.shape[k]);
      if (!added && at->second != c.shape[k]) refuse(node, std::string("letter ") + e.inputs[t][k] + " has sizes " + std::to_string(at->second) + " and " + std::to_string(c.shape[k]));
    }
  }
  std::vector<char> letters;
  std::vector<std::int64_t> extents;
  for (const auto& [c, n] : sizes) {
    letters.push_back(c);
    extents.push_back(n);
  }
  const std::size_t loops = boundedProduct(node, extents.begin(), extents.end());
  Constant result{{}, {}, integral};
  for (const char c : e.output) result.shape.push_back(sizes[c]);
  result.values.assign(result.elements(), 0.0);
  // Per letter, its stride in each input and in the output.
  const auto stridesFor = [&](const std::string& term, const std::vector<std::int64_t>& shape) {
    std::vector<std::size_t> own = strides(shape), byLetter(letters.size(), 0);
    for (std::size_t k = 0; k < term.size(); ++k) byLetter[static_cast<std::size_t>(std::find(letters.begin(), letters.end(), term[k]) - letters.begin())] += own[k];
    return byLetter;
  };
  std::vector<std::vector<std::size_t>> inStrides;
  for (std::size_t t = 0; t < e.inputs.size(); ++t) inStrides.push_back(stridesFor(e.inputs[t], input(node, static_cast<int>(t)).shape));
  const std::vector<std::size_t> outStrides = stridesFor(e.output, result.shape);
  const std::vector<std::size_t> loopStrides = strides(extents);
  for (std::size_t i = 0; i < loops; ++i) {
    double term = 1;
    std::size_t out = 0;
    std::vector<std::size_t> at(e.inputs.size(), 0);
    for (std::size_t l = 0; l < letters.size(); ++l) {
      const std::size_t c = i / loopStrides[l] % static_cast<std::size_t>(extents[l]);
      out += c * outStrides[l];
      for (std::size_t t = 0; t < e.inputs.size(); ++t) at[t] += c * inStrides[t][l];
    }
    for (std::size_t t = 0; t < e.inputs.size(); ++t) term *= input(node, static_cast<int>(t)).values[at[t]];
    result.values[out] += term;
  }
  return result;
}

// Two operands, each letter once per term, every letter of an input in the other input or in the output: a batched
// product. Letters in both inputs and the output are its batch, in both inputs only its sum, in one input and the
// output its rows (the first) or columns (the second). Each operand is transposed to [batch, rows or columns, sum]
// order where it is not so already and viewed as 3-D; the product [batch, rows, columns] is viewed in the letters'
// sizes and transposed to the output's order.
void Importer::importEinsum(const onnx::NodeProto& node, const Attributes& a) {
  const Einsum e = parseEinsum(node, a);
  if (importsEinsumAttention(node, e)) return;
  const auto refuseEquation = [&](const std::string& why) { refuse(node, "equation '" + e.equation + "' " + why); };
  if (e.inputs.size() != 2) refuseEquation("is not supported on the GPU: glnet runs products of two operands");
  const Tensor operands[2] = {tensorOrConstant(node, 0), tensorOrConstant(node, 1)};
  std::map<char, std::uint32_t> sizes;
  for (int t = 0; t < 2; ++t) {
    const std::string& term = e.inputs[static_cast<std::size_t>(t)];
    const Shape& shape = shapeOf(operands[t]);
    if (shape.size() != term.size()) refuseEquation("does not fit input " + glnet::describe(shape));
    for (std::size_t k = 0; k < term.size(); ++k) {
      if (std::count(term.begin(), term.end(), term[k]) != 1) refuseEquation("is not supported on the GPU: a letter repeats in one term (a diagonal)");
      const auto [at, added] = sizes.emplace(term[k], shape[k]);
      if (!added && at->second != shape[k]) refuseEquation(std::string("gives letter ") + term[k] + " two sizes (glnet does not broadcast in Einsum)");
    }
  }
  const std::string &first = e.inputs[0], &second = e.inputs[1];
  const auto in = [](const std::string& s, char c) { return s.find(c) != std::string::npos; };
  std::string batch, rows, columns, sum;
  for (const char c : e.output) {
    if (in(first, c) && in(second, c)) batch += c;
  }
  for (const char c : first) {
    if (in(second, c) && !in(e.output, c)) sum += c;
    else if (!in(second, c) && in(e.output, c)) rows += c;
    else if (!in(second, c)) refuseEquation("is not supported on the GPU: it sums a letter of one operand alone");
  }
  for (const char c : second) {
    if (!in(first, c) && in(e.output, c)) columns += c;
    else if (!in(first, c)) refuseEquation("is not supported on the GPU: it sums a letter of one operand alone");
  }
  const auto extent = [&](const std::string& letters) {
    std::uint32_t n = 1;
    for (const char c : letters) n *= sizes[c];
    return n;
  };
  // The operand transposed to `order` where it is not so already, then viewed as `view`.
  const auto arranged = [&](Tensor x, const std::string& term, const std::string& order, const Shape& view, const std::string& suffix) {
    std::vector<std::uint32_t> permutation;
    for (const char c : order) permutation.push_back(static_cast<std::uint32_t>(term.find(c)));
    std::vector<std::uint32_t> identity(permutation.size());
    std::iota(identity.begin(), identity.end(), 0u);
    try {
      if (permutation != identity) x = graph_.apply(transposeOp(permutation), {x}, nameOf(node) + suffix);
      return graph_.apply(reshapeOp(view), {x}, nameOf(node) + suffix + " view");
    } catch (const Error& error) {
      refuse(node, error.what());
    }
  };
  const std::uint32_t b = extent(batch), m = extent(rows), n = extent(columns), k = extent(sum);
  const Tensor left = arranged(operands[0], first, batch + rows + sum, {b, m, k}, " a");
  const Tensor right = arranged(operands[1], second, batch + sum + columns, {b, k, n}, " b");
  Tensor product;
  try {
    product = graph_.apply(batchedMatMulOp(), {left, right}, nameOf(node) + " product");
  } catch (const Error& error) {
    refuse(node, error.what());
  }
  const std::string order = batch + rows + columns;
  Shape lettersShape;
  for (const char c : order) lettersShape.push_back(sizes[c]);
  std::vector<std::uint32_t> permutation;
  for (const char c : e.output) permutation.push_back(static_cast<std::uint32_t>(order.find(c)));
  const Tensor shaped = arranged(product, order, order, lettersShape, " shaped");
  std::vector<std::uint32_t> identity(permutation.size());
  std::iota(identity.begin(), identity.end(), 0u);
  if (permutation == identity) {
    define(node, shaped, "batched matmul");
  } else {
    apply(node, transposeOp(permutation), {shaped}, "batched matmul, transpose");
  }
}

}  // namespace glnet::onnximport
