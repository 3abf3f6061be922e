// The per-device GEMM tuning table (ops/GemmTuning.h): its file format, and chooseGemm taking a tuned choice before
// its rule, below a forced configuration, and never while ignored or under GLNET_TUNE=0. glnet_bench --tune (the
// measurement that fills it) is checked end to end in tests/cli/bench_checks.sh.
#include "base/check.h"
#include "ops/Dense.h"
#include "ops/GemmTuning.h"
#include "ref/Reference.h"
#include "support/Compare.h"
#include "support/EnvironmentSetting.h"
#include "support/GlContext.h"
#include "support/Random.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>

using namespace glnet;

namespace {

// Removes a test's entry from the process's table of this device however the test ends.
class TunedEntry {
 public:
  TunedEntry(std::string key, const GemmCandidate& candidate) : key_(std::move(key)) {
    GemmTuning* table = currentGemmTuning();
    REQUIRE(table != nullptr);
    table->set(key_, candidate);
  }
  ~TunedEntry() {
    if (GemmTuning* table = currentGemmTuning()) table->erase(key_);
  }
  TunedEntry(const TunedEntry&) = delete;
  TunedEntry& operator=(const TunedEntry&) = delete;

 private:
  std::string key_;
};

}  // namespace

TEST_CASE("a GEMM tuning table reads back what it writes and skips lines that are not tunings") {
  GemmTuning table;
  table.set(gemmTuningKey(8192, 768, 3072, true, GemmOperand::loaded), {&gemmConfigNamed("128x64"), true});
  table.set(gemmTuningKey(3136, 64, 576, true, GemmOperand::gathered), {&gemmConfigNamed("64x64"), false});
  // A shape that may not split keeps its candidate whole, as it runs.
  table.set(gemmTuningKey(10, 11, 12, false, GemmOperand::loaded), {&gemmConfigNamed("64x32"), true});
  // A split into a given number of parts; whole where the shape may not split.
  table.set(gemmTuningKey(6272, 128, 1152, true, GemmOperand::gathered), {&gemmConfigNamed("64x64"), true, 4});
  table.set(gemmTuningKey(20, 21, 22, false, GemmOperand::loaded), {&gemmConfigNamed("64x64"), true, 2});
  CHECK(gemmTuningKey(8192, 768, 3072, true, GemmOperand::loaded) == "8192x768x3072 loaded splittable");
  const GemmTuning read = GemmTuning::parse(table.text(), "test");
  CHECK(read.size() == 5);
  CHECK(read.find("6272x128x1152 gathered splittable")->splits == 4);
  CHECK(read.find("6272x128x1152 gathered splittable")->name() == "64x64 split 4");
  CHECK_FALSE(read.find("20x21x22 loaded whole")->split);
  CHECK(read.find("20x21x22 loaded whole")->splits == 0);
  CHECK(read.text() == table.text());
  const auto split = read.find("8192x768x3072 loaded splittable");
  REQUIRE(split.has_value());
  CHECK(std::string(split->config->name) == "128x64");
  CHECK(split->split);
  CHECK_FALSE(read.find("3136x64x576 gathered splittable")->split);
  CHECK_FALSE(read.find("10x11x12 loaded whole")->split);
  CHECK_FALSE(read.find("1x1x1 loaded whole").has_value());

  const GemmTuning damaged = GemmTuning::parse(
      "# a comment\n\ngarbage\n1x2x3 loaded whole = 999x1 whole\n1x2x3 loaded whole = 64x64 sometimes\n"
      "1x2x3 loaded whole = 64x64 whole trailing\n4x5x6 loaded whole = 64x64 whole\n1x2x3 loaded whole = 64x64 split 1\n"
      "1x2x3 loaded whole = 64x64 split 65\n1x2x3 loaded whole = 64x64 whole 2\n1x2x3 loaded whole = 64x64 split x\n"
      "1x2x3 loaded whole = 64x64 split -2\n1x2x3 loaded whole = 64x64 split 002\n",
      "damaged");
  CHECK(damaged.size() == 1);
  CHECK(damaged.find("4x5x6 loaded whole").has_value());
}

TEST_SUITE("gl") {
  TEST_CASE("chooseGemm takes this device's tuning of a shape, below a forced configuration, never while ignored or with GLNET_TUNE=0") {
    Context& context = test::glContext();
    const test::EnvironmentSetting tuningOn("GLNET_TUNE", "1");  // tests/main.cpp sets 0 for the others
    const std::vector<const GemmConfig*> fitting = gemmConfigsFitting(context.limits());
    const DenseShape shape{67, 45, 131};  // rows, outputs, inputs: odd sizes crossing tile edges
    const std::string key = gemmTuningKey(shape.rows, shape.outputs, shape.inputs, false, GemmOperand::loaded);
    const GemmChoice ruled = [&] {
      const IgnoredGemmTuning ruleOnly;
      return chooseGemm(shape.rows, shape.outputs, shape.inputs, false);
    }();
    CHECK_FALSE(ruled.measured);
    CHECK(ruled.tuningKey == key);
    // Another configuration than the rule's, where the device runs more than one.
    const GemmConfig& tuned = **std::find_if(fitting.begin(), fitting.end(), [&](const GemmConfig* c) { return c != ruled.config || fitting.size() == 1; });
    TunedEntry entry(key, {&tuned, false});

    const GemmChoice choice = chooseGemm(shape.rows, shape.outputs, shape.inputs, false);
    CHECK(choice.config == &tuned);
    CHECK(choice.measured);
    CHECK(choice.split.splits == 1);
    CHECK(choice.tuningKey == key);
    {
      IgnoredGemmTuning ignored;
      CHECK(chooseGemm(shape.rows, shape.outputs, shape.inputs, false).config == ruled.config);
    }
    {
      const test::EnvironmentSetting tuningOff("GLNET_TUNE", "0");
      CHECK(chooseGemm(shape.rows, shape.outputs, shape.inputs, false).config == ruled.config);
    }
    {
      ForcedGemmConfig forced(*fitting.back());
      CHECK(chooseGemm(shape.rows, shape.outputs, shape.inputs, false).config == fitting.back());
    }

    // A tuned or forced number of parts cuts a splittable sum into that many, where it is long enough.
    {
      const std::string splittable = gemmTuningKey(5, 7, 1000, true, GemmOperand::loaded);
      TunedEntry cut(splittable, {fitting.front(), true, 4});
      CHECK(chooseGemm(5, 7, 1000).split.splits == 4);
      ForcedGemmConfig forced(*fitting.front(), true, 2);
      CHECK(chooseGemm(5, 7, 1000).split.splits == 2);
      CHECK(chooseGemm(5, 7, 100).split.splits == 1);  // 2 parts of at least 64
      CHECK(chooseGemm(5, 7, 1000, false).split.splits == 1);
    }

    // The dense layer runs the tuned choice, its dispatch tagged with the shape, and still matches float64.
    auto random = test::generator(31);
    ProgramCache programs;
    const DenseOp dense(programs, Activation::none, false);
    const std::size_t m = shape.rows, n = shape.outputs, k = shape.inputs;
    const auto x = test::uniformFloats(random, m * k);
    const auto w = test::uniformFloats(random, n * k);
    Buffer xBuffer = Buffer::of(x), wBuffer = Buffer::of(w), bias(4), y = test::poisoned(m * n);
    Plan plan(context.limits());
    plan.record(dense.forward(xBuffer, wBuffer, bias, y, shape, std::nullopt));
    plan.run();
    CHECK(plan.labels().front().find(tuned.name) != std::string::npos);
    CHECK(plan.tuningKeys().front() == key);
    // fp32 sums of 131 products of values in [-1, 1]: rounding well inside 1e-4.
    test::checkClose(y.read<float>(), ref::gemm(x, {k, 1}, w, {k, 1}, m, n, k), 1e-4, 1e-5);
  }

  TEST_CASE("a tuning keeps a candidate only where it beats the rule's later timing, not a first one slowed by the GPU's clocks") {
    Context& context = test::glContext();
    const IgnoredGemmTuning noTable;  // nothing of this made-up timing reaches the device's table
    // Two shapes: the rule's choice is the fastest for the first; any other choice (configuration or split of the sum,
    // which every device has more than one of for a sum this long) is 2x faster for the second.
    const auto same = [](const GemmChoice& a, const GemmChoice& b) { return a.config == b.config && a.split.splits == b.split.splits; };
    const GemmChoice ruleFirst = chooseGemm(1000, 64, 300), ruleSecond = chooseGemm(3000, 32, 500);
    int timings = 0;
    const auto timePlan = [&] {
      // The first timing runs at a third of the later clocks.
      const double slowdown = timings++ == 0 ? 3.0 : 1.0;
      GemmPlanTimes times;
      times.gemmMs["first"] = slowdown * (same(chooseGemm(1000, 64, 300), ruleFirst) ? 1.0 : 2.0);
      times.gemmMs["second"] = slowdown * (same(chooseGemm(3000, 32, 500), ruleSecond) ? 1.0 : 0.5);
      times.totalMs = times.gemmMs["first"] + times.gemmMs["second"] + 1.0;
      return times;
    };
    const GemmTuningReport report = tuneGemms(timePlan);
    CHECK(report.shapes == 2);
    CHECK(report.changed == 1);
    CHECK(report.ruleMs == doctest::Approx(2.0));
    CHECK(report.tunedMs == doctest::Approx(1.5));
    CHECK(report.candidates == gemmCandidates(context.limits()).size());
  }
}
