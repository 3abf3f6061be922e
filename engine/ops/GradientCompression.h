// Bindings of shaders/GradientCompression.glsl: gradients packed as bfloat16 pairs, with error feedback, before
// they leave the GPU for the sum over ranks, and widened again after it.
#pragma once

#include "plan/Plan.h"
#include "plan/ProgramCache.h"

#include <cstdint>

namespace glnet {

class GradientCompressionOp {
 public:
  explicit GradientCompressionOp(ProgramCache& programs);
  // The bytes `floats` gradients take packed.
  static std::size_t packedBytes(std::size_t floats) { return (floats + 1) / 2 * sizeof(std::uint32_t); }
  // packed = bf16(gradients + residuals), residuals = what that rounding lost.
  Dispatch compress(const BufferView& gradients, const BufferView& residuals, const BufferView& packed, std::uint32_t floats) const;
  // gradients = packed, widened.
  Dispatch expand(const BufferView& packed, const BufferView& gradients, std::uint32_t floats) const;

 private:
  const Program& compress_;
  const Program& expand_;
};

}  // namespace glnet
