// Pointwise functions, per-channel affine maps (BatchNorm, squeeze-excite gates) and NumPy-broadcast arithmetic of
// imported models (InferenceOps.h).
#include "graph/InferenceOp.h"

#include "gl/Limits.h"
#include "base/check.h"
#include "plan/Groups.h"
#include "ops/StridedCopy.h"
#include "ref/Reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>

namespace glnet {
namespace inference {
namespace {

// Trainable for the functions Pointwise::trainable names.
class PointwiseOp : public InferenceOp {
 public:
  explicit PointwiseOp(Pointwise function) : function_(function) {}
  bool differentiable() const override { return function_.trainable(); }
  bool passesGradient(std::size_t) const override { return function_.trainable(); }
  void backward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor&, const GpuTensor& dOut,
                const std::vector<std::optional<GradientTarget>>& targets) const override {
    GLNET_ASSERT(function_.trainable(), "this function runs in forward-only graphs");
    if (!targets[0]) return;
    std::vector<ShaderDefine> defines = function_.defines();
    defines.push_back({"UNARY_GRADIENT", "1"});
    Dispatch dispatch = linearDispatch(programs.get("Unary.glsl", defines, {"Pointwise.glsl"}), name() + " gradient", elementCount(in[0].shape));
    dispatch.buffers = {{0, in[0].view, Access::read}, {1, targets[0]->view, targets[0]->accumulate ? Access::readWrite : Access::write},
                        {2, dOut.view, Access::read}};
    dispatch.uniforms = {Uniform::u32(0, count32(in[0].shape)), Uniform::u32(1, targets[0]->accumulate ? 1 : 0)};
    plan.record(dispatch);
  }
  std::vector<std::vector<double>> referenceBackward(const std::vector<HostTensor64>& in, const std::vector<double>&,
                                                     const std::vector<double>& dy) const override {
    GLNET_ASSERT(function_.trainable(), "this function runs in forward-only graphs");
    std::vector<double> dx(dy.size());
    for (std::size_t i = 0; i < dx.size(); ++i) dx[i] = dy[i] * function_.derivative((*in[0].values)[i]);
    return {dx};
  }
  std::string name() const override { return function_.name(); }
  std::vector<std::size_t> inPlaceInputs() const override { return {0}; }
  Shape outputShape(const std::vector<Shape>& in) const override {
    if (in.size() != 1) throw Error(name() + " takes one input");
    return in[0];
  }
  void forward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out) const override {
    const Program& program = programs.get("Unary.glsl", function_.defines(), {"Pointwise.glsl"});
    Dispatch dispatch = linearDispatch(program, name(), elementCount(out.shape));
    dispatch.buffers = {{0, in[0].view, Access::read}, {1, out.view, Access::write}};
    dispatch.uniforms = {Uniform::u32(0, count32(out.shape))};
    plan.record(dispatch);
  }
  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override {
    std::vector<double> y(*in[0].values);
    for (double& v : y) v = function_(v);
    return y;
  }

 private:
  Pointwise function_;
};

// y = after(x · scale + shift) per channel of x [N, C, spatial...] (a BatchNormalization no layer absorbs), or
// y = after(x · scale) with a scale per image and channel (a squeeze-excite gate); ChannelAffine.glsl.
class ChannelAffineOp : public InferenceOp {
 public:
  ChannelAffineOp(bool shift, Pointwise after) : shift_(shift), after_(after) {}
  std::string name() const override {
    return std::string(shift_ ? "channel affine" : "channel scale") + (after_.kind != PointwiseKind::identity ? " + " + after_.name() : "");
  }
  std::vector<std::size_t> inPlaceInputs() const override { return {0}; }
  Shape outputShape(const std::vector<Shape>& in) const override {
    const bool fits = in.size() == (shift_ ? 3u : 2u) && in[0].size() >= 2 &&
                      (elementCount(in[1]) == in[0][1] || (!shift_ && elementCount(in[1]) == std::size_t{in[0][0]} * in[0][1])) &&
                      (!shift_ || elementCount(in[2]) == in[0][1]);
    if (!fits) {
      throw Error(name() + " takes x [N, C, ...] and " + (shift_ ? "scale and shift of C values" : "a scale of C or N·C values") +
                  "; got " + shapesText(in));
    }
    return in[0];
  }
  void forward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out) const override {
    const Shape& x = in[0].shape;
    const std::uint64_t plane = elementCount(x) / (std::uint64_t{x[0]} * x[1]);
    const bool vec4 = plane % 4 == 0 && in[0].view.offset % 16 == 0 && out.view.offset % 16 == 0;
    std::vector<ShaderDefine> defines = after_.defines();
    if (shift_) defines.push_back({"SHIFT", "1"});
    if (vec4) defines.push_back({"VEC4", "1"});
    const Program& program = programs.get("ChannelAffine.glsl", defines, {"Pointwise.glsl"});
    const std::uint64_t unit = vec4 ? 4 : 1;
    Dispatch dispatch = linearDispatch(program, name(), elementCount(x) / unit);
    dispatch.buffers = {{0, in[0].view, Access::read}, {1, in[1].view, Access::read}, {3, out.view, Access::write}};
    if (shift_) dispatch.buffers.push_back({2, in[2].view, Access::read});
    dispatch.uniforms = {Uniform::u32(0, static_cast<std::uint32_t>(elementCount(x) / unit)), Uniform::u32(1, static_cast<std::uint32_t>(plane / unit)),
                         Uniform::u32(2, static_cast<std::uint32_t>(elementCount(in[1].shape)))};
    plan.record(dispatch);
  }
  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override {
    const std::vector<double>& x = *in[0].values;
    const std::size_t plane = x.size() / (std::size_t{in[0].shape[0]} * in[0].shape[1]), period = in[1].values->size();
    std::vector<double> y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      const std::size_t channel = (i / plane) % period;
      y[i] = after_(x[i] * (*in[1].values)[channel] + (shift_ ? (*in[2].values)[channel] : 0.0));
    }
    return y;
  }

 private:
  bool shift_;
  Pointwise after_;
};


// Broadcast.glsl over operands broadcast to `out`: a and b at bindings 0 and 1, and with SELECT the condition c
// (`condition`, binding 3); each operand's strides in its uniforms.
void recordBroadcast(ProgramCache& programs, Plan& plan, const std::string& name, std::vector<ShaderDefine> defines,
                     const GpuTensor& a, const GpuTensor& b, const GpuTensor* condition, const GpuTensor& out) {
  defines.push_back({"RANK", std::to_string(std::max<std::size_t>(out.shape.size(), 1))});
  if (condition) defines.push_back({"SELECT", "1"});
  const Program& program = programs.get("Broadcast.glsl", defines, {"Pointwise.glsl"});
  Dispatch dispatch = linearDispatch(program, name, elementCount(out.shape));
  dispatch.buffers = {{0, a.view, Access::read}, {1, b.view, Access::read}, {2, out.view, Access::write}};
  if (condition) dispatch.buffers.push_back({3, condition->view, Access::read});
  dispatch.uniforms = {Uniform::u32(0, count32(out.shape))};
  const std::vector<std::int64_t> outStrides = stridesOf(out.shape);
  std::vector<std::pair<int, std::vector<std::int64_t>>> operands{{7, broadcastStrides(a.shape, out.shape)}, {13, broadcastStrides(b.shape, out.shape)}};
  if (condition) operands.emplace_back(19, broadcastStrides(condition->shape, out.shape));
  for (std::size_t k = 0; k < largestRank; ++k) {
    const bool used = k < out.shape.size();
    dispatch.uniforms.push_back(Uniform::u32(1 + static_cast<int>(k), used ? static_cast<std::uint32_t>(outStrides[k]) : 1));
    for (const auto& [location, strides] : operands) {
      dispatch.uniforms.push_back(Uniform::u32(location + static_cast<int>(k), used ? static_cast<std::uint32_t>(strides[k]) : 0));
    }
  }
  plan.record(dispatch);
}

// The float64 values of `combine` over the operands' elements, broadcast to `out` as NumPy does.
std::vector<double> broadcastReference(const std::vector<HostTensor64>& in, const Shape& out,
                                       const std::function<double(const std::vector<double>&)>& combine) {
  std::vector<double> y, operands(in.size());
  y.reserve(elementCount(out));
  forEachCoordinate(out, [&](const std::vector<std::uint32_t>& c) {
    for (std::size_t k = 0; k < in.size(); ++k) {
      const HostTensor64& t = in[k];
      std::size_t index = 0;
      for (std::size_t i = 0; i < t.shape.size(); ++i) index = index * t.shape[i] + (t.shape[i] == 1 ? 0 : c[out.size() - t.shape.size() + i]);
      operands[k] = (*t.values)[index];
    }
    y.push_back(combine(operands));
  });
  return y;
}

class BroadcastOp : public InferenceOp {
 public:
  BroadcastOp(BinaryKind kind, Pointwise after) : kind_(kind), after_(after) {}
  std::string name() const override {
    return std::string(kindName(kind_)) + (after_.kind == PointwiseKind::identity ? "" : " + " + after_.name());
  }
  // An operand of the output's shape is read at the output's own index (its broadcast strides are the output's).
  std::vector<std::size_t> inPlaceInputs() const override { return {0, 1}; }
  Shape outputShape(const std::vector<Shape>& in) const override {
    if (in.size() != 2) throw Error(name() + " takes two inputs");
    const Shape out = broadcastShapes(in[0], in[1]);
    checkRank(name(), out);
    return out;
  }
  void forward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out) const override {
    std::vector<ShaderDefine> defines = after_.defines();
    defines.push_back(kindDefine(kind_));
    recordBroadcast(programs, plan, name(), defines, in[0], in[1], nullptr, out);
  }
  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override {
    return broadcastReference(in, outputShape(shapesOf(in)), [&](const std::vector<double>& v) { return after_(ref::combine(kind_, v[0], v[1])); });
  }

 private:
  BinaryKind kind_;
  Pointwise after_;
};

// ONNX's Where: y = c ? x : y over the three inputs (c, x, y) broadcast together; c any nonzero value, NaN included.
class WhereOp : public InferenceOp {
 public:
  std::string name() const override { return "where"; }
  Shape outputShape(const std::vector<Shape>& in) const override {
    if (in.size() != 3) throw Error("where takes a condition and two tensors");
    const Shape out = broadcastShapes(broadcastShapes(in[0], in[1]), in[2]);
    checkRank(name(), out);
    return out;
  }
  void forward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out) const override {
    recordBroadcast(programs, plan, name(), {}, in[1], in[2], &in[0], out);
  }
  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override {
    return broadcastReference(in, outputShape(shapesOf(in)), [](const std::vector<double>& v) { return v[0] != 0 ? v[1] : v[2]; });
  }
};

}  // namespace
}  // namespace inference

std::shared_ptr<const Op> pointwiseOp(Pointwise function) { return std::make_shared<inference::PointwiseOp>(function); }
std::shared_ptr<const Op> broadcastOp(BinaryKind kind, Pointwise after) { return std::make_shared<inference::BroadcastOp>(kind, after); }
std::shared_ptr<const Op> whereOp() { return std::make_shared<inference::WhereOp>(); }
std::shared_ptr<const Op> channelAffineOp(bool shift, Pointwise after) { return std::make_shared<inference::ChannelAffineOp>(shift, after); }

}  // namespace glnet
