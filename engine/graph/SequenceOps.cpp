// The trainable ops between token ids and a transformer's positions and back (Ops.h's embeddingOp and
// firstPositionOp): the embedding lookup (a gather, its table's gradient in shaders/EmbeddingGradient.glsl) and the
// first position's features.
#include "graph/Ops.h"

#include "base/check.h"
#include "graph/InferenceOp.h"
#include "ops/SplitK.h"
#include "ops/StridedCopy.h"

#include <array>
#include <cmath>
#include <limits>

namespace glnet {
namespace {

// The table row an id names, or none (NaN, fractional, past the table): the rule of the GPU's gather, which takes a
// negative id from the end as ONNX's Gather does (so that an export means the same).
std::optional<std::size_t> rowOf(double id, std::size_t rows) {
  if (id < 0) id += static_cast<double>(rows);
  if (!(id >= 0 && id < static_cast<double>(rows)) || id != std::floor(id)) return std::nullopt;
  return static_cast<std::size_t>(id);
}

// The runs of positions whose table gradients separate work groups sum (EmbeddingGradient.glsl), added in order by
// SplitSum.glsl: a row that most positions name (padding, [CLS]) is then summed by many groups, not one. Runs of at
// least 1024 positions (8 of a group's chunks), at most 16, and their partial tables within 16 MiB: one run for a
// large vocabulary, whose rows are many and light.
std::uint32_t segmentsOf(std::uint64_t positions, std::uint32_t rows, std::uint32_t width) {
  const std::uint64_t table = std::uint64_t{rows} * width * sizeof(float), budget = std::uint64_t{16} << 20;
  const std::uint64_t byPositions = (positions + 1023) / 1024, byMemory = table ? budget / table : 1;
  return static_cast<std::uint32_t>(std::max<std::uint64_t>(1, std::min<std::uint64_t>({byPositions, byMemory, 16})));
}
// Positions per run: a multiple of the shader's chunk of 128.
std::uint32_t segmentPositions(std::uint64_t positions, std::uint32_t segments) {
  const std::uint64_t chunks = (positions + 127) / 128;
  return static_cast<std::uint32_t>((chunks + segments - 1) / segments * 128);
}

class Embedding : public Op {
 public:
  std::string name() const override { return "embedding"; }
  Shape outputShape(const std::vector<Shape>& in) const override {
    if (in.size() != 2 || in[0].empty() || in[1].size() != 2 || in[1][0] == 0 || in[1][1] == 0) {
      throw Error(name() + " takes ids [N, ...] and a table [rows, features], not " + inference::shapesText(in));
    }
    Shape out = in[0];
    out.push_back(in[1][1]);
    return out;
  }
  bool passesGradient(std::size_t input) const override { return input == 1; }  // none to the ids
  // The table gradient's partial sums, one table per run of positions (segmentsOf), where there is more than one.
  std::size_t workspaceBytes(const std::vector<Shape>& in) const override {
    const std::uint32_t segments = segmentsOf(elementCount(in[0]), in[1][0], in[1][1]);
    return segments > 1 ? std::size_t{segments} * in[1][0] * in[1][1] * sizeof(float) : 0;
  }
  std::size_t inferenceWorkspaceBytes(const std::vector<Shape>&) const override { return 0; }

  void forward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out) const override {
    plan.record(gatherCopy(programs, name(), in[1].view, in[0].view, out.view, lookup(in[0].shape, in[1].shape)));
  }
  void backward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out, const GpuTensor& dOut,
                const std::vector<std::optional<GradientTarget>>& targets) const override {
    if (!targets[1]) return;
    const std::uint32_t rows = in[1].shape[0], width = in[1].shape[1];
    const std::uint64_t positions = elementCount(in[0].shape);
    GLNET_ASSERT(positions <= UINT32_MAX, "embedding positions within 32 bits");
    const std::uint32_t segments = segmentsOf(positions, rows, width);
    GLNET_ASSERT(segments == 1 || out.workspace.has_value(), "the embedding's partial sums need its workspace");
    // A work group per table row, of lanes of at least a warp each, every invocation summing at most 16 features
    // where the width allows (EmbeddingGradient.glsl).
    constexpr std::uint32_t group = 128, mostFeatures = 16;
    constexpr std::uint32_t mostGroups = 65535;  // along one axis (GL's guaranteed minimum)
    std::uint32_t featureThreads = 32;
    while (featureThreads < group && (width + featureThreads - 1) / featureThreads > mostFeatures) featureThreads *= 2;
    Dispatch dispatch;
    dispatch.program = &programs.get("EmbeddingGradient.glsl", {{"EMBEDDING_GROUP", std::to_string(group)},
                                                                {"FEATURE_THREADS", std::to_string(featureThreads)},
                                                                {"FEATURES_PER_INVOCATION", std::to_string((width + featureThreads - 1) / featureThreads)}});
    dispatch.label = name() + " table gradient";
    dispatch.groups = {std::min(rows, mostGroups), (rows + mostGroups - 1) / mostGroups, segments};
    const bool added = segments == 1 && targets[1]->accumulate;
    dispatch.buffers = {{0, in[0].view, Access::read}, {1, dOut.view, Access::read},
                        {2, segments == 1 ? targets[1]->view : *out.workspace, added ? Access::readWrite : Access::write}};
    dispatch.uniforms = {Uniform::u32(0, static_cast<std::uint32_t>(positions)), Uniform::u32(1, width), Uniform::u32(2, rows),
                         Uniform::u32(3, added ? 1 : 0), Uniform::u32(4, segmentPositions(positions, segments))};
    plan.record(dispatch);
    if (segments > 1) {
      Dispatch sum = SplitSumOp(programs)(*out.workspace, targets[1]->view, rows * width, segments, targets[1]->accumulate);
      sum.label = name() + " table gradient sum";
      plan.record(sum);
    }
  }

  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override {
    const std::vector<double>&ids = *in[0].values, &table = *in[1].values;
    const std::size_t rows = in[1].shape[0], width = in[1].shape[1];
    std::vector<double> y(ids.size() * width, std::numeric_limits<double>::quiet_NaN());
    for (std::size_t p = 0; p < ids.size(); ++p) {
      if (const std::optional<std::size_t> row = rowOf(ids[p], rows)) std::copy_n(table.begin() + static_cast<std::ptrdiff_t>(*row * width), width, y.begin() + static_cast<std::ptrdiff_t>(p * width));
    }
    return y;
  }
  std::vector<std::vector<double>> referenceBackward(const std::vector<HostTensor64>& in, const std::vector<double>&,
                                                     const std::vector<double>& dy) const override {
    const std::vector<double>& ids = *in[0].values;
    const std::size_t rows = in[1].shape[0], width = in[1].shape[1];
    std::vector<double> dTable(rows * width, 0.0);
    for (std::size_t p = 0; p < ids.size(); ++p) {
      if (const std::optional<std::size_t> row = rowOf(ids[p], rows)) {
        for (std::size_t e = 0; e < width; ++e) dTable[*row * width + e] += dy[p * width + e];
      }
    }
    return {{}, dTable};
  }

 private:
  // Each position's row of E features from the table's rows of E.
  static IndexedCopy lookup(const Shape& ids, const Shape& table) {
    IndexedCopy copy;
    copy.inner = table[1];
    copy.rows = static_cast<std::uint32_t>(elementCount(ids));
    copy.dims = {table[0]};
    copy.strides = {table[1]};
    copy.indexOuterStride = copy.rows;
    copy.count = std::uint64_t{copy.rows} * copy.inner;
    return copy;
  }
};

class FirstPosition : public Op {
 public:
  std::string name() const override { return "first position"; }
  Shape outputShape(const std::vector<Shape>& in) const override {
    if (in.size() != 1 || in[0].size() < 3 || in[0][in[0].size() - 2] == 0) {
      throw Error(name() + " takes [N, ..., positions, features], not " + inference::shapesText(in));
    }
    Shape out = in[0];
    out.erase(out.end() - 2);
    return out;
  }
  void forward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out) const override {
    plan.record(regionCopy(programs, name(), in[0].view, out.view, copy(in[0].shape, false)));
  }
  void backward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor&, const GpuTensor& dOut,
                const std::vector<std::optional<GradientTarget>>& targets) const override {
    if (!targets[0]) return;
    // The other positions get no gradient: zeros, unless added to what is there.
    if (!targets[0]->accumulate) plan.record(fill(programs, name() + " gradient zeros", targets[0]->view, elementCount(in[0].shape), 0.0f));
    plan.record(regionCopy(programs, name() + " gradient", dOut.view, targets[0]->view, copy(in[0].shape, true), targets[0]->accumulate));
  }
  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override {
    const auto [items, positions, width] = sizes(in[0].shape);
    std::vector<double> y(items * width);
    for (std::size_t b = 0; b < items; ++b) {
      for (std::size_t e = 0; e < width; ++e) y[b * width + e] = (*in[0].values)[b * positions * width + e];
    }
    return y;
  }
  std::vector<std::vector<double>> referenceBackward(const std::vector<HostTensor64>& in, const std::vector<double>&,
                                                     const std::vector<double>& dy) const override {
    const auto [items, positions, width] = sizes(in[0].shape);
    std::vector<double> dx(in[0].values->size(), 0.0);
    for (std::size_t b = 0; b < items; ++b) {
      for (std::size_t e = 0; e < width; ++e) dx[b * positions * width + e] = dy[b * width + e];
    }
    return {dx};
  }

 private:
  // Every leading axis as one, the positions, the features.
  static std::array<std::uint32_t, 3> sizes(const Shape& x) {
    const std::uint32_t positions = x[x.size() - 2], width = x.back();
    return {static_cast<std::uint32_t>(elementCount(x) / (std::size_t{positions} * width)), positions, width};
  }
  // The copy over [items, E] from the sequences' first rows to the output, or back (`toSequence`).
  static RegionCopy copy(const Shape& x, bool toSequence) {
    const auto [items, positions, width] = sizes(x);
    RegionCopy region;
    region.region = {items, width};
    const std::vector<std::int64_t> sequence{std::int64_t{positions} * width, 1}, rows{width, 1};
    region.xStrides = toSequence ? rows : sequence;
    region.yStrides = toSequence ? sequence : rows;
    return region;
  }
};

}  // namespace

std::shared_ptr<const Op> embeddingOp() { return std::make_shared<Embedding>(); }
std::shared_ptr<const Op> firstPositionOp() { return std::make_shared<FirstPosition>(); }

}  // namespace glnet
