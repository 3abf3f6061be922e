// Trainable multi-head self-attention on projected queries, keys and values (Ops.h's selfAttentionOp): the forward pass
// is the fused attention of imported transformers (AttentionOps.cpp, shaders/Attention.glsl) reading Q, K and V in
// place; the backward pass recomputes the scores (shaders/AttentionGradient.glsl).
#include "graph/InferenceOps.h"
#include "graph/Ops.h"

#include "base/check.h"
#include "gl/Limits.h"
#include "plan/Groups.h"

#include <algorithm>
#include <cmath>

namespace glnet {
namespace {

// qkv [..., S, 3E] (the queries, keys and values of H heads of D = E/H features each, side by side per position, as
// PyTorch's MultiheadAttention projects them), O = softmax(QKᵀ/√D + mask)·V per head, [..., S, E] with the heads side by
// side. The optional second input [..., S] is added to every query's score for each key (PyTorch's float
// key_padding_mask: 0 for a real position, −inf for padding); no gradient flows into it.
class SelfAttention : public Op {
 public:
  SelfAttention(std::uint32_t heads, bool causal) : heads_(heads), causal_(causal) {}
  std::string name() const override { return causal_ ? "self-attention (causal)" : "self-attention"; }

  // The sizes a shape of qkv stands for.
  struct Sizes {
    std::uint32_t batch, sequence, heads, features;  // B (every leading axis), S, H, D
    std::uint32_t width() const { return heads * features; }
  };
  Sizes sizesOf(const Shape& qkv) const {
    if (qkv.size() < 3 || qkv.back() == 0 || qkv.back() % (3 * heads_) != 0 || qkv[qkv.size() - 2] == 0) {
      throw Error(name() + " of " + std::to_string(heads_) + " heads takes [..., S, 3·heads·D] (queries, keys and values), not " + describe(qkv));
    }
    const std::uint32_t sequence = qkv[qkv.size() - 2];
    return {static_cast<std::uint32_t>(elementCount(qkv) / qkv.back() / sequence), sequence, heads_, qkv.back() / (3 * heads_)};
  }
  Shape outputShape(const std::vector<Shape>& in) const override {
    if (in.size() != 1 && in.size() != 2) throw Error(name() + " takes one tensor of queries, keys and values, and a key mask");
    const Sizes s = sizesOf(in[0]);
    if (in.size() == 2 && in[1] != Shape(in[0].begin(), in[0].end() - 1)) {
      throw Error(name() + "'s key mask must be " + describe(Shape(in[0].begin(), in[0].end() - 1)) + " for queries, keys and values " +
                  describe(in[0]) + ", not " + describe(in[1]));
    }
    Shape out = in[0];
    out.back() = s.width();
    return out;
  }
  // The fused attention's work space (key splits), then each row's log-sum-exp and Δ for the backward pass.
  std::size_t workspaceBytes(const std::vector<Shape>& in) const override {
    const Sizes s = sizesOf(in[0]);
    return attentionBytes(s) + rowStatisticsBytes(s);
  }
  bool passesGradient(std::size_t input) const override { return input == 0; }

  void forward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out) const override {
    const Sizes s = sizesOf(in[0].shape);
    const auto fused = attentionOp(settings(s));
    GpuTensor stored{out.view, {s.batch, s.sequence, s.heads, s.features}};
    if (attentionBytes(s) > 0) stored.workspace = BufferView(*out.workspace->buffer, out.workspace->offset, attentionBytes(s));
    const GpuTensor qkv{in[0].view, {static_cast<std::uint32_t>(elementCount(in[0].shape))}};
    std::vector<GpuTensor> inputs{qkv, qkv, qkv};
    if (in.size() == 2) inputs.push_back({in[1].view, {s.batch, 1, 1, s.sequence}});
    fused->forward(programs, plan, inputs, stored);
  }

  void backward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out, const GpuTensor& dOut,
                const std::vector<std::optional<GradientTarget>>& targets) const override {
    if (!targets[0]) return;
    const Sizes s = sizesOf(in[0].shape);
    const std::uint32_t pairs = s.batch * s.heads;
    const BufferView stats(*out.workspace->buffer, out.workspace->offset + attentionBytes(s), rowStatisticsBytes(s));
    const auto [own, other] = gradientBlocks(s.features);
    for (const char* pass : {"ATTENTION_GRADIENT_QUERIES", "ATTENTION_GRADIENT_KEYS"}) {
      std::vector<ShaderDefine> defines{{pass, "1"}, {"HEAD_D", std::to_string(s.features)}, {"OWN_ROWS", std::to_string(own)},
                                        {"OTHER_ROWS", std::to_string(other)}};
      if (causal_) defines.push_back({"CAUSAL", "1"});
      if (in.size() == 2) defines.push_back({"KEY_MASK", "1"});
      const bool queries = std::string(pass) == "ATTENTION_GRADIENT_QUERIES";
      Dispatch dispatch;
      dispatch.program = &programs.get("AttentionGradient.glsl", defines);
      dispatch.label = name() + (queries ? " dQ" : " dK dV");
      constexpr std::uint32_t mostGroups = 65535;  // along one axis (GL's guaranteed minimum)
      dispatch.groups = {(s.sequence + own - 1) / own, std::min(pairs, mostGroups), (pairs + mostGroups - 1) / mostGroups};
      dispatch.buffers = {{0, in[0].view, Access::read}, {1, out.view, Access::read}, {2, dOut.view, Access::read},
                          {3, targets[0]->view, targets[0]->accumulate ? Access::readWrite : Access::write},
                          {4, stats, queries ? Access::write : Access::read}};
      dispatch.uniforms = {Uniform::u32(0, pairs), Uniform::u32(1, s.sequence), Uniform::u32(2, s.heads),
                           Uniform::f32(3, scaleOf(s)), Uniform::u32(4, targets[0]->accumulate ? 1 : 0)};
      if (in.size() == 2) dispatch.buffers.push_back({5, in[1].view, Access::read});
      plan.record(dispatch);
    }
  }

  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override {
    const Sizes s = sizesOf(in[0].shape);
    std::vector<double> y(std::size_t{s.batch} * s.sequence * s.width());
    forEachRow(in, [&](const Row& row) {
      for (std::size_t f = 0; f < s.features; ++f) {
        double sum = 0;
        for (std::size_t j = 0; j < row.keys; ++j) sum += row.weights[j] * row.value(j, f);
        y[row.output(f)] = sum;
      }
    });
    return y;
  }

  std::vector<std::vector<double>> referenceBackward(const std::vector<HostTensor64>& in, const std::vector<double>& y,
                                                     const std::vector<double>& dy) const override {
    const Sizes s = sizesOf(in[0].shape);
    const double scale = scaleOf(s);
    std::vector<double> dqkv(in[0].values->size(), 0.0);
    forEachRow(in, [&](const Row& row) {
      double delta = 0;
      for (std::size_t f = 0; f < s.features; ++f) delta += dy[row.output(f)] * y[row.output(f)];
      for (std::size_t j = 0; j < row.keys; ++j) {
        double product = 0;
        for (std::size_t f = 0; f < s.features; ++f) product += dy[row.output(f)] * row.value(j, f);
        const double score = row.weights[j] * (product - delta);
        for (std::size_t f = 0; f < s.features; ++f) {
          dqkv[row.at(row.position, 0, f)] += scale * score * row.key(j, f);
          dqkv[row.at(j, 1, f)] += scale * score * row.query(f);
          dqkv[row.at(j, 2, f)] += row.weights[j] * dy[row.output(f)];
        }
      }
    });
    std::vector<std::vector<double>> gradients{dqkv};
    if (in.size() == 2) gradients.emplace_back();  // none for the mask
    return gradients;
  }

 private:
  double scaleOf(const Sizes& s) const { return 1.0 / std::sqrt(static_cast<double>(s.features)); }
  // AttentionGradient.glsl's block of own rows (up to 32) and tile of the other side's (half as many): the most whose
  // shared memory (rows of D + 1 floats, two tile matrices, per-row pairs) fits the device's.
  std::pair<std::uint32_t, std::uint32_t> gradientBlocks(std::uint32_t features) const {
    const auto room = static_cast<std::size_t>(currentLimits().maxSharedMemoryBytes);
    const auto bytes = [&](std::uint32_t own, std::uint32_t other) {
      return sizeof(float) * (2 * std::size_t{own + other} * (features + 1) + 2 * std::size_t{own} * (other + 1) + 2 * (own + other));
    };
    // Small blocks: the passes wait on memory and barriers more than they compute, so what counts is how many groups
    // run at once. On the H200 (BERT-small's heads of 64 over 64 positions, bench/results/2026-11-28-attention-blocks-*)
    // blocks of 16 rows and tiles of 4 took half the time of 32 and 16 (8.8 against 4.4 ms a step); 8 and 4 as much
    // as 16 and 4, 4 and 4 more.
    for (std::uint32_t own = 16; own >= 1; own /= 2) {
      const std::uint32_t other = std::min<std::uint32_t>(own, 4);
      if (bytes(own, other) <= room) return {own, other};
    }
    throw DeviceLimitError(name() + "'s backward pass over heads of " + std::to_string(features) + " features needs " + std::to_string(bytes(1, 1)) +
                           " bytes of shared memory; this device has " + std::to_string(room) + " (GL_MAX_COMPUTE_SHARED_MEMORY_SIZE)");
  }
  AttentionSettings settings(const Sizes& s) const {
    AttentionSettings settings;
    settings.scale = static_cast<float>(scaleOf(s));
    settings.causal = causal_;
    settings.emptyRowsZero = false;  // a row of −inf scores (an infinite input) gives NaN, as softmax and the backward pass do
    // Q, K and V of position p, head h: qkv[b][p][part][h][f]; the output [B, S, H, D].
    const std::uint32_t width = s.width();
    for (std::uint32_t part = 0; part < 3; ++part) {
      AttentionSettings::View view;
      view.sizes = {s.batch, s.heads, s.sequence, s.features};
      view.strides = {s.sequence * 3 * width, s.features, 3 * width, 1};
      view.offset = part * width;
      (part == 0 ? settings.queryView : part == 1 ? settings.keyView : settings.valueView) = view;
    }
    settings.output = AttentionSettings::sequenceBeforeHeads;
    return settings;
  }
  std::size_t attentionBytes(const Sizes& s) const {
    const std::uint32_t elements = s.batch * s.sequence * 3 * s.width();
    return boundableBytes(attentionOp(settings(s))->workspaceBytes({{elements}, {elements}, {elements}}));
  }
  static std::size_t rowStatisticsBytes(const Sizes& s) { return 2 * sizeof(float) * s.batch * s.heads * s.sequence; }

  // One query row of one head in float64: its softmax weights over the keys it sees, and where things are.
  struct Row {
    const std::vector<double>& qkv;
    std::size_t base, outputBase, width, position, keys;
    std::vector<double> weights;
    std::size_t at(std::size_t position, std::size_t part, std::size_t f) const { return base + (position * 3 + part) * width + f; }
    double query(std::size_t f) const { return qkv[at(position, 0, f)]; }
    double key(std::size_t j, std::size_t f) const { return qkv[at(j, 1, f)]; }
    double value(std::size_t j, std::size_t f) const { return qkv[at(j, 2, f)]; }
    std::size_t output(std::size_t f) const { return outputBase + position * width + f; }
  };
  template <typename Visit>
  void forEachRow(const std::vector<HostTensor64>& in, const Visit& visit) const {
    const HostTensor64& qkv = in[0];
    const Sizes s = sizesOf(qkv.shape);
    const std::size_t width = s.width();
    for (std::size_t b = 0; b < s.batch; ++b) {
      for (std::size_t h = 0; h < s.heads; ++h) {
        for (std::size_t i = 0; i < s.sequence; ++i) {
          Row row{*qkv.values, b * s.sequence * 3 * width + h * s.features, b * s.sequence * width + h * s.features, width, i,
                  causal_ ? i + 1 : s.sequence, {}};
          double largest = -INFINITY;
          for (std::size_t j = 0; j < row.keys; ++j) {
            double dot = 0;
            for (std::size_t f = 0; f < s.features; ++f) dot += row.query(f) * row.key(j, f);
            row.weights.push_back(dot * scaleOf(s) + (in.size() == 2 ? (*in[1].values)[b * s.sequence + j] : 0.0));
            largest = std::isnan(row.weights.back()) || row.weights.back() > largest ? row.weights.back() : largest;
          }
          double total = 0;
          for (double& w : row.weights) total += w = std::exp(w - largest);
          for (double& w : row.weights) w /= total;
          visit(row);
        }
      }
    }
  }

  std::uint32_t heads_;
  bool causal_;
};

}  // namespace

std::shared_ptr<const Op> selfAttentionOp(std::uint32_t heads, bool causal) {
  GLNET_ASSERT(heads >= 1, "at least one head");
  return std::make_shared<SelfAttention>(heads, causal);
}

}  // namespace glnet
