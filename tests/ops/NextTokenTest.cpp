#include "ops/NextToken.h"
#include "ref/Reference.h"
#include "support/Compare.h"
#include "support/GlContext.h"
#include "support/Random.h"

#include <doctest/doctest.h>

#include <cmath>

using namespace glnet;

namespace {

constexpr std::uint32_t poisonId = 0xdeadbeefu;

// One problem: rows of logits, the ids read back as uint32 and as floats (checked to agree, at their places in a strided
// buffer whose other elements stay untouched).
struct NextTokenRun {
  std::uint32_t rows, vocabulary, logitsStride = 0, floatOffset = 0, floatStride = 1;
  mutable std::size_t dispatches = 0;  // in the last run

  std::vector<std::uint32_t> operator()(Context& context, const NextTokenOp& op, const std::vector<float>& logits,
                                        const SamplingSettings& settings, std::uint32_t step = 0) const {
    const NextTokenShape shape{rows, vocabulary, logitsStride, floatOffset, floatStride};
    // The logits laid out at `logitsStride`, the gaps NaN: a read past a row's end would show.
    const std::uint32_t stride = logitsStride ? logitsStride : vocabulary;
    std::vector<float> strided(std::size_t{rows} * stride, NAN);
    for (std::size_t r = 0; r < rows; ++r)
      std::copy_n(logits.begin() + r * vocabulary, vocabulary, strided.begin() + r * stride);
    Buffer logitsBuffer = Buffer::of(strided);
    Buffer ids(rows * sizeof(std::uint32_t));
    ids.fill(poisonId);
    const std::size_t floats = floatOffset + std::size_t{rows - 1} * floatStride + 2;
    Buffer idFloats(floats * sizeof(float));
    idFloats.fill(test::nanPoison);
    Buffer workspace(op.workspaceBytes(shape));
    workspace.fill(test::nanPoison);
    Plan plan(context.limits());
    const int stepParameter = plan.addParameter(step);
    const std::vector<Dispatch> recorded = op(logitsBuffer, ids, idFloats, workspace, shape, settings,
                                              Uniform::fromParameter(NextTokenOp::stepLocation, stepParameter));
    dispatches = recorded.size();
    plan.record(recorded);
    plan.run();
    const auto chosen = ids.read<std::uint32_t>();
    const auto asFloats = idFloats.read<float>();
    for (std::size_t i = 0; i < floats; ++i) {
      const bool written = i >= floatOffset && (i - floatOffset) % floatStride == 0 && (i - floatOffset) / floatStride < rows;
      CAPTURE(i);
      if (written) CHECK(asFloats[i] == static_cast<float>(chosen[(i - floatOffset) / floatStride]));
      else CHECK(std::isnan(asFloats[i]));
    }
    return chosen;
  }
};

std::vector<double> draws(const SamplingSettings& settings, std::uint32_t step, std::uint32_t rows) {
  std::vector<double> u(rows);
  for (std::uint32_t r = 0; r < rows; ++r) u[r] = drawUniform(settings.seed, step, r);
  return u;
}

}  // namespace

TEST_SUITE("gl") {
  TEST_CASE("NextToken.glsl greedy: the first largest logit, V for a row holding a NaN, in one pass or two") {
    Context& context = test::glContext();
    auto random = test::generator(47);
    ProgramCache programs;
    const NextTokenOp op(programs);
    const SamplingSettings greedy;
    struct Case {
      NextTokenRun run;
      bool twoPasses;
    };
    // Few rows of a long vocabulary search in blocks, then a final pass; many rows one group each.
    for (const Case& c : {Case{{1, 1}, false}, Case{{3, 7, 9, 5, 3}, false}, Case{{1, 50257}, true},
                          Case{{2, 128256, 128260, 1, 2}, true}, Case{{300, 33}, false}, Case{{5, 4099, 0, 3, 1}, true}}) {
      const NextTokenRun& run = c.run;
      CAPTURE(run.rows);
      CAPTURE(run.vocabulary);
      // Logits of few distinct values (ties everywhere), −inf entries; a row of −inf alone; a NaN in the last row.
      std::vector<float> logits = test::uniformFloats(random, std::size_t{run.rows} * run.vocabulary, -4.0f, 4.0f);
      for (float& z : logits) z = std::round(z);
      for (std::size_t i = 0; i < logits.size(); i += 5) logits[i] = -INFINITY;
      if (run.rows > 1) std::fill_n(logits.begin(), run.vocabulary, -INFINITY);
      if (run.rows > 2) logits[(run.rows - 1) * std::size_t{run.vocabulary} + run.vocabulary / 2] = NAN;
      const auto expected = ref::nextTokens(logits, run.rows, run.vocabulary, greedy, draws(greedy, 0, run.rows));
      if (run.rows > 1) CHECK(expected[0] == 0u);
      if (run.rows > 2) CHECK(expected.back() == run.vocabulary);
      CHECK(run(context, op, logits, greedy) == expected);
      CHECK(run.dispatches == (c.twoPasses ? 2u : 1u));
    }
  }
}
