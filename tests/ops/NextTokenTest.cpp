#include "ops/NextToken.h"
#include "ref/Reference.h"
#include "support/Compare.h"
#include "support/GlContext.h"
#include "support/Random.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

using namespace glnet;

namespace {

constexpr std::uint32_t poisonId = 0xdeadbeefu;

// One problem: rows of logits, the ids read back as uint32 and as floats (checked to agree, at their places in a strided
// buffer whose other elements stay untouched).
struct NextTokenRun {
  std::uint32_t rows, vocabulary, logitsOffset = 0, logitsStride = 0, floatOffset = 0, floatStride = 1;
  mutable std::size_t dispatches = 0;  // in the last run

  std::vector<std::uint32_t> operator()(Context& context, const NextTokenOp& op, const std::vector<float>& logits,
                                        const SamplingSettings& settings, std::uint32_t step = 0) const {
    const NextTokenShape shape{rows, vocabulary, logitsOffset, logitsStride, floatOffset, floatStride};
    // The logits laid out from `logitsOffset` at `logitsStride`, the gaps NaN: a read outside the rows would show.
    const std::uint32_t stride = logitsStride ? logitsStride : vocabulary;
    std::vector<float> strided(logitsOffset + std::size_t{rows} * stride, NAN);
    for (std::size_t r = 0; r < rows; ++r)
      std::copy_n(logits.begin() + r * vocabulary, vocabulary, strided.begin() + logitsOffset + r * stride);
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
    for (const Case& c : {Case{{1, 1}, false}, Case{{3, 7, 2, 9, 5, 3}, false}, Case{{1, 50257}, true},
                          Case{{2, 128256, 0, 128260, 1, 2}, true}, Case{{300, 33}, false}, Case{{5, 4099, 4099 * 3, 4099 * 4, 3, 1}, true}}) {
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

  TEST_CASE("NextTokenOp refuses an empty or too large vocabulary, no rows or more than a dispatch takes, bad settings") {
    test::glContext();
    ProgramCache programs;
    const NextTokenOp op(programs);
    Buffer small(64);
    const auto choose = [&](std::uint32_t rows, std::uint32_t vocabulary, const SamplingSettings& settings) {
      return op(small, small, small, small, {rows, vocabulary}, settings, Uniform::u32(NextTokenOp::stepLocation, 0));
    };
    CHECK_THROWS_WITH_AS(choose(1, 0, {}), "the next token is chosen among 1 to 2^24 tokens (ids exact as floats), not 0", Error);
    CHECK_THROWS_WITH_AS(choose(1, (1u << 24) + 1, {}),
                         "the next token is chosen among 1 to 2^24 tokens (ids exact as floats), not 16777217", Error);
    CHECK_THROWS_WITH_AS(choose(0, 4, {}), "the next token is chosen for 1 to 65535 rows at once, not 0", DeviceLimitError);
    CHECK_THROWS_WITH_AS(choose(65536, 4, {}), "the next token is chosen for 1 to 65535 rows at once, not 65536", DeviceLimitError);
    CHECK_THROWS_AS(choose(1, 4, SamplingSettings{1.0f, 0, 2.0f}), UsageError);
    CHECK(choose(2, 4, SamplingSettings{1.0f, 2, 0.5f}).size() == 1u);
  }

  TEST_CASE("NextToken.glsl sampling matches the reference's choice for the same draws: temperature, top-k, top-p, ties") {
    Context& context = test::glContext();
    auto random = test::generator(48);
    ProgramCache programs;
    const NextTokenOp op(programs);
    struct Case {
      float temperature;
      std::uint32_t topK;
      float topP;
    };
    // p so small that one token survives; k beyond V (off); both together.
    const std::vector<Case> cases = {{1.0f, 0, 1.0f}, {0.7f, 50, 1.0f}, {1.3f, 0, 0.9f}, {0.8f, 20, 0.5f},
                                     {1.0f, 0, 1e-6f}, {2.0f, 5, 0.95f}, {0.5f, 100000, 0.3f}};
    for (const NextTokenRun& run :
         {NextTokenRun{3, 1}, NextTokenRun{16, 7}, NextTokenRun{32, 1000, 5, 1003, 2, 3}, NextTokenRun{2, 50257}}) {
      for (const bool ties : {false, true}) {
        // Logits of a real model's spread; with ties, few distinct values, so that top-k and top-p cut through them.
        std::vector<float> logits = test::uniformFloats(random, std::size_t{run.rows} * run.vocabulary, -8.0f, 8.0f);
        if (ties) for (float& z : logits) z = std::round(z);
        for (const Case& c : cases) {
          if (run.vocabulary == 50257 && c.topK != 0) continue;  // CI time: the long row once per top-p
          CAPTURE(run.rows);
          CAPTURE(run.vocabulary);
          CAPTURE(ties);
          CAPTURE(c.temperature);
          CAPTURE(c.topK);
          CAPTURE(c.topP);
          SamplingSettings settings{c.temperature, c.topK, c.topP, 0x123456789abcdefULL};
          const std::uint32_t step = 5;
          CHECK(run(context, op, logits, settings, step) ==
                ref::nextTokens(logits, run.rows, run.vocabulary, settings, draws(settings, step, run.rows)));
          CHECK(run.dispatches == 1u);
        }
      }
    }
  }

  TEST_CASE("NextToken.glsl sampling: top-k 1 is argmax; rows without a distribution get V; seeds and steps draw afresh") {
    Context& context = test::glContext();
    auto random = test::generator(49);
    ProgramCache programs;
    const NextTokenOp op(programs);
    const NextTokenRun run{64, 300};
    const std::vector<float> logits = test::uniformFloats(random, std::size_t{run.rows} * run.vocabulary, -3.0f, 3.0f);
    const std::vector<std::uint32_t> greedy = run(context, op, logits, SamplingSettings{});
    CHECK(run(context, op, logits, SamplingSettings{1.5f, 1, 1.0f, 7}) == greedy);
    CHECK(run(context, op, logits, SamplingSettings{1.5f, 0, 1e-9f, 7}) == greedy);
    CHECK(run(context, op, logits, SamplingSettings{1.5f, 0, 1e-40f, 7}) == greedy);  // a denormal p, 0 where flushed

    // Top-k keeps every logit equal to the k-th, −0 as equal to +0: top-k 1 draws either zero.
    std::vector<float> zeros;
    for (std::uint32_t r = 0; r < run.rows; ++r) zeros.insert(zeros.end(), {-1.0f, -0.0f, 0.0f, -2.0f});
    const SamplingSettings topOne{1.0f, 1, 1.0f, 11};
    const std::vector<std::uint32_t> zeroIds = NextTokenRun{run.rows, 4}(context, op, zeros, topOne);
    CHECK(zeroIds == ref::nextTokens(zeros, run.rows, 4, topOne, draws(topOne, 0, run.rows)));
    CHECK(std::count(zeroIds.begin(), zeroIds.end(), 1u) > 16);
    CHECK(std::count(zeroIds.begin(), zeroIds.end(), 2u) > 16);

    // A NaN, a row of −inf, an +inf: V.
    std::vector<float> broken = logits;
    broken[3] = NAN;
    std::fill_n(broken.begin() + run.vocabulary, run.vocabulary, -INFINITY);
    broken[2 * run.vocabulary + 5] = INFINITY;
    const std::vector<std::uint32_t> ids = run(context, op, broken, SamplingSettings{1.0f, 0, 1.0f, 7});
    CHECK(ids[0] == run.vocabulary);
    CHECK(ids[1] == run.vocabulary);
    CHECK(ids[2] == run.vocabulary);
    CHECK(ids[3] < run.vocabulary);

    // Flat logits: the draws alone decide, and another seed or step gives other tokens on most rows.
    const std::vector<float> flat(std::size_t{run.rows} * run.vocabulary, 0.5f);
    const SamplingSettings first{1.0f, 0, 1.0f, 1}, second{1.0f, 0, 1.0f, std::uint64_t{1} << 32};
    const std::vector<std::uint32_t> base = run(context, op, flat, first, 0);
    CHECK(base == ref::nextTokens(flat, run.rows, run.vocabulary, first, draws(first, 0, run.rows)));
    for (const std::vector<std::uint32_t>& other : {run(context, op, flat, first, 1), run(context, op, flat, second, 0)}) {
      std::size_t same = 0;
      for (std::uint32_t r = 0; r < run.rows; ++r) same += other[r] == base[r] ? 1 : 0;
      CHECK(same < 8u);  // 64 rows of 300 equal tokens: about 0.2 expected
    }
  }

  TEST_CASE("NextToken.glsl sampling: a plan parameter advances the step without recording again") {
    Context& context = test::glContext();
    ProgramCache programs;
    const NextTokenOp op(programs);
    const NextTokenShape shape{32, 50};
    const std::vector<float> logits(std::size_t{shape.rows} * shape.vocabulary, 1.0f);
    const SamplingSettings settings{1.0f, 0, 1.0f, 99};
    Buffer logitsBuffer = Buffer::of(logits), ids(shape.rows * sizeof(std::uint32_t)), idFloats(shape.rows * sizeof(float));
    Buffer workspace(op.workspaceBytes(shape));
    Plan plan(context.limits());
    const int step = plan.addParameter(0);
    plan.record(op(logitsBuffer, ids, idFloats, workspace, shape, settings, Uniform::fromParameter(NextTokenOp::stepLocation, step)));
    for (const std::uint32_t value : {0u, 1u, 1000u}) {
      CAPTURE(value);
      ids.fill(poisonId);
      plan.setParameter(step, value);
      plan.run();
      CHECK(ids.read<std::uint32_t>() == ref::nextTokens(logits, shape.rows, shape.vocabulary, settings, draws(settings, value, shape.rows)));
    }
  }

  TEST_CASE("NextToken.glsl sampling: token frequencies over many rows are the renormalised probabilities") {
    Context& context = test::glContext();
    ProgramCache programs;
    const NextTokenOp op(programs);
    const NextTokenRun run{2048, 6};
    const std::vector<float> row = {1.0f, -0.5f, 2.0f, 0.0f, 2.0f, -3.0f};
    std::vector<float> logits;
    for (std::uint32_t r = 0; r < run.rows; ++r) logits.insert(logits.end(), row.begin(), row.end());
    struct Case {
      SamplingSettings settings;
      std::vector<bool> kept;
    };
    // Top-k 3 keeps 2, 2 and 1; top-p 0.6 keeps the two 2s (0.63 of the mass at T = 1: the first alone is 0.32).
    for (const Case& c : {Case{{1.0f, 0, 1.0f, 3}, {true, true, true, true, true, true}},
                          Case{{0.7f, 3, 1.0f, 4}, {true, false, true, false, true, false}},
                          Case{{1.0f, 0, 0.6f, 5}, {false, false, true, false, true, false}}}) {
      CAPTURE(c.settings.temperature);
      CAPTURE(c.settings.topK);
      CAPTURE(c.settings.topP);
      std::vector<double> probability(row.size());
      double total = 0;
      for (std::size_t i = 0; i < row.size(); ++i) total += probability[i] = c.kept[i] ? std::exp(row[i] / c.settings.temperature) : 0.0;
      std::vector<double> frequency(row.size() + 1);
      for (const std::uint32_t id : run(context, op, logits, c.settings)) frequency[std::min<std::size_t>(id, row.size())] += 1.0 / run.rows;
      CHECK(frequency[row.size()] == 0.0);
      for (std::size_t i = 0; i < row.size(); ++i) {
        CAPTURE(i);
        // Five standard deviations of a frequency over 2048 independent draws: a false failure about once in 10^6.
        const double p = probability[i] / total;
        CHECK(std::abs(frequency[i] - p) <= 5 * std::sqrt(p * (1 - p) / run.rows));
      }
    }
  }
}
