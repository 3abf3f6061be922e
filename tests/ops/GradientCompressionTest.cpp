#include "base/Bfloat16.h"
#include "ops/GradientCompression.h"
#include "support/Compare.h"
#include "support/GlContext.h"
#include "support/Random.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

using namespace glnet;

namespace {

std::uint32_t bitsOf(float x) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}

float fromBits(std::uint32_t bits) {
  float x = 0;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

}  // namespace

TEST_CASE("bfloat16 rounds to nearest with ties to even, keeps NaN and infinities, and sums in float") {
  CHECK(toBfloat16(1.0f) == 0x3F80u);
  CHECK(toBfloat16(-2.0f) == 0xC000u);
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: to the even 1; 1 + 3·2^-8 halfway the other way: to 1 + 2^-6.
  CHECK(toBfloat16(fromBits(0x3F808000u)) == 0x3F80u);
  CHECK(toBfloat16(fromBits(0x3F818000u)) == 0x3F82u);
  CHECK(toBfloat16(fromBits(0x3F808001u)) == 0x3F81u);  // just past halfway: up
  CHECK(toBfloat16(std::numeric_limits<float>::infinity()) == 0x7F80u);
  CHECK(std::isnan(fromBfloat16(toBfloat16(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(toBfloat16(std::numeric_limits<float>::max()) == 0x7F80u);  // rounds past the largest bfloat16
  const std::uint16_t addends[3] = {toBfloat16(1.0f), toBfloat16(0.5f), toBfloat16(-3.0f)};
  std::uint16_t sums[3] = {toBfloat16(2.0f), toBfloat16(0.25f), toBfloat16(1e-3f)};
  addBfloat16(addends, sums, 3);
  CHECK(fromBfloat16(sums[0]) == 3.0f);
  CHECK(fromBfloat16(sums[1]) == 0.75f);
  CHECK(fromBfloat16(sums[2]) == fromBfloat16(toBfloat16(-3.0f + fromBfloat16(toBfloat16(1e-3f)))));
}

TEST_SUITE("gl") {
  TEST_CASE("GradientCompression.glsl packs g + e as the host's bfloat16, keeps the rounding error for the next step, and widens it back") {
    Context& context = test::glContext();
    auto random = test::generator(610);
    ProgramCache programs;
    const GradientCompressionOp compression(programs);
    for (const std::uint32_t floats : {1u, 2u, 1001u, 4096u}) {
      CAPTURE(floats);
      // Gradients over many magnitudes and both signs (no subnormals, which a GPU may flush), with exact ties, a
      // zero and a NaN.
      std::vector<float> gradients(floats);
      std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
      std::uniform_int_distribution<int> exponent(-30, 10);
      for (float& g : gradients) g = std::ldexp(mantissa(random), exponent(random));
      if (floats > 4) {
        gradients[1] = fromBits(0x3F808000u);
        gradients[2] = 0.0f;
        gradients[3] = std::numeric_limits<float>::quiet_NaN();
      }
      std::vector<float> residuals(floats, 0.0f);
      Buffer gradientBuffer = Buffer::of(gradients), residualBuffer = Buffer::of(residuals);
      Buffer packed(GradientCompressionOp::packedBytes(floats));
      for (int round = 0; round < 2; ++round) {
        packed.fill(test::nanPoison);
        Plan plan(context.limits());
        plan.record(compression.compress(gradientBuffer, residualBuffer, packed, floats));
        plan.run();
        // The host's rounding of the same float sums, round after round: the residual carries into the next one.
        std::vector<std::uint16_t> expected((floats + 1) / 2 * 2, 0);
        for (std::size_t i = 0; i < floats; ++i) {
          const float value = gradients[i] + residuals[i];
          expected[i] = toBfloat16(value);
          residuals[i] = value - fromBfloat16(expected[i]);
        }
        const std::vector<std::uint32_t> got = packed.read<std::uint32_t>();
        const std::vector<float> gotResiduals = residualBuffer.read<float>();
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < floats; ++i) {
          const std::uint16_t half = static_cast<std::uint16_t>(got[i / 2] >> (16 * (i % 2)));
          const bool nan = std::isnan(gradients[i]);
          if (nan ? !std::isnan(fromBfloat16(half)) : half != expected[i]) ++wrong;
          if (!nan && bitsOf(gotResiduals[i]) != bitsOf(residuals[i])) ++wrong;
        }
        if (floats % 2 == 1) CHECK((got.back() >> 16) == 0u);
        CHECK(wrong == 0u);
      }
      // Widened back, every value is its bfloat16 exactly.
      Buffer widened(floats * sizeof(float));
      widened.fill(test::nanPoison);
      Plan plan(context.limits());
      plan.record(compression.expand(packed, widened, floats));
      plan.run();
      const std::vector<std::uint32_t> got = packed.read<std::uint32_t>();
      const std::vector<float> values = widened.read<float>();
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < floats; ++i) {
        const float expected = fromBfloat16(static_cast<std::uint16_t>(got[i / 2] >> (16 * (i % 2))));
        if (std::isnan(gradients[i]) ? !std::isnan(values[i]) : bitsOf(values[i]) != bitsOf(expected)) ++wrong;
      }
      CHECK(wrong == 0u);
    }
  }
}
