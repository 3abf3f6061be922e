// Binding of shaders/Normalize.glsl: uint8 pixels → float (x/255 − mean)/std.
#pragma once

#include "plan/Plan.h"
#include "plan/ProgramCache.h"

namespace glnet {

class NormalizeOp {
 public:
  explicit NormalizeOp(ProgramCache& programs);
  // Writes `count` floats to `output` from the bytes of `pixels` starting at `firstPixel` (a constant, or
  // a plan parameter via Uniform::fromParameter at location 1).
  Dispatch operator()(const BufferView& pixels, const BufferView& output, std::uint32_t count, const Uniform& firstPixel,
                      float mean, float std) const;
  static constexpr int firstPixelLocation = 1;

 private:
  const Program& program_;
};

}  // namespace glnet
