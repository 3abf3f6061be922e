#include "base/check.h"
#include "graph/InferenceOp.h"
#include "graph/Ops.h"
#include "numbers/ShaderModes.h"
#include "ops/Elementwise.h"
#include "plan/Groups.h"
#include "ref/Reference.h"

#include <algorithm>
#include <cmath>

namespace glnet {
namespace {

// A channel's M = N·S values of x [N, C, S] in chunks of about chunkValues (at most largestChunks of them), one work
// group of BatchNorm.glsl each: enough work groups for a few channels of many values (resnet8's first layers: 16
// channels of 100 352 values at batch 128).
struct ChannelChunks {
  static constexpr std::uint64_t chunkValues = 2048;
  static constexpr std::uint64_t largestChunks = 128;
  ChannelChunks(std::uint32_t batch, std::uint32_t channels, std::uint32_t spatial) : batch(batch), channels(channels), spatial(spatial) {
    const std::uint64_t values = std::uint64_t{batch} * spatial;
    const std::uint64_t pieces = std::clamp<std::uint64_t>((values + chunkValues - 1) / chunkValues, 1, largestChunks);
    chunk = static_cast<std::uint32_t>(std::max<std::uint64_t>((values + pieces - 1) / pieces, 1));  // 1 for no values: no division by 0
    chunks = static_cast<std::uint32_t>((values + chunk - 1) / chunk);
  }
  std::uint32_t batch, channels, spatial, chunk = 0, chunks = 0;
};

Dispatch batchNormDispatch(ProgramCache& programs, BatchNormMode mode, const ChannelChunks& l, float epsilon, float momentum,
                           const std::string& label, std::vector<ShaderDefine> defines = {}) {
  defines.push_back(kindDefine(mode));
  Dispatch dispatch;
  dispatch.program = &programs.get("BatchNorm.glsl", defines);
  dispatch.label = label;
  dispatch.uniforms = {Uniform::u32(0, l.batch), Uniform::u32(1, l.channels), Uniform::u32(2, l.spatial), Uniform::f32(3, epsilon),
                       Uniform::f32(4, momentum),  Uniform::u32(5, l.chunk),    Uniform::u32(6, l.chunks)};
  return dispatch;
}

// The bits of BatchNorm.glsl's uniforms 7 and 8: which of the gradients of x, gamma and beta (and a residual's, bit 3,
// where `residual` is given) are wanted, and which of those are added to what earlier consumers wrote.
std::vector<Uniform> gradientFlags(const std::vector<std::optional<GradientTarget>>& targets,
                                   const std::optional<GradientTarget>& residual = std::nullopt) {
  std::uint32_t wanted = 0, added = 0;
  for (std::uint32_t i = 0; i < 4; ++i) {
    const std::optional<GradientTarget>& target = i < 3 ? targets[i] : residual;
    if (!target) continue;
    wanted |= 1u << i;
    if (target->accumulate) added |= 1u << i;
  }
  return {Uniform::u32(7, added), Uniform::u32(8, wanted)};
}

// Where a gradient target is bound: read-write where it is added to, written otherwise; one nobody wants binds
// `placeholder` in its place, never written (the shader checks `wanted`).
StorageBinding gradientBinding(std::uint32_t binding, const std::optional<GradientTarget>& target, const BufferView& placeholder) {
  if (!target) return {binding, placeholder, Access::read};
  return {binding, target->view, target->accumulate ? Access::readWrite : Access::write};
}

// Σg and Σg·x̂ of each chunk of each channel into `partials` (g = dy through the activation, x̂ the normalized x):
// the sums behind dgamma, dbeta and dx. `defines` say where the pass finds the mean and 1/deviation of each value in
// `stats` (ROW_STATISTICS) or which activation dy goes back through (ACTIVATION, RESIDUAL: `more` then binds what
// gives y, and `flags` say where g goes besides).
void recordGradientPartials(ProgramCache& programs, Plan& plan, const ChannelChunks& l, const std::string& name,
                            const std::vector<ShaderDefine>& defines, const BufferView& x, const BufferView& dy, const BufferView& stats,
                            const BufferView& partials, const std::vector<StorageBinding>& more = {}, const std::vector<Uniform>& flags = {}) {
  Dispatch sums = batchNormDispatch(programs, BatchNormMode::backwardPartials, l, 0, 0, name + " backward partial sums", defines);
  sums.groups = {l.chunks, l.channels, 1};
  sums.buffers = {{0, x, Access::read}, {1, partials, Access::write}, {4, stats, Access::read}, {6, dy, Access::read}};
  sums.buffers.insert(sums.buffers.end(), more.begin(), more.end());
  sums.uniforms.insert(sums.uniforms.end(), flags.begin(), flags.end());
  plan.record(sums);
}

// dgamma = Σg·x̂ and dbeta = Σg per channel, each written or added (the targets of inputs 1 and 2): the chunks'
// partials combined, one work group per channel.
void recordParameterGradients(ProgramCache& programs, Plan& plan, const ChannelChunks& l, const std::string& name, const BufferView& partials,
                              const std::vector<std::optional<GradientTarget>>& targets) {
  Dispatch total = batchNormDispatch(programs, BatchNormMode::backwardTotals, l, 0, 0, name + " backward sums");
  total.groups = {1, l.channels, 1};
  total.buffers = {{1, partials, Access::read}, gradientBinding(3, targets[1], partials), gradientBinding(5, targets[2], partials)};
  const std::vector<Uniform> flags = gradientFlags(targets);
  total.uniforms.insert(total.uniforms.end(), flags.begin(), flags.end());
  plan.record(total);
}

// x [N, C, spatial...], gamma, beta, running mean, running variance [C] (PyTorch's BatchNorm1d/2d), and with
// `residual` a sixth input r of x's shape added after the normalization (ResNet's block end), then the activation (a
// ReLU after the normalization, or after the add, without a pass of its own, either way).
class BatchNorm : public Op {
 public:
  BatchNorm(bool training, float momentum, float epsilon, Activation activation, bool residual)
      : training_(training), momentum_(momentum), epsilon_(epsilon), activation_(activation), residual_(residual) {}
  std::string name() const override {
    const std::string normalization = std::string(training_ ? "batch norm (training)" : "batch norm") + (residual_ ? " + add" : "");
    return activation_ == Activation::none ? normalization : normalization + " + " + activationName(activation_);
  }
  Shape outputShape(const std::vector<Shape>& in) const override {
    const std::size_t inputs = residual_ ? 6 : 5;
    const bool fits = in.size() == inputs && in[0].size() >= 2 &&
                      std::all_of(in.begin() + 1, in.begin() + 5, [&](const Shape& s) { return s == Shape{in[0][1]}; }) &&
                      (!residual_ || in[5] == in[0]);
    if (!fits) {
      std::string shapes;
      for (const Shape& shape : in) shapes += " " + describe(shape);
      throw Error(name() + " takes x [N, C, ...] and gamma, beta, running mean and running variance of [C]" +
                  (residual_ ? std::string(" and a residual of x's shape") : std::string()) + "; got" + shapes);
    }
    if (training_ && elementCount(in[0]) / in[0][1] < 2) {
      throw Error(name() + " needs more than one value per channel to estimate its variance; got " + describe(in[0]));
    }
    return in[0];
  }
  bool differentiable() const override { return training_; }
  bool passesGradient(std::size_t input) const override { return training_ && (input < 3 || input == 5); }
  // Inference is one elementwise pass over x (and r) with the running statistics.
  std::vector<std::size_t> inPlaceInputs() const override {
    if (training_) return {};
    return residual_ ? std::vector<std::size_t>{0, 5} : std::vector<std::size_t>{0};
  }
  std::size_t workspaceBytes(const std::vector<Shape>& in) const override {
    return training_ ? WorkspaceSize(layoutOf(in[0])).bytes : 0;
  }

  void forward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out) const override {
    const Layout l = layoutOf(in[0].shape);
    if (!training_) {
      Dispatch apply = elementwise(programs, BatchNormMode::inference, l, name());
      apply.buffers = {{0, in[0].view, Access::read}, {2, in[3].view, Access::read}, {3, in[4].view, Access::read},
                       {5, in[1].view, Access::read}, {6, in[2].view, Access::read}, {7, out.view, Access::write}};
      if (residual_) apply.buffers.push_back({1, in[5].view, Access::read});
      plan.record(apply);
      return;
    }
    GLNET_ASSERT(out.workspace.has_value(), "batch normalization keeps its statistics in its workspace");
    const Workspace w(l, *out.workspace);
    Dispatch partials = chunked(programs, BatchNormMode::forwardPartials, l, name() + " partial statistics");
    partials.buffers = {{0, in[0].view, Access::read}, {1, w.partials, Access::write}};
    plan.record(partials);
    // Each group combines the partials itself (the statistics pass folded in); the first keeps them in `stats`.
    Dispatch apply = chunked(programs, BatchNormMode::forward, l, name(), outputDefines());
    apply.buffers = {{0, in[0].view, Access::read}, {2, in[3].view, Access::readWrite}, {3, in[4].view, Access::readWrite},
                     {4, w.whole, Access::readWrite}, {5, in[1].view, Access::read}, {6, in[2].view, Access::read},
                     {7, out.view, Access::write}};
    if (residual_) apply.buffers.push_back({1, in[5].view, Access::read});
    apply.uniforms.push_back(w.partialsAt());
    plan.record(apply);
  }

  void backward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out,
                const GpuTensor& dOut, const std::vector<std::optional<GradientTarget>>& targets) const override {
    GLNET_ASSERT(training_, "batch normalization with running statistics runs in forward-only graphs");
    const std::optional<GradientTarget> residualTarget = residual_ ? targets[5] : std::nullopt;
    if (!targets[0] && !targets[1] && !targets[2] && !residualTarget) return;
    const Layout l = layoutOf(in[0].shape);
    const Workspace w(l, *out.workspace);
    // The residual's gradient g goes out with the partial sums, unless it is x's own gradient (r a view of x): that
    // is written or added by the dx pass, which runs after, so g is then added after it.
    const bool residualApart = residualTarget && (!targets[0] || disjoint(targets[0]->view, residualTarget->view));
    // A fused activation's derivative needs y: read where a residual was added, else recomputed from x with gamma and
    // beta.
    std::vector<StorageBinding> partialOperands;
    if (residual_) {
      partialOperands = {{7, out.view, Access::read}, gradientBinding(2, residualApart ? residualTarget : std::nullopt, w.whole)};
    } else if (activation_ != Activation::none) {
      partialOperands = {{3, in[2].view, Access::read}, {5, in[1].view, Access::read}};
    }
    recordGradientPartials(programs, plan, l, name(), outputDefines(), in[0].view, dOut.view, w.stats, w.partials, partialOperands,
                           gradientFlags(targets, residualApart ? residualTarget : std::nullopt));
    if (!targets[0]) {
      if (targets[1] || targets[2]) recordParameterGradients(programs, plan, l, name(), w.partials, targets);
      return;
    }
    // Each group combines the partials itself (the sums pass folded in); the first writes dgamma and dbeta.
    Dispatch dx = chunked(programs, BatchNormMode::backward, l, name() + " backward", outputDefines());
    dx.buffers = {{0, in[0].view, Access::read},  gradientBinding(1, targets[1], w.whole), gradientBinding(2, targets[2], w.whole),
                  {4, w.whole, Access::read},     {5, in[1].view, Access::read},         {6, dOut.view, Access::read},
                  gradientBinding(7, targets[0], w.whole)};
    if (residual_) {
      dx.buffers.push_back({3, out.view, Access::read});
    } else if (activation_ != Activation::none) {
      dx.buffers.push_back({3, in[2].view, Access::read});
    }
    const std::vector<Uniform> flags = gradientFlags(targets);
    dx.uniforms.insert(dx.uniforms.end(), flags.begin(), flags.end());
    dx.uniforms.push_back(w.partialsAt());
    plan.record(dx);
    if (residualTarget && !residualApart) {
      const ElementwiseOp gradient(programs, ElementwiseKind::activationGradient, activation_);
      plan.record(gradient(dOut.view, out.view, residualTarget->view, static_cast<std::uint32_t>(elementCount(in[0].shape)), true));
    }
  }

  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override {
    const Layout l = layoutOf(in[0].shape);
    const std::vector<Statistics> stats = statistics(in);
    std::vector<double> y(in[0].values->size());
    for (std::size_t i = 0; i < y.size(); ++i) {
      const std::size_t c = (i / l.spatial) % l.channels;
      const double residual = residual_ ? (*in[5].values)[i] : 0.0;
      y[i] = ref::activate(activation_, ((*in[0].values)[i] - stats[c].mean) * stats[c].invstd * (*in[1].values)[c] + (*in[2].values)[c] + residual);
    }
    return y;
  }

  std::vector<std::vector<double>> referenceBackward(const std::vector<HostTensor64>& in, const std::vector<double>& y,
                                                     const std::vector<double>& dOut) const override {
    const Layout l = layoutOf(in[0].shape);
    const std::vector<Statistics> stats = statistics(in);
    const auto& x = *in[0].values;
    std::vector<double> dy(dOut.size());
    for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = dOut[i] * ref::activationDerivative(activation_, y[i]);
    std::vector<double> dx(x.size()), dgamma(l.channels, 0.0), dbeta(l.channels, 0.0);
    for (std::size_t i = 0; i < x.size(); ++i) {
      const std::size_t c = (i / l.spatial) % l.channels;
      dbeta[c] += dy[i];
      dgamma[c] += dy[i] * (x[i] - stats[c].mean) * stats[c].invstd;
    }
    const double m = static_cast<double>(l.batch) * l.spatial;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const std::size_t c = (i / l.spatial) % l.channels;
      const double xhat = (x[i] - stats[c].mean) * stats[c].invstd;
      dx[i] = (*in[1].values)[c] * stats[c].invstd * (dy[i] - dbeta[c] / m - xhat * dgamma[c] / m);
    }
    std::vector<std::vector<double>> gradients{dx, dgamma, dbeta, {}, {}};
    if (residual_) gradients.push_back(dy);
    return gradients;
  }

 private:
  using Layout = ChannelChunks;
  // stats [2C], partials [2C·chunks], each from a 256-byte boundary so that it can be bound; the whole of it bound
  // at once where a pass reads the partials and the statistics (BatchNorm.glsl's `partialsAt`).
  struct WorkspaceSize {
    explicit WorkspaceSize(const Layout& l)
        : statsBytes(boundableBytes(2 * std::size_t{l.channels} * sizeof(float))),
          partialBytes(boundableBytes(2 * std::size_t{l.channels} * l.chunks * sizeof(float))),
          bytes(statsBytes + partialBytes) {}
    std::size_t statsBytes, partialBytes, bytes;
  };
  struct Workspace {
    Workspace(const Layout& l, const BufferView& view) : Workspace(WorkspaceSize(l), view) {}
    Workspace(const WorkspaceSize& size, const BufferView& view)
        : whole(*view.buffer, view.offset, size.bytes),
          stats(*view.buffer, view.offset, size.statsBytes),
          partials(*view.buffer, view.offset + size.statsBytes, size.partialBytes) {}
    Uniform partialsAt() const { return Uniform::u32(9, static_cast<std::uint32_t>((partials.offset - whole.offset) / sizeof(float))); }
    BufferView whole, stats, partials;
  };
  struct Statistics {
    double mean, invstd;
  };
  static Layout layoutOf(const Shape& x) {
    return Layout(x[0], x[1], static_cast<std::uint32_t>(elementCount(x) / (std::size_t{x[0]} * x[1])));
  }
  // The passes that compute y or go back through it: the activation, and whether a residual is added.
  std::vector<ShaderDefine> outputDefines() const {
    std::vector<ShaderDefine> defines{kindDefine(activation_)};
    if (residual_) defines.push_back({"RESIDUAL", "1"});
    return defines;
  }
  // One work group per (chunk, channel).
  Dispatch chunked(ProgramCache& programs, BatchNormMode mode, const Layout& l, const std::string& label,
                   std::vector<ShaderDefine> defines = {}) const {
    Dispatch dispatch = batchNormDispatch(programs, mode, l, epsilon_, momentum_, label, std::move(defines));
    dispatch.groups = {l.chunks, l.channels, 1};
    return dispatch;
  }
  // One invocation per value, the activation fused.
  Dispatch elementwise(ProgramCache& programs, BatchNormMode mode, const Layout& l, const std::string& label) const {
    Dispatch dispatch = batchNormDispatch(programs, mode, l, epsilon_, momentum_, label, outputDefines());
    dispatch.invocations = std::uint64_t{l.batch} * l.channels * l.spatial;
    dispatch.linear = true;
    return dispatch;
  }
  // The batch's statistics in training mode, the running ones otherwise.
  std::vector<Statistics> statistics(const std::vector<HostTensor64>& in) const {
    const Layout l = layoutOf(in[0].shape);
    std::vector<Statistics> result(l.channels);
    for (std::uint32_t c = 0; c < l.channels; ++c) {
      double mean = (*in[3].values)[c], variance = (*in[4].values)[c];
      if (training_) {
        double sum = 0, squares = 0;
        for (std::uint32_t n = 0; n < l.batch; ++n) {
          for (std::uint32_t s = 0; s < l.spatial; ++s) sum += (*in[0].values)[(std::size_t{n} * l.channels + c) * l.spatial + s];
        }
        mean = sum / (static_cast<double>(l.batch) * l.spatial);
        for (std::uint32_t n = 0; n < l.batch; ++n) {
          for (std::uint32_t s = 0; s < l.spatial; ++s) {
            const double d = (*in[0].values)[(std::size_t{n} * l.channels + c) * l.spatial + s] - mean;
            squares += d * d;
          }
        }
        variance = squares / (static_cast<double>(l.batch) * l.spatial);
      }
      result[c] = {mean, 1.0 / std::sqrt(variance + static_cast<double>(epsilon_))};
    }
    return result;
  }

  bool training_;
  float momentum_, epsilon_;
  Activation activation_;
  bool residual_;
};

// x [..., C] normalized over its last axis, gamma and beta [C]: y = (x − mean)/sqrt(var + ε)·gamma + beta per row
// (PyTorch's LayerNorm(C), ONNX's LayerNormalization along the last axis); trainable. The forward pass keeps each
// row's mean and 1/deviation in the workspace for the backward passes: dx row by row (AxisReduce.glsl), dgamma and
// dbeta summed over the rows in chunks as a batch normalization's are (BatchNorm.glsl, statistics per row).
class LayerNorm : public Op {
 public:
  explicit LayerNorm(float epsilon) : epsilon_(epsilon) {}
  std::string name() const override { return "layer norm"; }
  Shape outputShape(const std::vector<Shape>& in) const override {
    if (in.size() != 3 || in[0].empty() || elementCount(in[0]) == 0 || in[1] != Shape{in[0].back()} || in[2] != in[1]) {
      std::string shapes;
      for (const Shape& shape : in) shapes += " " + describe(shape);
      throw Error(name() + " takes x [..., C] of at least one value and gamma and beta of [C]; got" + shapes);
    }
    return in[0];
  }
  std::size_t workspaceBytes(const std::vector<Shape>& in) const override { return WorkspaceSize(layoutOf(in[0])).bytes; }

  void forward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out) const override {
    GLNET_ASSERT(out.workspace.has_value(), "layer normalization keeps its statistics in its workspace");
    const Layout l = layoutOf(in[0].shape);
    const Workspace w(l, *out.workspace);
    Dispatch dispatch = inference::axisDispatch(programs, AxisKind::layerNormalization, {{"STATISTICS", "1"}}, l.batch, l.channels, 1, epsilon_, name());
    dispatch.buffers = {{0, in[0].view, Access::read}, {1, in[1].view, Access::read}, {2, in[2].view, Access::read},
                        {3, out.view, Access::write}, {5, w.stats, Access::write}};
    plan.record(dispatch);
  }

  void backward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out,
                const GpuTensor& dOut, const std::vector<std::optional<GradientTarget>>& targets) const override {
    const Layout l = layoutOf(in[0].shape);
    const Workspace w(l, *out.workspace);
    if (targets[1] || targets[2]) {
      recordGradientPartials(programs, plan, l, name(), {{"ROW_STATISTICS", "1"}}, in[0].view, dOut.view, w.stats, w.partials);
      recordParameterGradients(programs, plan, l, name(), w.partials, targets);
    }
    if (!targets[0]) return;
    Dispatch dx = inference::axisDispatch(programs, AxisKind::layerNormalization, {{"LAYER_NORMALIZATION_GRADIENT", "1"}}, l.batch, l.channels, 1,
                                          epsilon_, name() + " backward");
    dx.buffers = {{0, in[0].view, Access::read}, {1, in[1].view, Access::read}, {2, dOut.view, Access::read},
                  {3, targets[0]->view, targets[0]->accumulate ? Access::readWrite : Access::write}, {5, w.stats, Access::read}};
    dx.uniforms.push_back(Uniform::u32(4, targets[0]->accumulate ? 1 : 0));
    plan.record(dx);
  }

  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override {
    const Layout l = layoutOf(in[0].shape);
    const std::vector<double>& x = *in[0].values;
    std::vector<double> y(x.size());
    for (std::size_t row = 0; row < l.batch; ++row) {
      const Statistics s = statistics(x, row, l.channels);
      for (std::size_t c = 0; c < l.channels; ++c) {
        const std::size_t i = row * l.channels + c;
        y[i] = (x[i] - s.mean) * s.invstd * (*in[1].values)[c] + (*in[2].values)[c];
      }
    }
    return y;
  }

  std::vector<std::vector<double>> referenceBackward(const std::vector<HostTensor64>& in, const std::vector<double>&,
                                                     const std::vector<double>& dy) const override {
    const Layout l = layoutOf(in[0].shape);
    const std::vector<double>& x = *in[0].values;
    const std::vector<double>& gamma = *in[1].values;
    std::vector<double> dx(x.size()), dgamma(l.channels, 0.0), dbeta(l.channels, 0.0);
    const double n = l.channels;
    for (std::size_t row = 0; row < l.batch; ++row) {
      const Statistics s = statistics(x, row, l.channels);
      double sumG = 0, sumGX = 0;
      for (std::size_t c = 0; c < l.channels; ++c) {
        const std::size_t i = row * l.channels + c;
        const double xhat = (x[i] - s.mean) * s.invstd;
        dbeta[c] += dy[i];
        dgamma[c] += dy[i] * xhat;
        sumG += dy[i] * gamma[c];
        sumGX += dy[i] * gamma[c] * xhat;
      }
      for (std::size_t c = 0; c < l.channels; ++c) {
        const std::size_t i = row * l.channels + c;
        const double xhat = (x[i] - s.mean) * s.invstd;
        dx[i] = s.invstd * (dy[i] * gamma[c] - sumG / n - xhat * sumGX / n);
      }
    }
    return {dx, dgamma, dbeta};
  }

 private:
  // The rows of x as the batch of BatchNorm.glsl's [N, C, 1] layout.
  using Layout = ChannelChunks;
  static Layout layoutOf(const Shape& x) { return Layout(static_cast<std::uint32_t>(elementCount(x) / x.back()), x.back(), 1); }
  // stats [2 per row], partials [2C·chunks], each from a 256-byte boundary so that it can be bound.
  struct WorkspaceSize {
    explicit WorkspaceSize(const Layout& l)
        : statsBytes(boundableBytes(2 * std::size_t{l.batch} * sizeof(float))),
          partialBytes(boundableBytes(2 * std::size_t{l.channels} * l.chunks * sizeof(float))),
          bytes(statsBytes + partialBytes) {}
    std::size_t statsBytes, partialBytes, bytes;
  };
  struct Workspace {
    Workspace(const Layout& l, const BufferView& view) : Workspace(WorkspaceSize(l), view) {}
    Workspace(const WorkspaceSize& size, const BufferView& view)
        : stats(*view.buffer, view.offset, size.statsBytes),
          partials(*view.buffer, view.offset + size.statsBytes, size.partialBytes) {}
    BufferView stats, partials;
  };
  struct Statistics {
    double mean, invstd;
  };
  Statistics statistics(const std::vector<double>& x, std::size_t row, std::size_t channels) const {
    double sum = 0, squares = 0;
    for (std::size_t c = 0; c < channels; ++c) sum += x[row * channels + c];
    const double mean = sum / static_cast<double>(channels);
    for (std::size_t c = 0; c < channels; ++c) squares += (x[row * channels + c] - mean) * (x[row * channels + c] - mean);
    return {mean, 1.0 / std::sqrt(squares / static_cast<double>(channels) + static_cast<double>(epsilon_))};
  }

  float epsilon_;
};

}  // namespace

std::shared_ptr<const Op> layerNormOp(float epsilon) { return std::make_shared<LayerNorm>(epsilon); }

std::shared_ptr<const Op> batchNormOp(bool training, float momentum, float epsilon, Activation activation, bool residual) {
  return std::make_shared<BatchNorm>(training, momentum, epsilon, activation, residual);
}

}  // namespace glnet
