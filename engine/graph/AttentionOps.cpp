// Fused scaled dot-product attention of imported transformers (InferenceOps.h, shaders/Attention.glsl): the importer
// turns MatMul(Q, Kᵀ) → scale → (+ mask) → Softmax → MatMul(·, V) into this one op.
#include "graph/InferenceOp.h"

#include "gl/Limits.h"
#include "plan/Groups.h"
#include "ref/Reference.h"

#include <algorithm>
#include <cmath>

namespace glnet {
namespace inference {
namespace {

using Layout = AttentionSettings::Layout;
using View = AttentionSettings::View;

// A contiguous tensor of shape `stored` holding the logical axes [batch, head, sequence, feature] in `layout`'s order,
// as a view.
View viewOf(const Shape& stored, const Layout& layout) {
  const std::vector<std::int64_t> own = stridesOf(stored);
  View view;
  for (std::size_t k = 0; k < 4; ++k) {
    view.sizes[k] = stored[layout[k]];
    view.strides[k] = static_cast<std::uint32_t>(own[layout[k]]);
  }
  return view;
}

std::size_t at(const View& view, std::size_t b, std::size_t h, std::size_t s, std::size_t f) {
  return view.offset + b * view.strides[0] + h * view.strides[1] + s * view.strides[2] + f * view.strides[3];
}

// The queries of a group and the keys of a tile (Attention.glsl).
struct Blocks {
  std::uint32_t queries, keys;
};

std::size_t sharedBytes(Blocks b, std::uint32_t d, std::uint32_t dv) {
  const std::size_t runs = (d + 3) / 4, kvRuns = (std::max(d, dv) + 3) / 4;
  // Per query: its run of Q; per key: its run of K or V; per query again: the tile's weights and 2 runs of partial
  // maxima (each padded by one run against bank conflicts, as the shader's arrays are).
  return 4 * sizeof(float) * (b.queries * (runs + 1) + b.keys * (kvRuns + 1) + b.queries * (b.keys / 4 + 2));
}

// Queries per group: fewest padded rows, where each halving of the block is counted as costing a tenth more per row (a
// group of 64 reads each staged key for 4 queries per invocation, one of 16 for 1: more shared loads per product).
// Sq 128 or 384 take 64, ViT's 197 takes 32 (224 rows, not 256), a decode step's 1 takes 16. Then the most keys per
// tile that the device's shared memory holds, else fewer queries.
Blocks chooseBlocks(std::uint32_t sq, std::uint32_t d, std::uint32_t dv) {
  std::uint32_t queries = 64;
  double best = INFINITY;
  for (const auto& [size, cost] : {std::pair<std::uint32_t, double>{64, 1.0}, {32, 1.1}, {16, 1.25}}) {
    const double rows = std::ceil(static_cast<double>(sq) / size) * size * cost;
    if (rows < best) {
      best = rows;
      queries = size;
    }
  }
  const auto room = static_cast<std::size_t>(currentLimits().maxSharedMemoryBytes);
  for (; queries >= 16; queries /= 2) {
    for (std::uint32_t keys = 32; keys >= 8; keys /= 2) {
      if (sharedBytes({queries, keys}, d, dv) <= room) return {queries, keys};
    }
  }
  throw DeviceLimitError("attention over " + std::to_string(d) + " and " + std::to_string(dv) + " features per head needs " +
                         std::to_string(sharedBytes({16, 8}, d, dv)) + " bytes of shared memory; this device has " +
                         std::to_string(room) + " (GL_MAX_COMPUTE_SHARED_MEMORY_SIZE)");
}

// Key splits (Attention.glsl's SPLIT_KEYS, joined by AttentionCombine.glsl) where the query blocks alone make too few
// groups to fill a GPU (a decode step: one query per head) and the keys are many: about 256 groups in all (2 per SM
// of an H100's 132), each split 2 tiles at least. 1 split: the single pass.
struct Split {
  std::uint32_t splits = 1, keysPerSplit = 0;
};

Split chooseSplit(Blocks blocks, std::uint32_t sq, std::uint32_t sk, std::uint32_t heads, std::uint32_t batch) {
  const std::uint64_t groups = std::uint64_t{(sq + blocks.queries - 1) / blocks.queries} * heads * batch;
  const std::uint32_t tiles = (sk + blocks.keys - 1) / blocks.keys;
  if (groups >= 128 || tiles < 4) return {};
  const auto splits = static_cast<std::uint32_t>(std::min<std::uint64_t>({(256 + groups - 1) / groups, tiles / 2, 65535 / batch}));
  if (splits < 2) return {};
  Split split;
  split.keysPerSplit = (tiles + splits - 1) / splits * blocks.keys;
  split.splits = (sk + split.keysPerSplit - 1) / split.keysPerSplit;
  return split;
}

std::string layoutText(const Layout& layout) {
  return "{" + std::to_string(layout[0]) + ", " + std::to_string(layout[1]) + ", " + std::to_string(layout[2]) + ", " +
         std::to_string(layout[3]) + "}";
}

class AttentionOp : public InferenceOp {
 public:
  explicit AttentionOp(AttentionSettings settings) : s_(settings) {
    for (const Layout& layout : {s_.query, s_.key, s_.value, s_.output}) {
      Layout sorted = layout;
      std::sort(sorted.begin(), sorted.end());
      if (sorted != AttentionSettings::contiguous) throw Error("attention's layout " + layoutText(layout) + " is no permutation of 4 axes");
    }
  }
  std::string name() const override { return "attention"; }
  // The entries of the mask's batch axis (1 where it has none), which batch b reads at b mod this.
  static std::uint32_t maskBatches(const Shape& mask) { return mask.size() == 4 ? mask[0] : 1; }

  // How Q, K, V and the output are read and written; throws when the inputs do not fit together.
  std::array<View, 4> views(const std::vector<Shape>& in) const {
    const auto refuse = [&](const std::string& why) {
      return Error("attention takes Q [B, H, Sq, D], K [B, H, Sk, D], V [B, H, Sk, Dv] (in their layouts) and a mask "
                   "broadcasting to [B, H, Sq, Sk]; " + why + ": got " + shapesText(in));
    };
    if (in.size() != 3 && in.size() != 4) throw refuse("3 or 4 inputs");
    std::array<View, 4> result;
    const std::array<const std::optional<View>*, 3> given{&s_.queryView, &s_.keyView, &s_.valueView};
    const std::array<Layout, 3> layouts{s_.query, s_.key, s_.value};
    for (std::size_t i = 0; i < 3; ++i) {
      if (!*given[i]) {
        if (in[i].size() != 4) throw refuse("Q, K and V of rank 4");
        result[i] = viewOf(in[i], layouts[i]);
        continue;
      }
      result[i] = **given[i];
      std::uint64_t last = result[i].offset;
      for (std::size_t k = 0; k < 4; ++k) last += std::uint64_t{result[i].strides[k]} * (result[i].sizes[k] == 0 ? 0 : result[i].sizes[k] - 1);
      const std::array<std::uint32_t, 4>& n = result[i].sizes;
      if (elementCount({n[0], n[1], n[2], n[3]}) > 0 && last >= elementCount(in[i])) {
        throw refuse(std::string("a view of ") + "QKV"[i] + " inside its tensor (it reaches element " + std::to_string(last) + ")");
      }
    }
    const std::array<std::uint32_t, 4>&q = result[0].sizes, &k = result[1].sizes, &v = result[2].sizes;
    if (k[0] != q[0] || v[0] != q[0]) throw refuse("the same batch");
    if (k[1] != v[1] || k[1] == 0 || q[1] % k[1] != 0) throw refuse("K and V with the same heads, a divisor of Q's");
    if (k[3] != q[3]) throw refuse("Q and K with the same features");
    if (v[2] != k[2]) throw refuse("K and V with the same keys");
    if (q[3] == 0 || v[3] == 0) throw refuse("features");
    if (in.size() == 4) {
      const Shape scores{q[0], q[1], q[2], k[2]};
      const std::uint32_t period = s_.maskBatchPeriod;
      if (period && (in[3].size() != 4 || in[3][0] != period || q[0] % period != 0)) {
        throw refuse("a mask [" + std::to_string(period) + ", ...] for a batch period of " + std::to_string(period));
      }
      bool fits = in[3].size() <= 4;
      for (std::size_t i = 0; fits && i < in[3].size() - (period ? 1 : 0); ++i) {  // from the right; a period's batch axis is checked above
        const std::uint32_t size = in[3][in[3].size() - 1 - i];
        fits = size == 1 || size == scores[3 - i];
      }
      if (!fits) throw refuse("a mask that broadcasts to " + describe(scores));
    }
    Shape stored(4);
    for (std::size_t axis = 0; axis < 4; ++axis) stored[s_.output[axis]] = axis == 3 ? v[3] : q[axis];
    result[3] = viewOf(stored, s_.output);
    return result;
  }
  Shape outputShape(const std::vector<Shape>& in) const override {
    const View out = views(in)[3];
    Shape stored(4);
    for (std::size_t k = 0; k < 4; ++k) stored[s_.output[k]] = out.sizes[k];
    return stored;
  }

  // The partial outputs and row statistics of the key splits, if any.
  std::size_t workspaceBytes(const std::vector<Shape>& in) const override {
    const auto [q, k, v, o] = views(in);
    const std::size_t lines = std::size_t{q.sizes[0]} * q.sizes[1] * q.sizes[2];
    if (lines == 0) return 0;
    const Split split = chooseSplit(chooseBlocks(q.sizes[2], q.sizes[3], v.sizes[3]), q.sizes[2], k.sizes[2], q.sizes[1], q.sizes[0]);
    return split.splits > 1 ? sizeof(float) * split.splits * lines * (v.sizes[3] + 2) : 0;
  }

  void forward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out) const override {
    const auto [q, k, v, o] = views(shapesOf(in));
    if (elementCount({o.sizes[0], o.sizes[1], o.sizes[2], o.sizes[3]}) == 0) return;
    const std::uint32_t sq = q.sizes[2], sk = k.sizes[2], d = q.sizes[3], dv = v.sizes[3];
    const Blocks blocks = chooseBlocks(sq, d, dv);
    const Split split = chooseSplit(blocks, sq, sk, q.sizes[1], q.sizes[0]);
    const bool masked = in.size() == 4;
    std::vector<ShaderDefine> defines{{"HEAD_D", std::to_string(d)},
                                      {"HEAD_DV", std::to_string(dv)},
                                      {"KV_RUNS", std::to_string((std::max(d, dv) + 3) / 4)},
                                      {"BLOCK_M", std::to_string(blocks.queries)},
                                      {"BLOCK_N", std::to_string(blocks.keys)}};
    if (s_.causal) defines.push_back({"CAUSAL", "1"});
    if (!s_.emptyRowsZero) defines.push_back({"EMPTY_ROWS_NAN", "1"});
    if (masked) defines.push_back({"HAS_MASK", "1"});
    // Loads walk the axis with the smaller stride first (a transposed K along its keys).
    if (q.strides[2] < q.strides[3]) defines.push_back({"Q_ALONG_SEQUENCE", "1"});
    if (k.strides[2] < k.strides[3]) defines.push_back({"K_ALONG_SEQUENCE", "1"});
    if (v.strides[2] < v.strides[3]) defines.push_back({"V_ALONG_SEQUENCE", "1"});
    if (split.splits > 1) defines.push_back({"SPLIT_KEYS", "1"});
    Dispatch dispatch;
    dispatch.program = &programs.get("Attention.glsl", defines);
    dispatch.label = "attention" + std::string(s_.causal ? " causal" : "") + (masked ? " masked" : "") + " D" +
                     std::to_string(d) + (dv != d ? " Dv" + std::to_string(dv) : "") + " " +
                     std::to_string(blocks.queries) + "x" + std::to_string(blocks.keys) +
                     (split.splits > 1 ? " split " + std::to_string(split.splits) : "");
    dispatch.groups = {(sq + blocks.queries - 1) / blocks.queries, q.sizes[1], q.sizes[0] * split.splits};
    dispatch.buffers = {{0, in[0].view, Access::read}, {1, in[1].view, Access::read}, {2, in[2].view, Access::read}};
    if (split.splits > 1) {
      GLNET_ASSERT(out.workspace.has_value(), "attention's key splits need the workspace it asked for");
      dispatch.buffers.push_back({5, *out.workspace, Access::write});
    } else {
      dispatch.buffers.push_back({4, out.view, Access::write});
    }
    if (masked) dispatch.buffers.push_back({3, in[3].view, Access::read});
    dispatch.uniforms = {Uniform::u32(0, sq), Uniform::u32(1, sk), Uniform::f32(2, s_.scale)};
    if (s_.causal) dispatch.uniforms.push_back(Uniform::i32(3, static_cast<std::int32_t>(sk) - static_cast<std::int32_t>(sq)));
    const auto strides = [&](int location, const std::array<std::uint32_t, 4>& values) {
      for (int axis = 0; axis < 4; ++axis) dispatch.uniforms.push_back(Uniform::u32(location + axis, values[static_cast<std::size_t>(axis)]));
    };
    strides(4, q.strides);
    strides(8, k.strides);
    strides(12, v.strides);
    strides(16, o.strides);
    if (masked) {
      const std::vector<std::int64_t> ms = broadcastStrides(in[3].shape, {q.sizes[0], q.sizes[1], sq, sk});
      strides(20, {static_cast<std::uint32_t>(ms[0]), static_cast<std::uint32_t>(ms[1]), static_cast<std::uint32_t>(ms[2]),
                   static_cast<std::uint32_t>(ms[3])});
    }
    for (const auto& [location, offset] : {std::pair{24, q.offset}, {25, k.offset}, {26, v.offset}}) dispatch.uniforms.push_back(Uniform::u32(location, offset));
    dispatch.uniforms.push_back(Uniform::u32(29, q.sizes[1] / k.sizes[1]));
    if (masked) dispatch.uniforms.push_back(Uniform::u32(30, maskBatches(in[3].shape)));
    if (split.splits == 1) {
      plan.record(dispatch);
      return;
    }
    dispatch.uniforms.push_back(Uniform::u32(27, split.keysPerSplit));
    dispatch.uniforms.push_back(Uniform::u32(28, split.splits));
    plan.record(dispatch);
    const std::uint32_t count = count32({q.sizes[0], q.sizes[1], sq, dv});
    Dispatch combine = linearDispatch(programs.get("AttentionCombine.glsl", s_.emptyRowsZero ? std::vector<ShaderDefine>{} : std::vector<ShaderDefine>{{"EMPTY_ROWS_NAN", "1"}}), "attention combine " + std::to_string(split.splits) + " splits", count);
    combine.buffers = {{0, *out.workspace, Access::read}, {1, out.view, Access::write}};
    combine.uniforms = {Uniform::u32(0, count), Uniform::u32(1, split.splits), Uniform::u32(2, q.sizes[1]), Uniform::u32(3, sq), Uniform::u32(4, dv)};
    for (int axis = 0; axis < 4; ++axis) combine.uniforms.push_back(Uniform::u32(5 + axis, o.strides[static_cast<std::size_t>(axis)]));
    plan.record(combine);
  }

  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override {
    const auto [q, k, v, o] = views(shapesOf(in));
    const std::uint32_t sq = q.sizes[2], sk = k.sizes[2], d = q.sizes[3], dv = v.sizes[3];
    std::vector<std::int64_t> ms(4, 0);
    if (in.size() == 4) ms = broadcastStrides(in[3].shape, {q.sizes[0], q.sizes[1], sq, sk});
    std::vector<double> y(elementCount({o.sizes[0], o.sizes[1], o.sizes[2], o.sizes[3]}));
    std::vector<double> scores(sk), weights(sk);
    for (std::size_t b = 0; b < q.sizes[0]; ++b) {
      for (std::size_t h = 0; h < q.sizes[1]; ++h) {
        for (std::size_t i = 0; i < sq; ++i) {
          // Keys past the causal limit are left out; a query that sees none gets 0.
          const std::size_t kvHead = h / (q.sizes[1] / k.sizes[1]), maskBatch = in.size() == 4 ? b % maskBatches(in[3].shape) : 0;
          const std::int64_t limit = s_.causal ? static_cast<std::int64_t>(i) + sk - sq : std::int64_t{sk} - 1;
          const std::size_t seen = static_cast<std::size_t>(std::clamp<std::int64_t>(limit + 1, 0, sk));
          double largest = -INFINITY;
          for (std::size_t j = 0; j < seen; ++j) {
            double dot = 0;
            for (std::size_t f = 0; f < d; ++f) dot += (*in[0].values)[at(q, b, h, i, f)] * (*in[1].values)[at(k, b, kvHead, j, f)];
            scores[j] = double{s_.scale} * dot;
            if (in.size() == 4) scores[j] += (*in[3].values)[maskBatch * ms[0] + h * ms[1] + i * ms[2] + j * ms[3]];
            largest = ref::maxNaN(largest, scores[j]);
          }
          // Every seen key −inf: weights 0 where PyTorch's SDPA export turns softmax's NaN into 0 (the output Σ 0·V),
          // else NaN as softmax gives.
          const bool empty = largest == -INFINITY;
          double total = 0;
          for (std::size_t j = 0; j < seen; ++j) total += weights[j] = largest == -INFINITY ? 0.0 : std::exp(scores[j] - largest);
          for (std::size_t j = 0; j < seen; ++j) weights[j] = largest == -INFINITY ? 0.0 : weights[j] / total;
          for (std::size_t f = 0; f < dv; ++f) {
            double sum = 0;
            for (std::size_t j = 0; j < seen; ++j) sum += weights[j] * (*in[2].values)[at(v, b, kvHead, j, f)];
            y[at(o, b, h, i, f)] = empty && !s_.emptyRowsZero ? NAN : sum;
          }
        }
      }
    }
    return y;
  }

 private:
  AttentionSettings s_;
};

}  // namespace
}  // namespace inference

std::shared_ptr<const Op> attentionOp(AttentionSettings settings) { return std::make_shared<inference::AttentionOp>(settings); }

}  // namespace glnet
