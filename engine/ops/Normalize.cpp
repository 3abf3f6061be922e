#include "ops/Normalize.h"

#include "base/check.h"
#include "plan/Groups.h"

namespace glnet {

std::vector<Uniform> scalingUniforms(const InputFormat& format, std::uint32_t pixelsPerImage, int meanLocation, int planeLocation) {
  const std::size_t channels = format.channels();
  GLNET_ASSERT(channels >= 1 && channels <= mostScaledChannels && format.std.size() == channels && pixelsPerImage % channels == 0,
               "one mean and deviation, or one per channel of whole planes");
  std::vector<Uniform> uniforms{Uniform::u32(planeLocation, std::max<std::uint32_t>(pixelsPerImage / static_cast<std::uint32_t>(channels), 1))};
  for (std::size_t c = 0; c < mostScaledChannels; ++c) {
    const std::size_t from = std::min(c, channels - 1);
    uniforms.push_back(Uniform::f32(meanLocation + static_cast<int>(c), format.mean[from]));
    uniforms.push_back(Uniform::f32(meanLocation + 4 + static_cast<int>(c), 1.0f / format.std[from]));
  }
  return uniforms;
}

NormalizeOp::NormalizeOp(ProgramCache& programs)
    : program_(programs.get("Normalize.glsl")),
      tokens_(programs.get("Normalize.glsl", {{"TOKEN_IDS", "1"}})),
      fourPerInvocation_(programs.get("Normalize.glsl", {{"FOUR_PER_INVOCATION", "1"}})) {}

Dispatch NormalizeOp::tokens(const BufferView& ids, const BufferView& output, std::uint32_t count, const Uniform& firstId) const {
  Dispatch dispatch = linearDispatch(tokens_, "token ids", count);
  dispatch.buffers = {{0, ids, Access::read}, {1, output, Access::write}};
  dispatch.uniforms = {Uniform::u32(0, count), firstId};
  return dispatch;
}

Dispatch NormalizeOp::operator()(const BufferView& pixels, const BufferView& output, std::uint32_t count,
                                 const Uniform& firstPixel, const InputFormat& format, std::uint32_t pixelsPerImage, bool wordAligned) const {
  const bool four = wordAligned && count % 4 == 0 && output.offset % 16 == 0;
  const Program& program = four ? fourPerInvocation_ : program_;
  Dispatch dispatch;
  dispatch.program = &program;
  dispatch.label = "normalize";
  dispatch.buffers = {{0, pixels, Access::read}, {1, output, Access::write}};
  dispatch.uniforms = {Uniform::u32(0, count), firstPixel, Uniform::u32(11, std::max<std::uint32_t>(pixelsPerImage, 1))};
  for (const Uniform& uniform : scalingUniforms(format, std::max<std::uint32_t>(pixelsPerImage, 1), 2, 10)) dispatch.uniforms.push_back(uniform);
  dispatch.invocations = four ? count / 4 : count;
  dispatch.linear = true;
  return dispatch;
}

}  // namespace glnet
