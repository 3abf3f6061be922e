#include "base/check.h"
#include "ops/Dense.h"
#include "ops/Normalize.h"
#include "plan/Plan.h"
#include "ref/Reference.h"
#include "support/Compare.h"
#include "support/EnvironmentSetting.h"
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

// Two chains of dense layers recorded one after the other, then a step that overwrites the input both read.
struct TwoChains {
  std::vector<float> a3, b3, x;
  std::size_t barriers;
  std::vector<std::size_t> order;
};

TwoChains runTwoChains(const Context& context, Plan::SyncMode mode, bool group, const std::vector<float>& x,
                       const std::vector<std::vector<float>>& weights, const std::vector<float>& bias) {
  ProgramCache programs;
  const DenseOp tanh(programs, Activation::tanh);
  constexpr std::uint32_t rows = 5, width = 17;
  Buffer bx = Buffer::of(x), bias0 = Buffer::of(bias);
  std::vector<Buffer> w;
  for (const auto& weight : weights) w.push_back(Buffer::of(weight));
  Buffer a1(rows * width * 4), a2(rows * width * 4), a3(rows * width * 4), b1(rows * width * 4), b2(rows * width * 4),
      b3(rows * width * 4);
  for (Buffer* b : {&a1, &a2, &a3, &b1, &b2, &b3}) b->fill(test::nanPoison);
  Plan plan(context.limits(), mode);
  plan.record(tanh.forward(bx, w[0], bias0, a1, {rows, width, width}));
  plan.record(tanh.forward(a1, w[1], bias0, a2, {rows, width, width}));
  plan.record(tanh.forward(a2, w[2], bias0, a3, {rows, width, width}));
  plan.record(tanh.forward(bx, w[3], bias0, b1, {rows, width, width}));
  plan.record(tanh.forward(b1, w[4], bias0, b2, {rows, width, width}));
  plan.record(tanh.forward(a3, w[5], bias0, bx, {rows, width, width}));  // overwrites what the first steps of both read
  plan.record(tanh.forward(b2, w[6], bias0, b3, {rows, width, width}));
  if (group) plan.groupIndependentSteps();
  plan.run();
  return {a3.read<float>(), b3.read<float>(), bx.read<float>(), plan.barrierCount(), plan.recordingOrder()};
}

}  // namespace

TEST_SUITE("gl") {
  TEST_CASE("grouping independent steps shares barriers between branches and keeps every dependence") {
    Context& context = test::glContext();
    auto random = test::generator(24);
    constexpr std::size_t rows = 5, width = 17;
    const auto x = test::uniformFloats(random, rows * width);
    std::vector<std::vector<float>> weights;
    for (int layer = 0; layer < 7; ++layer) weights.push_back(test::uniformFloats(random, width * width));
    const auto bias = test::uniformFloats(random, width);

    const TwoChains recorded = runTwoChains(context, Plan::SyncMode::hazards, false, x, weights, bias);
    const TwoChains grouped = runTwoChains(context, Plan::SyncMode::hazards, true, x, weights, bias);
    const TwoChains serial = runTwoChains(context, Plan::SyncMode::all, true, x, weights, bias);
    // In recorded order: [a1] [a2] [a3 b1] [b2 x] [b3]; grouped: [a1 b1] [a2 b2] [a3 b3] [x].
    CHECK(recorded.barriers == 5u);
    CHECK(grouped.barriers == 4u);
    CHECK(grouped.order == std::vector<std::size_t>{0, 3, 1, 4, 2, 6, 5});
    CHECK(recorded.order == std::vector<std::size_t>{0, 1, 2, 3, 4, 5, 6});
    CHECK(serial.barriers == 7u);  // GLNET_SYNC=all keeps a barrier before every step
    CHECK(serial.order == recorded.order);

    const auto layer = [&](const std::vector<double>& in, int w) { return ref::dense(in, weights[w], bias, rows, width, width, Activation::tanh); };
    const std::vector<double> x64(x.begin(), x.end());
    const auto a3 = layer(layer(layer(x64, 0), 1), 2);
    const auto b3 = layer(layer(layer(x64, 3), 4), 6);
    const auto overwritten = layer(a3, 5);
    for (const TwoChains* run : {&recorded, &grouped, &serial}) {
      test::checkClose(run->a3, a3, 1e-6, 1e-5);
      test::checkClose(run->b3, b3, 1e-6, 1e-5);
      test::checkClose(run->x, overwritten, 1e-6, 1e-5);
    }
    CHECK(std::memcmp(grouped.x.data(), serial.x.data(), grouped.x.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(grouped.b3.data(), serial.b3.data(), grouped.b3.size() * sizeof(float)) == 0);
  }

  TEST_CASE("writes to disjoint parts of one range need no barrier between them; the same part, another partition or another range do") {
    Context& context = test::glContext();
    ProgramCache programs;
    const DenseOp relu(programs, Activation::relu);
    Buffer x = Buffer::of(std::vector<float>(3 * 4, 1.0f)), w = Buffer::of(std::vector<float>(4 * 4, 1.0f)), b = Buffer::of(std::vector<float>(4, 0.0f));
    Buffer y(2 * 3 * 4 * sizeof(float));
    // y's whole range, or its first half, in part `part` of partition `partition` (the plan trusts the parts).
    const auto writing = [&](RangePart part, bool half = false) {
      std::vector<Dispatch> dispatches = relu.forward(x, w, b, half ? BufferView(y, 0, 3 * 4 * sizeof(float)) : BufferView(y), {3, 4, 4});
      REQUIRE(dispatches.size() == 1);
      Dispatch d = dispatches.front();
      for (StorageBinding& binding : d.buffers) {
        if (binding.buffer == &y) binding.part = part;
      }
      return d;
    };
    const auto barriers = [&](const std::vector<Dispatch>& dispatches) {
      Plan plan(context.limits());
      for (const Dispatch& d : dispatches) plan.record(d);
      return plan.barrierCount();
    };
    CHECK(barriers({writing({7, 0}), writing({7, 1}), writing({7, 2})}) == 1);
    CHECK(barriers({writing({7, 0}), writing({7, 0})}) == 2);
    CHECK(barriers({writing({7, 0}), writing({8, 1})}) == 2);
    CHECK(barriers({writing({7, 0}), writing({})}) == 2);
    CHECK(barriers({writing({7, 0}), writing({7, 1}, true)}) == 2);
    // Grouping keeps them apart the same way.
    Plan grouped(context.limits());
    for (const Dispatch& d : {writing({7, 0}), writing({7, 0}), writing({7, 1})}) grouped.record(d);
    grouped.groupIndependentSteps();
    CHECK(grouped.barrierCount() == 2);
  }

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

  TEST_CASE("a linear dispatch beyond the limit along both axes is a clear error once its program has compiled, at every run") {
    Context& context = test::glContext();
    Limits tight = context.limits();
    tight.maxWorkGroupCount = {2, 2, 1};
    // Without the binary cache the program is still compiling when it is recorded, so its groups wait for it.
    const test::EnvironmentSetting uncached("GLNET_CACHE", "0");
    ProgramCache programs;
    const NormalizeOp normalize(programs);
    const std::size_t count = 256 * 4 + 1;  // 5 groups of 256: 2 × 3, one row past the limit
    Buffer input(count), output(count * sizeof(float));
    Plan plan(tight);
    CHECK_NOTHROW(plan.record(normalize(input, output, count, Uniform::u32(NormalizeOp::firstPixelLocation, 0), InputFormat{},
                                        static_cast<std::uint32_t>(count), false)));
    CHECK_THROWS_WITH_AS(plan.finishPrograms(), doctest::Contains("use a smaller batch"), Error);
    CHECK_THROWS_WITH_AS(plan.run(), doctest::Contains("use a smaller batch"), Error);
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

