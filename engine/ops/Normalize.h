// Binding of shaders/Normalize.glsl: uint8 pixels → float (x/255 − mean)/std, and the input format it applies.
#pragma once

#include "numbers/InputFormat.h"
#include "plan/Plan.h"
#include "plan/ProgramCache.h"

#include <vector>

namespace glnet {

// The most channels an input format scales apart (RGBA); images of more channels take one mean and deviation.
constexpr std::size_t mostScaledChannels = 4;

// The uniforms both shaders take: the mean and the inverse deviation of each channel at `meanLocation` and
// meanLocation + 4 (arrays of 4), and the channel planes' size at `planeLocation`. pixelsPerImage must be a multiple of
// the format's channels.
std::vector<Uniform> scalingUniforms(const InputFormat& format, std::uint32_t pixelsPerImage, int meanLocation, int planeLocation);

class NormalizeOp {
 public:
  explicit NormalizeOp(ProgramCache& programs);
  // Writes `count` floats to `output` from the bytes of `pixels` starting at `firstPixel` (a constant, or
  // a plan parameter via Uniform::fromParameter at location 1). `wordAligned`: firstPixel is a multiple of 4
  // whatever its value (images of a multiple of 4 pixels); with count a multiple of 4 and an aligned output, each
  // invocation then converts 4 pixels.
  Dispatch operator()(const BufferView& pixels, const BufferView& output, std::uint32_t count, const Uniform& firstPixel,
                      const InputFormat& format, std::uint32_t pixelsPerImage, bool wordAligned) const;
  static constexpr int firstPixelLocation = 1;
  // `count` floats from the uint32 token ids of `ids` starting at id `firstId` (as firstPixel), as they are.
  Dispatch tokens(const BufferView& ids, const BufferView& output, std::uint32_t count, const Uniform& firstId) const;

 private:
  const Program& program_;
  const Program& tokens_;
  const Program& fourPerInvocation_;
};

}  // namespace glnet
