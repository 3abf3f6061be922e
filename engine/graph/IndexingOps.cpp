// The indexing operators of imported models (InferenceOps.h): Gather and GatherND with computed indices, ScatterND and
// Trilu, as StridedCopy.glsl's indexed copies and triangle.
#include "graph/InferenceOp.h"

#include "base/check.h"
#include "ops/StridedCopy.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace glnet {
namespace inference {
namespace {

std::uint64_t product(const Shape& shape, std::size_t begin, std::size_t end) {
  std::uint64_t p = 1;
  for (std::size_t k = begin; k < end; ++k) p *= shape[k];
  return p;
}

// An indexed copy and the shape it makes.
struct Geometry {
  IndexedCopy copy;
  Shape out;
};

// Gather along `axis`: y = data[:axis] + indices + data[axis + 1:], one index per row.
Geometry gatherGeometry(std::uint32_t axis, const Shape& data, const Shape& indices) {
  if (axis >= data.size()) throw Error("gather along axis " + std::to_string(axis) + " does not fit " + describe(data));
  Geometry g;
  g.out.assign(data.begin(), data.begin() + axis);
  g.out.insert(g.out.end(), indices.begin(), indices.end());
  g.out.insert(g.out.end(), data.begin() + axis + 1, data.end());
  g.copy.inner = static_cast<std::uint32_t>(product(data, axis + 1, data.size()));
  g.copy.rows = static_cast<std::uint32_t>(elementCount(indices));
  g.copy.dims = {data[axis]};
  g.copy.strides = {g.copy.inner};
  g.copy.dataOuterStride = static_cast<std::int64_t>(data[axis]) * g.copy.inner;
  g.copy.indexOuterStride = 0;
  g.copy.count = elementCount(g.out);
  return g;
}

// GatherND: indices [batch..., rows..., depth] pick data[batch..., index_0 .. index_depth-1, inner...].
Geometry gatherNdGeometry(std::uint32_t batchDims, const Shape& data, const Shape& indices) {
  if (indices.empty() || batchDims >= indices.size() || batchDims >= data.size()) {
    throw Error("gather nd with " + std::to_string(batchDims) + " batch axes does not fit " + describe(data) + " and " + describe(indices));
  }
  const std::uint32_t depth = indices.back();
  if (depth < 1 || batchDims + depth > data.size() || depth > largestCopyRank) {
    throw Error("gather nd's indices " + describe(indices) + " index 1 to " + std::to_string(std::min<std::size_t>(data.size() - batchDims, largestCopyRank)) +
                " axes of " + describe(data));
  }
  for (std::uint32_t k = 0; k < batchDims; ++k) {
    if (data[k] != indices[k]) throw Error("gather nd's batch axes differ: " + describe(data) + " and " + describe(indices));
  }
  Geometry g;
  g.out.assign(indices.begin(), indices.end() - 1);
  g.out.insert(g.out.end(), data.begin() + batchDims + depth, data.end());
  const std::vector<std::int64_t> strides = stridesOf(data);
  g.copy.inner = static_cast<std::uint32_t>(product(data, batchDims + depth, data.size()));
  g.copy.rows = static_cast<std::uint32_t>(product(indices, batchDims, indices.size() - 1));
  for (std::uint32_t k = 0; k < depth; ++k) {
    g.copy.dims.push_back(data[batchDims + k]);
    g.copy.strides.push_back(strides[batchDims + k]);
  }
  g.copy.dataOuterStride = static_cast<std::int64_t>(product(data, batchDims, data.size()));
  g.copy.indexOuterStride = static_cast<std::int64_t>(g.copy.rows) * depth;
  g.copy.count = elementCount(g.out);
  return g;
}

// The offset index row `at` names, or -1 where an index is outside its axis, fractional or NaN: the shader's rule.
std::int64_t indexedOffset(const IndexedCopy& copy, const std::vector<double>& indices, std::size_t at) {
  std::int64_t offset = 0;
  for (std::size_t k = 0; k < copy.dims.size(); ++k) {
    double index = indices[at + k];
    if (index < 0) index += static_cast<double>(copy.dims[k]);
    if (!(index >= 0 && index < static_cast<double>(copy.dims[k])) || index != std::floor(index)) return -1;
    offset += static_cast<std::int64_t>(index) * copy.strides[k];
  }
  return offset;
}

class GatherOp : public InferenceOp {
 public:
  GatherOp(bool nd, std::uint32_t axis) : nd_(nd), axis_(axis) {}
  std::string name() const override { return nd_ ? "gather nd" : "gather"; }
  Shape outputShape(const std::vector<Shape>& in) const override { return geometry(in).out; }
  void forward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out) const override {
    plan.record(gatherCopy(programs, name(), in[0].view, in[1].view, out.view, geometry(shapesOf(in)).copy));
  }
  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override {
    const IndexedCopy copy = geometry(shapesOf(in)).copy;
    std::vector<double> y(copy.count);
    for (std::size_t i = 0; i < y.size(); ++i) {
      const std::size_t e = i % copy.inner, row = i / copy.inner, j = row % copy.rows, o = row / copy.rows;
      const std::int64_t offset = indexedOffset(copy, *in[1].values, o * static_cast<std::size_t>(copy.indexOuterStride) + j * copy.dims.size());
      y[i] = offset < 0 ? std::numeric_limits<double>::quiet_NaN()
                        : (*in[0].values)[o * static_cast<std::size_t>(copy.dataOuterStride) + static_cast<std::size_t>(offset) + e];
    }
    return y;
  }

 private:
  Geometry geometry(const std::vector<Shape>& in) const {
    if (in.size() != 2) throw Error(name() + " takes data and indices");
    checkRank(name(), in[0]);
    checkRank(name(), in[1]);
    Geometry g = nd_ ? gatherNdGeometry(axis_, in[0], in[1]) : gatherGeometry(axis_, in[0], in[1]);
    checkRank(name(), g.out);
    return g;
  }

  bool nd_;
  std::uint32_t axis_;  // Gather's axis, or GatherND's batch axes
};

class ScatterNdOp : public InferenceOp {
 public:
  std::string name() const override { return "scatter nd"; }
  Shape outputShape(const std::vector<Shape>& in) const override {
    geometry(in);
    return in[0];
  }
  void forward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out) const override {
    const std::vector<std::int64_t> strides = stridesOf(out.shape);
    plan.record(regionCopy(programs, name() + " data", in[0].view, out.view, {out.shape, 0, 0, strides, strides}));
    const IndexedCopy copy = geometry(shapesOf(in));
    if (copy.count > 0) plan.record(scatterCopy(programs, name(), in[2].view, in[1].view, out.view, copy));
  }
  // Rows in order, a later one over an earlier one at the same index (ONNX leaves repeats undefined; the importer
  // refuses them where the GPU runs the op).
  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override {
    const IndexedCopy copy = geometry(shapesOf(in));
    std::vector<double> y = *in[0].values;
    for (std::size_t i = 0; i < copy.count; ++i) {
      const std::int64_t offset = indexedOffset(copy, *in[1].values, i / copy.inner * copy.dims.size());
      if (offset >= 0) y[static_cast<std::size_t>(offset) + i % copy.inner] = (*in[2].values)[i];
    }
    return y;
  }

 private:
  // data [dims..., inner...], indices [rows..., depth], updates [rows..., inner...].
  IndexedCopy geometry(const std::vector<Shape>& in) const {
    if (in.size() != 3 || in[1].empty()) throw Error("scatter nd takes data, indices and updates, not " + shapesText(in));
    const Shape &data = in[0], &indices = in[1], &updates = in[2];
    checkRank(name(), data);
    checkRank(name(), indices);
    const std::uint32_t depth = indices.back();
    if (depth < 1 || depth > data.size()) throw Error("scatter nd's indices " + describe(indices) + " do not index " + describe(data));
    Shape expected(indices.begin(), indices.end() - 1);
    expected.insert(expected.end(), data.begin() + depth, data.end());
    if (updates != expected) throw Error("scatter nd's updates are " + describe(updates) + ", not " + describe(expected));
    const std::vector<std::int64_t> strides = stridesOf(data);
    IndexedCopy copy;
    copy.count = elementCount(updates);
    copy.inner = static_cast<std::uint32_t>(product(data, depth, data.size()));
    copy.rows = static_cast<std::uint32_t>(product(indices, 0, indices.size() - 1));
    for (std::uint32_t k = 0; k < depth; ++k) {
      copy.dims.push_back(data[k]);
      copy.strides.push_back(strides[k]);
    }
    return copy;
  }
};

class TriluOp : public InferenceOp {
 public:
  TriluOp(bool upper, std::int64_t k) : upper_(upper), k_(k) {}
  std::string name() const override { return upper_ ? "triu" : "tril"; }
  Shape outputShape(const std::vector<Shape>& in) const override {
    if (in.size() != 1 || in[0].size() < 2) throw Error(name() + " takes one tensor of rank 2 or more, not " + shapesText(in));
    return in[0];
  }
  void forward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out) const override {
    const Shape& s = out.shape;
    const std::uint32_t rows = s[s.size() - 2], cols = s[s.size() - 1];
    // Beyond the matrix every diagonal keeps all or nothing, so k fits 32 bits clamped there.
    const auto k = static_cast<std::int32_t>(std::clamp<std::int64_t>(k_, -static_cast<std::int64_t>(rows) - 1, static_cast<std::int64_t>(cols) + 1));
    plan.record(triluCopy(programs, name(), in[0].view, out.view, elementCount(s), rows, cols, k, upper_));
  }
  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override {
    const Shape& s = in[0].shape;
    const std::size_t rows = s[s.size() - 2], cols = s[s.size() - 1];
    std::vector<double> y = *in[0].values;
    for (std::size_t i = 0; i < y.size(); ++i) {
      const std::int64_t diagonal = static_cast<std::int64_t>(i % cols) - static_cast<std::int64_t>(i / cols % rows);
      if (upper_ ? diagonal < k_ : diagonal > k_) y[i] = 0;
    }
    return y;
  }

 private:
  bool upper_;
  std::int64_t k_;
};

}  // namespace
}  // namespace inference

std::shared_ptr<const Op> gatherOp(std::uint32_t axis) { return std::make_shared<inference::GatherOp>(false, axis); }
std::shared_ptr<const Op> gatherNdOp(std::uint32_t batchDims) { return std::make_shared<inference::GatherOp>(true, batchDims); }
std::shared_ptr<const Op> scatterNdOp() { return std::make_shared<inference::ScatterNdOp>(); }
std::shared_ptr<const Op> triluOp(bool upper, std::int64_t k) { return std::make_shared<inference::TriluOp>(upper, k); }

}  // namespace glnet
