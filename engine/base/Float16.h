// IEEE 754 half precision (float16, NumPy's '<f2', safetensors' F16) widened to float32 exactly: every half is a
// float, subnormals, infinities and NaN included.
#pragma once

#include <cmath>
#include <cstdint>

namespace glnet {

inline float halfToFloat(std::uint16_t half) {
  const std::uint32_t sign = (half >> 15) & 1u, exponent = (half >> 10) & 0x1fu, mantissa = half & 0x3ffu;
  float magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);
  } else if (exponent == 31) {
    magnitude = mantissa ? NAN : INFINITY;
  } else {
    magnitude = std::ldexp(static_cast<float>(mantissa | 0x400u), static_cast<int>(exponent) - 25);
  }
  return sign ? -magnitude : magnitude;
}

}  // namespace glnet
