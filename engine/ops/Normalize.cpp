#include "ops/Normalize.h"

namespace glnet {

NormalizeOp::NormalizeOp() : program_(Program::compute("Normalize.glsl")) {}

Dispatch NormalizeOp::operator()(const Buffer& pixels, const Buffer& output, std::uint32_t count,
                                 const Uniform& firstPixel, float mean, float std) const {
  Dispatch dispatch;
  dispatch.program = &program_;
  dispatch.label = "normalize";
  dispatch.buffers = {{0, &pixels, Access::read}, {1, &output, Access::write}};
  dispatch.uniforms = {Uniform::u32(0, count), firstPixel, Uniform::f32(2, mean), Uniform::f32(3, 1.0f / std)};
  dispatch.groups = {(count + program_.localSize()[0] - 1) / program_.localSize()[0], 1, 1};
  dispatch.linear = true;
  return dispatch;
}

}  // namespace glnet
