#include "ops/Elementwise.h"

#include "base/check.h"
#include "numbers/ShaderModes.h"
#include "plan/Groups.h"

namespace glnet {

ElementwiseOp::ElementwiseOp(ProgramCache& programs, ElementwiseKind kind, Activation activation)
    : kind_(kind),
      programs_(programs),
      activation_(activation),
      program_(programs.get("Elementwise.glsl", {kindDefine(kind), kindDefine(activation)})) {}

Dispatch ElementwiseOp::operator()(const BufferView& a, const BufferView& b, const BufferView& out, std::uint32_t count,
                                   bool accumulate, std::uint32_t columns, float scale) const {
  Dispatch dispatch;
  dispatch.program = &program_;
  dispatch.label = kindName(kind_);
  dispatch.buffers = {{0, a, Access::read}, {1, b, Access::read}, {2, out, accumulate ? Access::readWrite : Access::write}};
  dispatch.uniforms = {Uniform::u32(0, count), Uniform::u32(1, columns), Uniform::u32(2, accumulate ? 1u : 0u),
                       Uniform::f32(3, scale)};
  dispatch.invocations = count;
  dispatch.linear = true;
  return dispatch;
}

Dispatch ElementwiseOp::twoResults(const BufferView& a, const BufferView& b, const BufferView& out, bool accumulate,
                                   const BufferView& second, bool accumulateSecond, std::uint32_t count) const {
  GLNET_ASSERT(disjoint(out, second), "the two results of one elementwise pass overlap");
  Dispatch dispatch = (*this)(a, b, out, count, accumulate);
  dispatch.program = &programs_.get("Elementwise.glsl", {kindDefine(kind_), kindDefine(activation_), {"TWO_RESULTS", "1"}});
  dispatch.buffers.push_back({3, second, accumulateSecond ? Access::readWrite : Access::write});
  dispatch.uniforms[2] = Uniform::u32(2, (accumulate ? 1u : 0u) | (accumulateSecond ? 2u : 0u));
  return dispatch;
}

MeanSquaredErrorOp::MeanSquaredErrorOp(ProgramCache& programs)
    : loss_(programs.get("Loss.glsl", {kindDefine(LossMode::loss), {"LOCAL_SIZE_X", "64"}})),
      gradient_(programs.get("Loss.glsl", {kindDefine(LossMode::gradient)})) {}

Dispatch MeanSquaredErrorOp::loss(const BufferView& y, const BufferView& target, const BufferView& loss,
                                  std::uint32_t rows, std::uint32_t columns) const {
  Dispatch dispatch;
  dispatch.program = &loss_;
  dispatch.label = "mse";
  dispatch.buffers = {{0, y, Access::read}, {1, target, Access::read}, {2, loss, Access::write}};
  dispatch.uniforms = {Uniform::u32(0, rows), Uniform::u32(1, columns), Uniform::u32(2, 0)};
  dispatch.invocations = rows;
  dispatch.linear = true;
  return dispatch;
}

Dispatch MeanSquaredErrorOp::gradient(const BufferView& y, const BufferView& target, const BufferView& rowGradient,
                                      const BufferView& dy, std::uint32_t rows, std::uint32_t columns, bool accumulate) const {
  Dispatch dispatch;
  dispatch.program = &gradient_;
  dispatch.label = "mse gradient";
  dispatch.buffers = {{0, y, Access::read},
                      {1, target, Access::read},
                      {2, dy, accumulate ? Access::readWrite : Access::write},
                      {3, rowGradient, Access::read}};
  dispatch.uniforms = {Uniform::u32(0, rows), Uniform::u32(1, columns), Uniform::u32(2, accumulate ? 1u : 0u)};
  dispatch.invocations = std::uint64_t{rows} * columns;
  dispatch.linear = true;
  return dispatch;
}

ReduceOp::ReduceOp(ProgramCache& programs) : program_(programs.get("Reduce.glsl")), squares_(programs.get("Reduce.glsl", {{"REDUCE_SQUARES", "1"}})) {}

Dispatch ReduceOp::sumInto(const BufferView& values, std::uint32_t count, const BufferView& totals,
                           std::uint32_t slot) const {
  Dispatch dispatch;
  dispatch.program = &program_;
  dispatch.label = "reduce";
  dispatch.buffers = {{0, values, Access::read}, {1, totals, Access::readWrite}};
  dispatch.uniforms = {Uniform::u32(0, count), Uniform::u32(1, slot)};
  return dispatch;
}

Dispatch ReduceOp::squaresInto(const BufferView& values, std::uint32_t count, const BufferView& totals, std::uint32_t slot) const {
  Dispatch dispatch = sumInto(values, count, totals, slot);
  dispatch.program = &squares_;
  dispatch.label = "squared norm";
  dispatch.buffers[1].access = Access::write;
  return dispatch;
}

}  // namespace glnet
