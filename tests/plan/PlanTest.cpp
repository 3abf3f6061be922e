#include "gl/check.h"
#include "ops/Dense.h"
#include "ops/Normalize.h"
#include "plan/Plan.h"
#include "ref/Reference.h"
#include "support/Compare.h"
#include "support/GlContext.h"
#include "support/Random.h"

#include <doctest/doctest.h>

#include <cstring>

using namespace glnet;

namespace {

// A chain of dense layers where some steps are independent (no barrier needed) and some are not.
std::vector<float> runChain(const Context& context, Plan::SyncMode mode, std::size_t* barriers) {
  auto random = test::generator(20);
  ProgramCache programs;
  const DenseOp relu(programs, Activation::relu);
  const auto x = test::uniformFloats(random, 9 * 31);
  const auto w1 = test::uniformFloats(random, 31 * 20), b1 = test::uniformFloats(random, 20);
  const auto w2 = test::uniformFloats(random, 31 * 20), b2 = test::uniformFloats(random, 20);
  const auto w3 = test::uniformFloats(random, 20 * 20), b3 = test::uniformFloats(random, 20);
  Buffer bx = Buffer::of(x), bw1 = Buffer::of(w1), bb1 = Buffer::of(b1), bw2 = Buffer::of(w2), bb2 = Buffer::of(b2);
  Buffer bw3 = Buffer::of(w3), bb3 = Buffer::of(b3);
  Buffer h1(9 * 20 * 4), h2(9 * 20 * 4), out(9 * 20 * 4);
  Plan plan(context.limits(), mode);
  plan.record(relu.forward(bx, bw1, bb1, h1, {9, 31, 20}));   // reads x
  plan.record(relu.forward(bx, bw2, bb2, h2, {9, 31, 20}));   // independent of the first: no barrier
  plan.record(relu.forward(h1, bw3, bb3, out, {9, 20, 20}));  // reads h1: barrier
  plan.record(relu.forward(out, bw3, bb3, h1, {9, 20, 20}));  // writes h1, read since the barrier: barrier
  plan.run();
  plan.run();  // replay gives the same result
  *barriers = plan.barrierCount();
  return h1.read<float>();
}

}  // namespace

TEST_SUITE("gl") {
  TEST_CASE("hazard-tracked barriers give the same results as a barrier after every dispatch, with fewer barriers") {
    Context& context = test::glContext();
    std::size_t hazardBarriers = 0, allBarriers = 0;
    const auto hazards = runChain(context, Plan::SyncMode::hazards, &hazardBarriers);
    const auto all = runChain(context, Plan::SyncMode::all, &allBarriers);
    REQUIRE(hazards.size() == all.size());
    CHECK(std::memcmp(hazards.data(), all.data(), hazards.size() * sizeof(float)) == 0);
    CHECK(hazardBarriers == 3u);  // the leading one, before step 3, before step 4
    CHECK(allBarriers == 4u);
    CHECK(hazardBarriers < allBarriers);
  }

  TEST_CASE("a linear dispatch beyond the work-group count limit is split and covers every element") {
    Context& context = test::glContext();
    Limits tight = context.limits();
    tight.maxWorkGroupCount = {3, 65535, 65535};
    ProgramCache programs;
    const NormalizeOp normalize(programs);
    auto random = test::generator(21);
    const std::size_t count = 256 * 7 + 5;  // 8 groups of 256: folds into 3 × 3
    const auto pixels = test::randomBytes(random, (count + 3) / 4 * 4);
    Buffer input = Buffer::of(pixels);
    Buffer output(count * sizeof(float));
    output.fill(test::nanPoison);
    Plan plan(tight);
    plan.record(normalize(input, output, count, Uniform::u32(NormalizeOp::firstPixelLocation, 0), InputFormat{}, static_cast<std::uint32_t>(count), false));
    plan.run();
    test::checkClose(output.read<float>(), ref::normalize(pixels, 0, count, InputFormat{}, count), 1e-7, 1e-6);
  }

  TEST_CASE("a 2-D dispatch beyond the limit is a clear error") {
    Context& context = test::glContext();
    Limits tight = context.limits();
    tight.maxWorkGroupCount = {1, 1, 1};
    ProgramCache programs;
    const DenseOp dense(programs, Activation::none);
    Buffer x(4 * 100 * 100), w(4 * 100 * 100), b(4 * 100), y(4 * 100 * 100);
    Plan plan(tight);
    CHECK_THROWS_WITH_AS(plan.record(dense.forward(x, w, b, y, {100, 100, 100})), doctest::Contains("use a smaller batch"),
                         Error);
  }

  TEST_CASE("plan parameters change uniforms between runs without re-recording") {
    Context& context = test::glContext();
    ProgramCache programs;
    const NormalizeOp normalize(programs);
    std::vector<std::uint8_t> pixels(64);
    for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<std::uint8_t>(i);
    Buffer input = Buffer::of(pixels);
    Buffer output(8 * sizeof(float));
    Plan plan(context.limits());
    const int first = plan.addParameter();
    plan.record(normalize(input, output, 8, Uniform::fromParameter(NormalizeOp::firstPixelLocation, first, 8), InputFormat{}, 8, true));
    for (std::uint32_t block = 0; block < 8; ++block) {
      plan.setParameter(first, block);
      plan.run();
      const auto values = output.read<float>();
      for (std::size_t i = 0; i < 8; ++i) REQUIRE(values[i] == doctest::Approx((block * 8 + i) / 255.0).epsilon(1e-6));
      if (block > 0) CHECK(plan.stateCallsLastRun() == 1u);  // only the uniform that follows the parameter
    }
  }

  TEST_CASE("a replay skips bindings and uniforms already in place, and restores them after another plan ran") {
    Context& context = test::glContext();
    ProgramCache programs;
    const NormalizeOp normalize(programs);
    auto random = test::generator(22);
    const std::size_t count = 37;
    const auto pixels = test::randomBytes(random, (count + 3) / 4 * 4);
    Buffer input = Buffer::of(pixels);
    Buffer first(count * sizeof(float)), second(count * sizeof(float));
    // Two plans on one program, with different buffers and constants.
    Plan plainPlan(context.limits());
    plainPlan.record(normalize(input, first, count, Uniform::u32(NormalizeOp::firstPixelLocation, 0), InputFormat{}, static_cast<std::uint32_t>(count), false));
    Plan shiftedPlan(context.limits());
    shiftedPlan.record(normalize(input, second, count, Uniform::u32(NormalizeOp::firstPixelLocation, 0), InputFormat{{0.5f}, {2.0f}}, static_cast<std::uint32_t>(count), false));
    const auto plainExpected = ref::normalize(pixels, 0, count, InputFormat{}, count);
    const auto shiftedExpected = ref::normalize(pixels, 0, count, InputFormat{{0.5f}, {2.0f}}, count);

    plainPlan.run();
    const std::size_t cold = plainPlan.stateCallsLastRun();
    CHECK(cold > 0u);
    plainPlan.run();
    CHECK(plainPlan.stateCallsLastRun() == 0u);  // nothing changed since its own last run
    for (int round = 0; round < 3; ++round) {
      CAPTURE(round);
      first.fill(test::nanPoison);
      second.fill(test::nanPoison);
      shiftedPlan.run();
      CHECK(shiftedPlan.stateCallsLastRun() > 0u);
      plainPlan.run();
      CHECK(plainPlan.stateCallsLastRun() == cold);  // the other plan ran in between: everything again
      test::checkClose(first.read<float>(), plainExpected, 1e-7, 1e-6);
      test::checkClose(second.read<float>(), shiftedExpected, 1e-7, 1e-6);
    }
  }

  TEST_CASE("within one run, a binding or uniform set by an earlier dispatch is not set again") {
    Context& context = test::glContext();
    ProgramCache programs;
    const NormalizeOp normalize(programs);
    auto random = test::generator(23);
    const std::size_t count = 19;
    const auto pixels = test::randomBytes(random, (count + 3) / 4 * 4);
    Buffer input = Buffer::of(pixels);
    Buffer output(count * sizeof(float));
    output.fill(test::nanPoison);
    Plan once(context.limits());
    once.record(normalize(input, output, count, Uniform::u32(NormalizeOp::firstPixelLocation, 0), InputFormat{}, static_cast<std::uint32_t>(count), false));
    once.run();
    Plan twice(context.limits());
    twice.record(normalize(input, output, count, Uniform::u32(NormalizeOp::firstPixelLocation, 0), InputFormat{}, static_cast<std::uint32_t>(count), false));
    twice.record(normalize(input, output, count, Uniform::u32(NormalizeOp::firstPixelLocation, 0), InputFormat{}, static_cast<std::uint32_t>(count), false));
    twice.run();
    CHECK(twice.stateCallsLastRun() == once.stateCallsLastRun());
    test::checkClose(output.read<float>(), ref::normalize(pixels, 0, count, InputFormat{}, count), 1e-7, 1e-6);
  }
}

