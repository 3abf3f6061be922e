#include "ops/Normalize.h"

#include "ops/Groups.h"

namespace glnet {

NormalizeOp::NormalizeOp(ProgramCache& programs) : program_(programs.get("Normalize.glsl")) {}

Dispatch NormalizeOp::operator()(const BufferView& pixels, const BufferView& output, std::uint32_t count,
                                 const Uniform& firstPixel, float mean, float std) const {
  Dispatch dispatch;
  dispatch.program = &program_;
  dispatch.label = "normalize";
  dispatch.buffers = {{0, pixels, Access::read}, {1, output, Access::write}};
  dispatch.uniforms = {Uniform::u32(0, count), firstPixel, Uniform::f32(2, mean), Uniform::f32(3, 1.0f / std)};
  dispatch.groups = linearGroups(count, program_);
  dispatch.linear = true;
  return dispatch;
}

}  // namespace glnet
