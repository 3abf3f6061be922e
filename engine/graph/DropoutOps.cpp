#include "base/check.h"
#include "graph/Ops.h"
#include "plan/Groups.h"

#include <cmath>

namespace glnet {
namespace {

std::uint32_t mix32(std::uint32_t h) {
  h ^= h >> 16;
  h *= 0x7feb352du;
  h ^= h >> 15;
  h *= 0x846ca68bu;
  h ^= h >> 16;
  return h;
}

// The hash value a kept element's top 24 bits reach: the rate in units of 2^-24, compared as integers so that the GPU
// and the reference agree on every element.
std::uint32_t threshold(float rate) { return static_cast<std::uint32_t>(std::lround(static_cast<double>(rate) * 16777216.0)); }

class Dropout : public Op {
 public:
  Dropout(float rate, std::uint32_t salt, std::uint32_t referenceStep) : rate_(rate), salt_(salt), referenceStep_(referenceStep) {
    GLNET_ASSERT(rate >= 0 && rate < 1, "dropout drops a fraction below 1");
  }
  std::string name() const override { return "dropout"; }
  Shape outputShape(const std::vector<Shape>& in) const override {
    if (in.size() != 1) throw Error(name() + " takes one input");
    return in[0];
  }
  void forward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out) const override {
    plan.record(dispatch(programs, false, in[0].view, out.view, elementCount(in[0].shape), false));
  }
  void backward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor&, const GpuTensor& dOut,
                const std::vector<std::optional<GradientTarget>>& targets) const override {
    if (!targets[0]) return;
    plan.record(dispatch(programs, true, dOut.view, targets[0]->view, elementCount(in[0].shape), targets[0]->accumulate));
  }
  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override { return masked(*in[0].values); }
  std::vector<std::vector<double>> referenceBackward(const std::vector<HostTensor64>&, const std::vector<double>&,
                                                     const std::vector<double>& dy) const override {
    return {masked(dy)};
  }

 private:
  Dispatch dispatch(ProgramCache& programs, bool gradient, const BufferView& x, const BufferView& y, std::size_t count, bool accumulate) const {
    const Program& program = programs.get("Dropout.glsl", gradient ? std::vector<ShaderDefine>{{"DROPOUT_GRADIENT", "1"}} : std::vector<ShaderDefine>{});
    Dispatch d = linearDispatch(program, name() + (gradient ? " backward" : ""), count);
    d.buffers = {{0, x, Access::read}, {1, y, gradient && accumulate ? Access::readWrite : Access::write}};
    d.uniforms = {Uniform::u32(0, static_cast<std::uint32_t>(count)), Uniform::u32(1, salt_), Uniform::fromParameter(2, stepPlanParameter),
                  Uniform::u32(3, threshold(rate_)), Uniform::f32(4, 1.0f / (1.0f - rate_))};
    if (gradient) d.uniforms.push_back(Uniform::u32(5, accumulate ? 1 : 0));
    return d;
  }
  std::vector<double> masked(const std::vector<double>& x) const {
    std::vector<double> y(x.size());
    const double scale = 1.0 / (1.0 - static_cast<double>(rate_));
    for (std::size_t i = 0; i < x.size(); ++i) {
      y[i] = dropoutKeeps(static_cast<std::uint32_t>(i), salt_, referenceStep_, rate_) ? x[i] * scale : 0.0;
    }
    return y;
  }

  float rate_;
  std::uint32_t salt_, referenceStep_;
};

}  // namespace

bool dropoutKeeps(std::uint32_t index, std::uint32_t salt, std::uint32_t step, float rate) {
  const std::uint32_t stream = mix32(salt ^ mix32(step));
  return (mix32(index * 0x9e3779b9u + stream) >> 8) >= threshold(rate);
}

std::shared_ptr<const Op> dropoutOp(float rate, std::uint32_t salt, std::uint32_t referenceStep) {
  return std::make_shared<Dropout>(rate, salt, referenceStep);
}

}  // namespace glnet
