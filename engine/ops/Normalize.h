// Binding of shaders/Normalize.glsl: uint8 pixels → float (x/255 − mean)/std.
#pragma once

#include "plan/Plan.h"
#include "plan/ProgramCache.h"

namespace glnet {

class NormalizeOp {
 public:
  explicit NormalizeOp(ProgramCache& programs);
  // Writes `count` floats to `output` from the bytes of `pixels` starting at `firstPixel` (a constant, or
  // a plan parameter via Uniform::fromParameter at location 1). `wordAligned`: firstPixel is a multiple of 4
  // whatever its value (images of a multiple of 4 pixels); with count a multiple of 4 and an aligned output, each
  // invocation then converts 4 pixels.
  Dispatch operator()(const BufferView& pixels, const BufferView& output, std::uint32_t count, const Uniform& firstPixel,
                      float mean, float std, bool wordAligned) const;
  static constexpr int firstPixelLocation = 1;

 private:
  const Program& program_;
  const Program& fourPerInvocation_;
};

}  // namespace glnet
