#include "gl/check.h"
#include "graph/Ops.h"
#include "ops/Groups.h"

#include <cmath>

namespace glnet {
namespace {

// x [N, C, spatial...], gamma, beta, running mean, running variance [C] (PyTorch's BatchNorm1d/2d).
class BatchNorm : public Op {
 public:
  BatchNorm(bool training, float momentum, float epsilon) : training_(training), momentum_(momentum), epsilon_(epsilon) {}
  std::string name() const override { return training_ ? "batch norm (training)" : "batch norm"; }
  Shape outputShape(const std::vector<Shape>& in) const override {
    const bool fits = in.size() == 5 && in[0].size() >= 2 &&
                      std::all_of(in.begin() + 1, in.end(), [&](const Shape& s) { return s == Shape{in[0][1]}; });
    if (!fits) {
      std::string shapes;
      for (const Shape& shape : in) shapes += " " + describe(shape);
      throw Error(name() + " takes x [N, C, ...] and gamma, beta, running mean and running variance of [C]; got" + shapes);
    }
    if (training_ && elementCount(in[0]) / in[0][1] < 2) {
      throw Error(name() + " needs more than one value per channel to estimate its variance; got " + describe(in[0]));
    }
    return in[0];
  }
  bool differentiable() const override { return training_; }
  bool passesGradient(std::size_t input) const override { return training_ && input < 3; }
  std::size_t workspaceBytes(const std::vector<Shape>& in) const override { return training_ ? 2 * std::size_t{in[0][1]} * sizeof(float) : 0; }

  void forward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out) const override {
    const Layout l = layoutOf(in[0].shape);
    Dispatch dispatch;
    dispatch.label = name();
    dispatch.uniforms = uniforms(l);
    if (training_) {
      GLNET_ASSERT(out.workspace.has_value(), "batch normalization keeps its statistics in its workspace");
      dispatch.program = &programs.get("BatchNorm.glsl", {{"BN_MODE", "0"}});
      dispatch.groups = {l.channels, 1, 1};
      dispatch.buffers = {{0, in[0].view, Access::read},      {1, in[1].view, Access::read},
                          {2, in[2].view, Access::read},      {3, in[3].view, Access::readWrite},
                          {4, in[4].view, Access::readWrite}, {5, *out.workspace, Access::write},
                          {6, out.view, Access::write}};
    } else {
      dispatch.program = &programs.get("BatchNorm.glsl", {{"BN_MODE", "2"}});
      dispatch.groups = linearGroups(elementCount(in[0].shape), *dispatch.program);
      dispatch.linear = true;
      dispatch.buffers = {{0, in[0].view, Access::read}, {1, in[1].view, Access::read}, {2, in[2].view, Access::read},
                          {3, in[3].view, Access::read}, {4, in[4].view, Access::read}, {6, out.view, Access::write}};
    }
    plan.record(dispatch);
  }

  void backward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out,
                const GpuTensor& dOut, const std::vector<std::optional<GradientTarget>>& targets) const override {
    GLNET_ASSERT(training_, "batch normalization with running statistics runs in forward-only graphs");
    std::uint32_t wanted = 0, added = 0;
    for (std::uint32_t i = 0; i < 3; ++i) {
      if (!targets[i]) continue;
      wanted |= 1u << i;
      if (targets[i]->accumulate) added |= 1u << i;
    }
    if (!wanted) return;
    const Layout l = layoutOf(in[0].shape);
    Dispatch dispatch;
    dispatch.label = name() + " backward";
    dispatch.program = &programs.get("BatchNorm.glsl", {{"BN_MODE", "1"}});
    dispatch.groups = {l.channels, 1, 1};
    dispatch.uniforms = uniforms(l);
    dispatch.uniforms.push_back(Uniform::u32(5, added));
    dispatch.uniforms.push_back(Uniform::u32(6, wanted));
    // A gradient nobody wants binds dy in its place, never written (the shader checks `wanted`).
    const auto target = [&](std::size_t i) { return targets[i] ? targets[i]->view : dOut.view; };
    dispatch.buffers = {{0, in[0].view, Access::read},  {1, in[1].view, Access::read},    {5, *out.workspace, Access::read},
                        {7, dOut.view, Access::read},   {8, target(0), Access::readWrite}, {9, target(1), Access::readWrite},
                        {10, target(2), Access::readWrite}};
    plan.record(dispatch);
  }

  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override {
    const Layout l = layoutOf(in[0].shape);
    const std::vector<Statistics> stats = statistics(in);
    std::vector<double> y(in[0].values->size());
    for (std::size_t i = 0; i < y.size(); ++i) {
      const std::size_t c = (i / l.spatial) % l.channels;
      y[i] = ((*in[0].values)[i] - stats[c].mean) * stats[c].invstd * (*in[1].values)[c] + (*in[2].values)[c];
    }
    return y;
  }

  std::vector<std::vector<double>> referenceBackward(const std::vector<HostTensor64>& in, const std::vector<double>&,
                                                     const std::vector<double>& dy) const override {
    const Layout l = layoutOf(in[0].shape);
    const std::vector<Statistics> stats = statistics(in);
    const auto& x = *in[0].values;
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
    return {dx, dgamma, dbeta, {}, {}};
  }

 private:
  struct Layout {
    std::uint32_t batch, channels, spatial;
  };
  struct Statistics {
    double mean, invstd;
  };
  static Layout layoutOf(const Shape& x) {
    return {x[0], x[1], static_cast<std::uint32_t>(elementCount(x) / (std::size_t{x[0]} * x[1]))};
  }
  std::vector<Uniform> uniforms(const Layout& l) const {
    return {Uniform::u32(0, l.batch), Uniform::u32(1, l.channels), Uniform::u32(2, l.spatial), Uniform::f32(3, epsilon_),
            Uniform::f32(4, momentum_)};
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
};

}  // namespace

std::shared_ptr<const Op> batchNormOp(bool training, float momentum, float epsilon) {
  return std::make_shared<BatchNorm>(training, momentum, epsilon);
}

}  // namespace glnet
