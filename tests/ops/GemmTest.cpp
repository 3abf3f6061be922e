// The GEMM core under every configuration, forced one by one, in each operand layout the dense op uses,
// against float64 at sizes that cross every tile edge; and the rule that picks a configuration.
#include "base/check.h"
#include "ops/Dense.h"
#include "ops/Gemm.h"
#include "ops/GemmTuning.h"
#include "ops/Transpose.h"
#include "ref/Reference.h"
#include "support/Compare.h"
#include "support/GlContext.h"
#include "support/Random.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

using namespace glnet;

namespace {

Buffer workspaceFor(const SplitK& split, std::uint64_t rows, std::uint64_t columns) {
  return Buffer(std::max<std::size_t>(split.workspaceBytes(rows, columns), 4));
}

// (rows, outputs, inputs) of the dense layer: each of 1, 7, 63, 65, 129 and 1000 appears in every position,
// so the forward (M, N, K), input-gradient (M, K, N) and weight-gradient (N, K, M) GEMMs cross the edge of
// every tile size along every axis, with and without vec4 runs (K or N a multiple of 4).
const std::vector<DenseShape> edgeShapes{{1, 7, 63},    {7, 63, 65},  {63, 65, 129}, {65, 129, 1000},
                                         {129, 1000, 1}, {1000, 1, 7}, {1, 1, 1},     {64, 128, 1000}};

// The device's limits again at the end of a case that sets its own, however the case ends.
struct RestoredLimits {
  Limits saved = currentLimits();
  ~RestoredLimits() { setCurrentLimits(saved); }
};

}  // namespace

TEST_CASE("every GEMM configuration has a name and can be forced; those the rule weighs fit the GL minimum limits, one fits ES 3.1's") {
  // No device known (limits of 0), as before any context: every configuration fits and can be forced, whatever device
  // an earlier case of this process opened.
  RestoredLimits restored;
  setCurrentLimits(Limits{});
  Limits glMinimum, esMinimum;
  glMinimum.maxWorkGroupInvocations = 1024;
  glMinimum.maxWorkGroupSize = {1024, 1024, 64};
  glMinimum.maxSharedMemoryBytes = 32768;
  esMinimum.maxWorkGroupInvocations = 128;
  esMinimum.maxWorkGroupSize = {128, 128, 64};
  esMinimum.maxSharedMemoryBytes = 16384;
  for (const GemmConfig& config : gemmConfigs()) {
    if (config.measured) CHECK_MESSAGE(config.fits(glMinimum), config.name);
  }
  const std::vector<const GemmConfig*> es = gemmConfigsFitting(esMinimum);
  REQUIRE(es.size() == 1);
  CHECK(std::string(es[0]->name) == "64x32");
  for (const GemmConfig& config : gemmConfigs()) {
    CAPTURE(config.name);
    CHECK(config.invocations() <= 1024);
    // Two stages of both tiles, each at most (tile + 4) × depth floats (stored along t, padded by a vec4).
    const std::size_t sharedBytes =
        2 * std::size_t{config.tileRows + config.tileColumns} * (config.tileDepth + 4) * sizeof(float);
    CHECK(sharedBytes == config.sharedBytes());
    CHECK(sharedBytes <= 49152);  // NVIDIA's and AMD's 48 KiB
    if (config.measured) CHECK(sharedBytes <= 32768);
    CHECK(config.tileRows % config.threadRows == 0);
    CHECK(config.tileColumns % config.threadColumns == 0);
    CHECK(config.threadRows % 4 == 0);
    CHECK(config.threadColumns % 4 == 0);
    CHECK(config.tileDepth % 4 == 0);
    CHECK(16 % config.tileDepth == 0);  // split-K chunks are multiples of 16
    ForcedGemmConfig forced(config);
    CHECK(chooseGemm(4096, 4096, 4096).config == &config);
  }
  CHECK_THROWS_WITH_AS(gemmConfigNamed("huge"), doctest::Contains("unknown GEMM configuration 'huge'"), Error);
}

TEST_CASE("operands along their rows take 16 values of the sum per stage in place of the rule's 128x128 where the device holds them") {
  IgnoredGemmTuning ruleOnly;
  RestoredLimits restored;
  Limits limits;
  limits.maxWorkGroupInvocations = 1024;
  limits.maxWorkGroupSize = {1024, 1024, 64};
  for (const int shared : {32768, 49152}) {
    CAPTURE(shared);
    limits.maxSharedMemoryBytes = shared;
    setCurrentLimits(limits);
    const GemmChoice square = chooseGemm(8192, 768, 3072, false), alongRows = chooseGemmAlongRows(8192, 768, 3072);
    REQUIRE(std::string(square.config->name) == "128x128");
    CHECK(std::string(alongRows.config->name) == (shared == 49152 ? "128x128k16" : "128x128"));
    CHECK(alongRows.split.splits == 1);
    CHECK(alongRows.tuningKey == square.tuningKey);
    CHECK(!alongRows.measured);
    // Where the rule takes another configuration, or one is forced, that one stays.
    CHECK(chooseGemmAlongRows(64, 64, 64).config == chooseGemm(64, 64, 64, false).config);
    ForcedGemmConfig forced(gemmConfigNamed("64x64"));
    CHECK(std::string(chooseGemmAlongRows(8192, 768, 3072).config->name) == "64x64");
  }
  // No device known (limits of 0): the rule's own choice.
  setCurrentLimits(Limits{});
  CHECK(std::string(chooseGemmAlongRows(8192, 768, 3072).config->name) == "128x128");
}

TEST_CASE("the GEMM rule covers the shape, uses large tiles for large problems and splits long sums of few outputs") {
  IgnoredGemmTuning ruleOnly;  // whatever this machine's glnet_bench --tune kept
  const GemmChoice square = chooseGemm(4096, 4096, 4096);
  CHECK(square.config->tileRows * square.config->tileColumns == 128 * 128);
  CHECK(square.split.splits == 1);
  for (const auto& shape : std::vector<std::array<std::uint64_t, 3>>{
           {1, 128, 784}, {10, 784, 60000}, {78400, 32, 25}, {4096, 10, 1024}, {1, 1, 1}}) {
    const std::uint64_t rows = shape[0], columns = shape[1], depth = shape[2];  // CAPTURE takes them by reference
    CAPTURE(rows);
    CAPTURE(columns);
    CAPTURE(depth);
    const GemmChoice choice = chooseGemm(rows, columns, depth);
    CHECK(std::uint64_t{choice.groups[0]} * choice.config->tileRows >= rows);
    CHECK(std::uint64_t{choice.groups[1]} * choice.config->tileColumns >= columns);
    CHECK(choice.groups[2] == choice.split.splits);
    if (choice.split.splits > 1) {
      CHECK(choice.split.chunk % 16 == 0);
      CHECK(std::uint64_t{choice.split.chunk} * (choice.split.splits - 1) < depth);
    }
    CHECK(chooseGemm(rows, columns, depth, false).split.splits == 1);
  }
  CHECK(chooseGemm(1, 128, 784).split.splits > 1);
  CHECK(chooseGemm(10, 784, 60000).split.splits > 1);
}

TEST_SUITE("gl") {
  TEST_CASE("every GEMM configuration matches float64 in each dense layout at sizes crossing every tile edge") {
    Context& context = test::glContext();
    auto random = test::generator(17);
    ProgramCache programs;
    for (const GemmConfig* fitting : gemmConfigsFitting(context.limits())) {
      const GemmConfig& config = *fitting;
      ForcedGemmConfig forced(config);
      const DenseOp dense(programs, Activation::none);
      for (const DenseShape& shape : edgeShapes) {
        CAPTURE(config.name);
        CAPTURE(shape.rows);
        CAPTURE(shape.outputs);
        CAPTURE(shape.inputs);
        const std::size_t m = shape.rows, n = shape.outputs, k = shape.inputs;
        const auto x = test::uniformFloats(random, m * k);
        const auto w = test::uniformFloats(random, n * k);
        const auto b = test::uniformFloats(random, n);
        const auto dy = test::uniformFloats(random, m * n);
        Buffer xBuffer = Buffer::of(x), wBuffer = Buffer::of(w), bBuffer = Buffer::of(b), dyBuffer = Buffer::of(dy);
        Buffer y = test::poisoned(m * n), dx = test::poisoned(m * k), dw = test::poisoned(n * k);
        Buffer forwardWorkspace(std::max<std::size_t>(DenseOp::forwardWorkspaceBytes(shape, true), 4));
        Buffer weightWorkspace = workspaceFor(DenseOp::weightGradientSplit(shape), n, k);
        Plan plan(context.limits());
        plan.record(dense.forward(xBuffer, wBuffer, bBuffer, y, shape, BufferView(forwardWorkspace)));
        // With no activation dZ = dY, so the gradients are plain GEMMs of dY (Y is only read for act').
        plan.record(dense.inputGradient(dyBuffer, y, wBuffer, dx, shape, false));
        plan.record(dense.weightGradient(dyBuffer, y, xBuffer, dw, shape, false, BufferView(weightWorkspace)));
        plan.run();
        auto expectedY = ref::gemm(x, {k, 1}, w, {k, 1}, m, n, k);
        for (std::size_t r = 0; r < m; ++r) {
          for (std::size_t s = 0; s < n; ++s) expectedY[r * n + s] += b[s];
        }
        // fp32 sums of up to 1000 products of values in [-1, 1] (sums of magnitude ~10): rounding grows like
        // sqrt(depth)·ulp, well inside 2e-4 absolute; the order of a split sum changes nothing of that.
        test::checkClose(y.read<float>(), expectedY, 2e-4, 1e-5);
        test::checkClose(dx.read<float>(), ref::gemm(dy, {n, 1}, w, {1, k}, m, k, n), 2e-4, 1e-5);
        test::checkClose(dw.read<float>(), ref::gemm(dy, {1, n}, x, {1, k}, n, k, m), 2e-4, 1e-5);
      }
    }
  }

  TEST_CASE("Transpose.glsl matches the reference at sizes crossing its tile edges, at an offset") {
    Context& context = test::glContext();
    auto random = test::generator(18);
    ProgramCache programs;
    const TransposeOp transpose(programs);
    for (const auto& [rows, columns] : std::vector<std::pair<std::uint32_t, std::uint32_t>>{
             {1, 1}, {1, 33}, {31, 1}, {33, 65}, {64, 32}, {100, 7}}) {
      CAPTURE(rows);
      CAPTURE(columns);
      const auto source = test::uniformFloats(random, std::size_t{rows} * columns);
      Buffer sourceBuffer = Buffer::of(source);
      // The target sits 256 bytes into a larger buffer, poisoned around it: nothing outside may be written.
      const std::size_t count = std::size_t{rows} * columns, margin = 64;
      Buffer target = test::poisoned(count + 2 * margin);
      Plan plan(context.limits());
      plan.record(transpose(sourceBuffer, BufferView(target, margin * sizeof(float), count * sizeof(float)), rows, columns, "t"));
      plan.run();
      const std::vector<float> result = target.read<float>();
      for (std::size_t r = 0; r < rows; ++r) {
        for (std::size_t c = 0; c < columns; ++c) REQUIRE(result[margin + c * rows + r] == source[r * columns + c]);
      }
      for (std::size_t i = 0; i < margin; ++i) {
        REQUIRE(std::isnan(result[i]));
        REQUIRE(std::isnan(result[margin + count + i]));
      }
    }
  }

  TEST_CASE("Transpose.glsl with an activation makes dY the pre-activation gradient dZ = dY ⊙ act'(Y) in place and writes dZᵀ") {
    Context& context = test::glContext();
    auto random = test::generator(20);
    ProgramCache programs;
    const TransposeOp transpose(programs);
    const std::uint32_t rows = 37, columns = 70;
    const auto dy = test::uniformFloats(random, std::size_t{rows} * columns);
    auto y = test::uniformFloats(random, dy.size());
    y[5] = 0.0f;  // ReLU's kink counts as 0
    Buffer yBuffer = Buffer::of(y);
    for (const Activation activation : {Activation::none, Activation::relu, Activation::tanh, Activation::sigmoid}) {
      CAPTURE(activationName(activation));
      Buffer dyBuffer = Buffer::of(dy), target = test::poisoned(dy.size());
      Plan plan(context.limits());
      plan.record(transpose.preActivationGradient(dyBuffer, yBuffer, target, rows, columns, activation, "dZ"));
      plan.run();
      std::vector<double> dz(dy.size()), expected(dy.size());
      for (std::size_t r = 0; r < rows; ++r) {
        for (std::size_t c = 0; c < columns; ++c) {
          dz[r * columns + c] = dy[r * columns + c] * ref::activationDerivative(activation, y[r * columns + c]);
          expected[c * rows + r] = dz[r * columns + c];
        }
      }
      test::checkClose(target.read<float>(), expected, 1e-6, 1e-6);
      test::checkClose(dyBuffer.read<float>(), dz, 1e-6, 1e-6);  // dY became dZ in place
    }
  }

  TEST_CASE("a large dense layer's forward pass and input gradient run on transposed operands and match float64 under every configuration") {
    Context& context = test::glContext();
    auto random = test::generator(19);
    ProgramCache programs;
    // Just past the size from which the op transposes (2^31 multiply-adds): 515 × 513 reads the transposes in
    // scalars (M and N odd), 516 × 512 in vec4 runs; both cross tile edges.
    CHECK_FALSE(DenseOp::transposesOperands({1024, 1024, 1024}));
    CHECK_FALSE(DenseOp::transposesOperands({511, 1 << 20, 4096}));
    CHECK(DenseOp::inputGradientWorkspaceBytes({1024, 1024, 1024}) == 0);
    CHECK_FALSE(DenseOp::transposesOutputGradient({1024, 784, 4096}));
    for (const DenseShape& shape : {DenseShape{515, 8129, 513}, DenseShape{516, 8136, 512}}) {
      REQUIRE(DenseOp::transposesOperands(shape));
      REQUIRE(DenseOp::transposesOutputGradient(shape));
      const std::size_t m = shape.rows, n = shape.outputs, k = shape.inputs;
      const auto x = test::uniformFloats(random, m * k);
      const auto w = test::uniformFloats(random, n * k);
      const auto b = test::uniformFloats(random, n);
      const auto dy = test::uniformFloats(random, m * n);
      // The float64 references of whole 2^31-multiply-add products took most of a CI minute per API (four under
      // the sanitizers), so they cover the rows on either side of every 32-row tile edge and the last rows: every
      // column, every tile of each configuration along the rows, 37 of the 515 or 516 rows.
      std::vector<std::size_t> checkedRows;
      for (std::size_t r = 0; r < m; ++r) {
        if (r % 32 == 0 || r % 32 == 31 || r + 3 >= m) checkedRows.push_back(r);
      }
      const auto rowsOf = [&checkedRows](const std::vector<float>& matrix, std::size_t columns) {
        std::vector<float> rows;
        for (const std::size_t r : checkedRows) rows.insert(rows.end(), matrix.begin() + r * columns, matrix.begin() + (r + 1) * columns);
        return rows;
      };
      const std::size_t checked = checkedRows.size();
      auto expected = ref::gemm(rowsOf(x, k), {k, 1}, w, {k, 1}, checked, n, k);
      for (std::size_t r = 0; r < checked; ++r) {
        for (std::size_t s = 0; s < n; ++s) expected[r * n + s] = std::max(0.0, expected[r * n + s] + b[s]);
      }
      // The gradient reads a fixed Y of its own rather than each configuration's output, so that no output rounded
      // across ReLU's kink changes the expected dX; a quarter of it is zero, ReLU's kink, which counts as 0.
      std::vector<float> y32 = test::uniformFloats(random, m * n);
      for (std::size_t i = 0; i < y32.size(); i += 4) y32[i] = 0.0f;
      std::vector<float> dz(m * n);
      for (std::size_t i = 0; i < dz.size(); ++i) dz[i] = y32[i] > 0.0f ? dy[i] : 0.0f;
      // The second shape adds to what dX holds (accumulate), the first overwrites it.
      const bool accumulate = m % 4 == 0;
      const auto priorDx = test::uniformFloats(random, m * k);
      auto expectedDx = ref::gemm(rowsOf(dz, n), {n, 1}, w, {1, k}, checked, k, n);
      if (accumulate) {
        const auto priorRows = rowsOf(priorDx, k);
        for (std::size_t i = 0; i < expectedDx.size(); ++i) expectedDx[i] += priorRows[i];
      }
      Buffer xBuffer = Buffer::of(x), wBuffer = Buffer::of(w), bBuffer = Buffer::of(b), yBuffer = Buffer::of(y32);
      Buffer workspace = test::poisoned(DenseOp::forwardWorkspaceBytes(shape, true) / sizeof(float));
      Buffer gradientWorkspace = test::poisoned(DenseOp::inputGradientWorkspaceBytes(shape) / sizeof(float));
      for (const GemmConfig* config : gemmConfigsFitting(context.limits())) {
        CAPTURE(config->name);
        CAPTURE(shape.rows);
        ForcedGemmConfig forced(*config);
        const DenseOp dense(programs, Activation::relu);
        Buffer y = test::poisoned(m * n);
        Buffer dx = accumulate ? Buffer::of(priorDx) : test::poisoned(m * k);
        const std::vector<Dispatch> forward = dense.forward(xBuffer, wBuffer, bBuffer, y, shape, BufferView(workspace));
        REQUIRE(forward.size() == 3);
        CHECK(forward.back().label.find("on transposes") != std::string::npos);
        Buffer dyBuffer = Buffer::of(dy);  // becomes dZ in place
        Plan plan(context.limits());
        plan.record(forward);
        plan.record(dense.preActivationGradient(dyBuffer, yBuffer, gradientWorkspace, shape));
        plan.record(dense.inputGradientOnTransposed(gradientWorkspace, wBuffer, dx, shape, accumulate));
        plan.run();
        // fp32 sums of ~8000 (forward) or ~500 (dX) products of values in [-1, 1]: rounding grows like sqrt(depth)·ulp.
        const std::vector<float> yRead = y.read<float>(), dxRead = dx.read<float>();
        test::checkClose(rowsOf(yRead, n), expected, 1e-3, 1e-5);
        test::checkClose(rowsOf(dxRead, k), expectedDx, 2e-4, 1e-5);
        // The rows left unchecked were written all the same: none keeps its NaN poison.
        const auto unwritten = [](float value) { return std::isnan(value); };
        CHECK(std::none_of(yRead.begin(), yRead.end(), unwritten));
        CHECK(std::none_of(dxRead.begin(), dxRead.end(), unwritten));
        REQUIRE(dyBuffer.read<float>() == dz);
      }
    }
  }
}
