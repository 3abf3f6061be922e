#include "numbers/Sampling.h"

#include "base/check.h"

#include <doctest/doctest.h>

#include <cmath>
#include <set>

using namespace glnet;

TEST_CASE("SamplingSettings::check refuses a negative, infinite or NaN temperature and a top-p outside (0, 1], naming the option") {
  for (const SamplingSettings& good : {SamplingSettings{}, SamplingSettings{0.7f, 50, 0.9f, 1}, SamplingSettings{1.2e-38f, 0, 1.0f, 2},
                                       SamplingSettings{2.0f, 1, 1e-9f, ~std::uint64_t{0}}})
    CHECK_NOTHROW(good.check());
  CHECK_THROWS_WITH_AS(SamplingSettings{-1.0f}.check(), "--temperature must be a finite number ≥ 0 (0: greedy), not -1", UsageError);
  CHECK_THROWS_WITH_AS(SamplingSettings{NAN}.check(), "--temperature must be a finite number ≥ 0 (0: greedy), not nan", UsageError);
  CHECK_THROWS_WITH_AS(SamplingSettings{INFINITY}.check(), "--temperature must be a finite number ≥ 0 (0: greedy), not inf", UsageError);
  CHECK_THROWS_WITH_AS(SamplingSettings{1e-40f}.check(), "--temperature 9.99995e-41 is too small to divide by on a GPU: give 0 for greedy",
                       UsageError);
  CHECK_THROWS_WITH_AS((SamplingSettings{1.0f, 0, 0.0f}.check()), "--top-p must be in (0, 1] (1: off), not 0", UsageError);
  CHECK_THROWS_WITH_AS((SamplingSettings{1.0f, 0, 1.5f}.check()), "--top-p must be in (0, 1] (1: off), not 1.5", UsageError);
  CHECK_THROWS_WITH_AS((SamplingSettings{1.0f, 0, NAN}.check()), "--top-p must be in (0, 1] (1: off), not nan", UsageError);
  CHECK_THROWS_AS((SamplingSettings{0.0f, 0, -0.5f}.check()), UsageError);  // greedy or not, a bad top-p is an error
}

TEST_CASE("drawBits: every part of the seed, the step and the row changes the draw; its GLSL text is the same expression") {
  std::set<std::uint32_t> seen;
  for (const std::uint64_t seed : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{1} << 32, std::uint64_t{1} << 63})
    for (const std::uint32_t step : {0u, 1u, 1000u})
      for (const std::uint32_t row : {0u, 1u, 7u}) seen.insert(drawBits(seed, step, row));
  CHECK(seen.size() == 4u * 3u * 3u);
  CHECK(drawUniform(5, 6, 7) == drawBits(5, 6, 7) / 4294967296.0);
  CHECK(drawUniform(5, 6, 7) < 1.0);
  // The shader compiles this text (tests/ops/NextTokenTest.cpp checks its tokens against ref::nextTokens' draws).
  CHECK(drawBitsGlsl().find("0x9e3779b9U") != std::string::npos);
  CHECK(drawBitsGlsl().find("GLNET_") == std::string::npos);  // nested macros expanded
}
