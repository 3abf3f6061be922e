#include "ops/Normalize.h"

#include "ops/Groups.h"

namespace glnet {

NormalizeOp::NormalizeOp(ProgramCache& programs)
    : program_(programs.get("Normalize.glsl")), fourPerInvocation_(programs.get("Normalize.glsl", {{"FOUR_PER_INVOCATION", "1"}})) {}

Dispatch NormalizeOp::operator()(const BufferView& pixels, const BufferView& output, std::uint32_t count,
                                 const Uniform& firstPixel, float mean, float std, bool wordAligned) const {
  const bool four = wordAligned && count % 4 == 0 && output.offset % 16 == 0;
  const Program& program = four ? fourPerInvocation_ : program_;
  Dispatch dispatch;
  dispatch.program = &program;
  dispatch.label = "normalize";
  dispatch.buffers = {{0, pixels, Access::read}, {1, output, Access::write}};
  dispatch.uniforms = {Uniform::u32(0, count), firstPixel, Uniform::f32(2, mean), Uniform::f32(3, 1.0f / std)};
  dispatch.groups = linearGroups(four ? count / 4 : count, program);
  dispatch.linear = true;
  return dispatch;
}

}  // namespace glnet
