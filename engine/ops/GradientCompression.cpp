#include "ops/GradientCompression.h"

#include "numbers/ShaderModes.h"
#include "plan/Groups.h"

namespace glnet {

GradientCompressionOp::GradientCompressionOp(ProgramCache& programs)
    : compress_(programs.get("GradientCompression.glsl", {kindDefine(CompressionMode::compress)})),
      expand_(programs.get("GradientCompression.glsl", {kindDefine(CompressionMode::expand)})) {}

Dispatch GradientCompressionOp::compress(const BufferView& gradients, const BufferView& residuals, const BufferView& packed,
                                         std::uint32_t floats) const {
  Dispatch d = linearDispatch(compress_, "gradients to bfloat16", (std::uint64_t{floats} + 1) / 2);
  d.buffers = {{0, gradients, Access::read}, {1, residuals, Access::readWrite}, {2, packed, Access::write}};
  d.uniforms = {Uniform::u32(0, floats)};
  return d;
}

Dispatch GradientCompressionOp::expand(const BufferView& packed, const BufferView& gradients, std::uint32_t floats) const {
  Dispatch d = linearDispatch(expand_, "gradients from bfloat16", (std::uint64_t{floats} + 1) / 2);
  d.buffers = {{0, gradients, Access::write}, {2, packed, Access::read}};
  d.uniforms = {Uniform::u32(0, floats)};
  return d;
}

}  // namespace glnet
