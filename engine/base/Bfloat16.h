// bfloat16 on the host: float's upper 16 bits, rounded to nearest with ties to even, as
// shaders/GradientCompression.glsl rounds on the GPU; the sum of compressed gradients over ranks adds in float.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace glnet {

inline std::uint16_t toBfloat16(float x) {
  if (std::isnan(x)) return 0x7FC0u;
  std::uint32_t bits = 0;
  std::memcpy(&bits, &x, sizeof bits);
  return static_cast<std::uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

inline float fromBfloat16(std::uint16_t half) {
  const std::uint32_t bits = static_cast<std::uint32_t>(half) << 16;
  float x = 0;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

// sums[i] = bf16(sums[i] + addends[i]), added in float: MPI's reduction of compressed gradients.
inline void addBfloat16(const std::uint16_t* addends, std::uint16_t* sums, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) sums[i] = toBfloat16(fromBfloat16(sums[i]) + fromBfloat16(addends[i]));
}

}  // namespace glnet
