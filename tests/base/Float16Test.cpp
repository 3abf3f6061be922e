// Half precision both ways: every half widens exactly and narrows back to itself; float32 narrows to the nearest half
// with ties to even, past the largest half to infinity.
#include "base/Float16.h"

#include <doctest/doctest.h>

#include <cmath>

using namespace glnet;

TEST_CASE("every half widens to float32 and narrows back to the same bits") {
  for (std::uint32_t bits = 0; bits < 0x10000u; ++bits) {
    const auto half = static_cast<std::uint16_t>(bits);
    const float value = halfToFloat(half);
    if (std::isnan(value)) {
      CHECK(std::isnan(halfToFloat(floatToHalf(value))));
    } else if (floatToHalf(value) != half) {
      FAIL_CHECK("half " << bits << " (" << value << ") narrows to " << floatToHalf(value));
    }
  }
}

TEST_CASE("float32 narrows to the nearest half, ties to even, overflow to infinity") {
  CHECK(floatToHalf(1.0f + std::ldexp(1.0f, -11)) == 0x3c00u);           // halfway between 1 and the next half: even (1)
  CHECK(floatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02u);       // halfway above an odd significand: up
  CHECK(floatToHalf(1.0f + std::ldexp(1.0f, -11) * 1.01f) == 0x3c01u);  // just above halfway: up
  CHECK(floatToHalf(65504.0f) == 0x7bffu);
  CHECK(floatToHalf(65519.0f) == 0x7bffu);
  CHECK(floatToHalf(65520.0f) == 0x7c00u);
  CHECK(floatToHalf(-1e9f) == 0xfc00u);
  CHECK(floatToHalf(std::ldexp(1.0f, -25)) == 0x0000u);            // half the smallest subnormal: ties to even (0)
  CHECK(floatToHalf(std::ldexp(1.5f, -25)) == 0x0001u);
  CHECK(floatToHalf(-0.0f) == 0x8000u);
  CHECK(floatToHalf(std::ldexp(1023.5f, -24)) == 0x0400u);         // the largest subnormal's tie rounds up into the normals
}
