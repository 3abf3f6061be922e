// IEEE 754 half precision (float16, NumPy's '<f2', safetensors' F16) widened to float32 exactly: every half is a
// float, subnormals, infinities and NaN included; and float32 rounded to the nearest half (ties to even), beyond the
// largest half to infinity.
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

inline std::uint16_t floatToHalf(float x) {
  const std::uint16_t sign = std::signbit(x) ? 0x8000u : 0u;
  if (std::isnan(x)) return 0x7e00u;
  const float magnitude = std::fabs(x);
  if (magnitude >= 65520.0f) return sign | 0x7c00u;  // 65520 and above round past the largest half, 65504
  if (magnitude < std::ldexp(1.0f, -14)) {
    // Subnormal: a multiple of 2^-24, rounded to nearest even by nearbyint.
    return sign | static_cast<std::uint16_t>(std::nearbyint(std::ldexp(magnitude, 24)));
  }
  int exponent = 0;
  const float fraction = std::frexp(magnitude, &exponent);  // magnitude = fraction · 2^exponent, fraction in [0.5, 1)
  // 11 significant bits, rounded to nearest even; a carry into 2^11 moves to the next exponent (and may reach infinity).
  auto significand = static_cast<std::uint32_t>(std::nearbyint(std::ldexp(fraction, 11)));
  if (significand == 2048u) {
    significand = 1024u;
    ++exponent;
  }
  const auto biased = static_cast<std::uint32_t>(exponent - 1 + 15);
  return static_cast<std::uint16_t>(sign | (biased << 10) | (significand & 0x3ffu));
}

}  // namespace glnet
