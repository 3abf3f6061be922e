// Every operator of imported models against its float64 reference: fresh random inputs, odd sizes, outputs
// poisoned with NaN before the run, under both APIs (the gl suite runs under GL and ES).
#include "graph/CompiledGraph.h"
#include "graph/InferenceOps.h"
#include "graph/Ops.h"
#include "ops/GemmTuning.h"
#include "ops/Conv.h"
#include "ops/Gemm.h"
#include "ops/Winograd.h"
#include "graph/ReferenceGraph.h"
#include "support/Compare.h"
#include "support/GlContext.h"
#include "support/Random.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>

using namespace glnet;

namespace {

struct Case {
  std::shared_ptr<const Op> op;
  std::vector<Shape> inputs;
  float low = -2.0f, high = 2.0f;
  double atol = 1e-6, rtol = 1e-5;
  std::size_t nanEvery = 0;  // not 0: a NaN in every nanEvery-th element of the first input, out where the reference has it
  // Changes input i's random values after they are drawn (indices made whole numbers, some out of range).
  std::function<void(std::size_t i, std::vector<float>& values)> adjust = nullptr;
  float poison = NAN;  // what the output holds before the run: a number where NaN is an answer (a bad index's)
  bool expectsNan = false;  // NaN answers expected (checked as with nanEvery)
};

// Case::adjust for indices: input `input`'s values made whole numbers from `low` to `high` (negatives count from the end).
std::function<void(std::size_t, std::vector<float>&)> wholeIndices(std::size_t input, int low, int high, std::uint32_t stream) {
  return [=](std::size_t i, std::vector<float>& values) {
    if (i != input) return;
    std::mt19937 random = test::generator(stream);
    std::uniform_int_distribution<int> uniform(low, high);
    for (float& v : values) v = static_cast<float>(uniform(random));
  };
}

std::shared_ptr<const Op> groupedConv(std::array<std::uint32_t, 2> strides, std::array<std::uint32_t, 4> pads, std::uint32_t groups,
                                      std::array<std::uint32_t, 2> dilations = {1, 1}, Pointwise after = {}) {
  ConvSettings s;
  s.strides = strides;
  s.pads = pads;
  s.groups = groups;
  s.dilations = dilations;
  return groupedConvOp(s, after);
}

// Inputs listed in `parameters` become parameters (a convolution's weights and bias, which an inference graph then
// prepares); `memory` decides where the tensors and the ops' scratch live. Returns the plan's labels.
std::vector<std::string> checkAgainstReference(const Case& c, std::uint32_t stream, const std::vector<std::size_t>& parameters = {},
                                               CompiledGraph::Memory memory = CompiledGraph::Memory::kept) {
  Context& context = test::glContext();
  auto random = test::generator(stream);
  Graph graph;
  std::vector<Tensor> inputs;
  std::map<int, std::vector<double>> feeds;
  std::vector<std::vector<float>> values;
  const auto isParameter = [&](std::size_t i) { return std::find(parameters.begin(), parameters.end(), i) != parameters.end(); };
  for (std::size_t i = 0; i < c.inputs.size(); ++i) {
    values.push_back(test::uniformFloats(random, elementCount(c.inputs[i]), c.low, c.high));
    for (std::size_t k = 3; c.nanEvery > 0 && i == 0 && k < values.back().size(); k += c.nanEvery) values.back()[k] = NAN;
    if (c.adjust) c.adjust(i, values.back());
    inputs.push_back(isParameter(i) ? graph.parameter("p" + std::to_string(i), c.inputs[i], values.back())
                                    : graph.input("x" + std::to_string(i), c.inputs[i]));
    if (!isParameter(i)) feeds[inputs.back().id] = test::widen(values.back());
  }
  const Tensor y = graph.apply(c.op, inputs);
  CAPTURE(c.op->name());
  CAPTURE(describe(graph.tensor(y).shape));
  CompiledGraph compiled(context, graph, memory, {y});
  Plan plan = compiled.forwardPlan([](Plan&) {});
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!isParameter(i)) compiled.upload(inputs[i], values[i].data(), values[i].size() * sizeof(float));
  }
  std::vector<float> result(elementCount(graph.tensor(y).shape), c.poison);
  if (!c.op->isView()) compiled.upload(y, result.data(), result.size() * sizeof(float));  // poisoned: an unwritten element fails
  plan.run();
  const BufferView out = compiled.view(y);
  plan.read(*out.buffer, result.data(), result.size() * sizeof(float), out.offset);
  const std::vector<double> reference = referenceValues(graph, feeds)[static_cast<std::size_t>(y.id)];
  if (c.nanEvery > 0 || c.expectsNan) {
    test::checkNanPropagated(result, reference, c.atol, c.rtol);
  } else {
    test::checkClose(result, reference, c.atol, c.rtol);
  }
  return plan.labels();
}

}  // namespace

TEST_SUITE("gl") {
  TEST_CASE("pointwise functions of imported models match float64") {
    std::uint32_t stream = 300;
    const std::vector<Pointwise> functions{{PointwiseKind::relu},        {PointwiseKind::sigmoid},    {PointwiseKind::tanh},
                                           {PointwiseKind::clip, 0, 6},  {PointwiseKind::clip, -INFINITY, 0.5f},
                                           {PointwiseKind::hardSigmoid, 0.2f, 0.5f},  {PointwiseKind::hardSwish},
                                           {PointwiseKind::leakyRelu, 0.01f},         {PointwiseKind::erf},
                                           {PointwiseKind::gelu},        {PointwiseKind::geluTanh},   {PointwiseKind::exp},
                                           {PointwiseKind::negate},      {PointwiseKind::abs},        {PointwiseKind::elu, 1.0f},
                                           {PointwiseKind::softplus},    {PointwiseKind::silu},       {PointwiseKind::pow, 3.0f},
                                           {PointwiseKind::pow, 2.0f},   {PointwiseKind::mish}};
    for (const Pointwise& f : functions) {
      // Across erf's two approximations (|x| = 0.5) and out where exp saturates.
      checkAgainstReference({pointwiseOp(f), {{3, 5, 7}}, -7.0f, 7.0f, 3e-7, 3e-6}, stream++);
    }
    for (const Pointwise& f : std::vector<Pointwise>{{PointwiseKind::ceil}, {PointwiseKind::floor}, {PointwiseKind::round}, {PointwiseKind::sign},
                                                     {PointwiseKind::sin}, {PointwiseKind::cos}, {PointwiseKind::tan}, {PointwiseKind::atan},
                                                     {PointwiseKind::sinh}, {PointwiseKind::cosh}, {PointwiseKind::asinh},
                                                     {PointwiseKind::thresholdedRelu, 0.5f}, {PointwiseKind::shrink, 0.1f, 0.5f},
                                                     {PointwiseKind::celu, 1.2f}, {PointwiseKind::selu, 1.6733f, 1.0507f}, {PointwiseKind::softsign}}) {
      checkAgainstReference({pointwiseOp(f), {{5, 13}}, -1.2f, 1.2f, 3e-7, 3e-6}, stream++);
    }
    for (const Pointwise& f : std::vector<Pointwise>{{PointwiseKind::asin}, {PointwiseKind::acos}, {PointwiseKind::atanh}}) {
      checkAgainstReference({pointwiseOp(f), {{31}}, -0.9f, 0.9f, 3e-7, 3e-6}, stream++);
    }
    checkAgainstReference({pointwiseOp({PointwiseKind::acosh}), {{31}}, 1.1f, 9.0f, 3e-7, 3e-6}, stream++);
    // The casts of computed tensors to integers and booleans: exact, and NaN kept by trunc (a cast to bool makes it
    // true, as NumPy's astype(bool) does: a boolean has no NaN).
    checkAgainstReference({pointwiseOp({PointwiseKind::trunc}), {{5, 13}}, -3.5f, 3.5f, 0, 0, 7}, stream++);
    checkAgainstReference({pointwiseOp({PointwiseKind::nonZero}), {{5, 13}}, -1.6f, 1.6f, 0, 0, 0, wholeIndices(0, -1, 1, stream)}, stream++);
    // Functions defined for positive inputs only.
    for (const Pointwise& f : std::vector<Pointwise>{{PointwiseKind::sqrt}, {PointwiseKind::log}, {PointwiseKind::reciprocal}, {PointwiseKind::pow, 0.7f}}) {
      checkAgainstReference({pointwiseOp(f), {{67}}, 0.1f, 9.0f, 1e-7, 3e-6}, stream++);
    }
  }

  TEST_CASE("NaN in gives NaN out through ReLU, clamps, maximum, max pooling and reductions, on the GPU and in float64") {
    // GLSL's max, min and clamp, and std::max, may return the other operand of a NaN; PyTorch propagates it.
    std::uint32_t stream = 2600;
    const auto withNans = [](std::shared_ptr<const Op> op, std::vector<Shape> inputs, std::size_t every = 7) {
      Case c{std::move(op), std::move(inputs), -7.0f, 7.0f, 3e-7, 3e-6};
      c.nanEvery = every;
      return c;
    };
    for (const Pointwise& f : std::vector<Pointwise>{{PointwiseKind::relu}, {PointwiseKind::tanh}, {PointwiseKind::clip, 0, 6},
                                                     {PointwiseKind::clip, -INFINITY, 0.5f}, {PointwiseKind::hardSigmoid, 0.2f, 0.5f},
                                                     {PointwiseKind::hardSwish}, {PointwiseKind::leakyRelu, 0.01f},
                                                     {PointwiseKind::geluTanh}, {PointwiseKind::elu, 1.0f}, {PointwiseKind::softplus},
                                                     {PointwiseKind::thresholdedRelu, 0.5f}, {PointwiseKind::shrink, 0.1f, 0.5f},
                                                     {PointwiseKind::celu, 1.2f}, {PointwiseKind::selu, 1.6733f, 1.0507f}}) {
      checkAgainstReference(withNans(pointwiseOp(f), {{3, 5, 7}}), stream++);
    }
    for (const Activation a : {Activation::relu, Activation::tanh}) checkAgainstReference(withNans(activationOp(a), {{3, 5, 7}}), stream++);
    for (const BinaryKind kind : {BinaryKind::maximum, BinaryKind::minimum}) {
      checkAgainstReference(withNans(broadcastOp(kind), {{2, 3, 5}, {5}}), stream++);
    }
    // A residual sum with its ReLU fused, a dense layer's (a NaN in each row), a convolution's and a grouped one's, with
    // NaN few enough in convolutions that some pooled windows hold a NaN among numbers.
    checkAgainstReference(withNans(broadcastOp(BinaryKind::add, {PointwiseKind::relu}), {{2, 3, 5, 5}, {2, 3, 5, 5}}), stream++);
    Case dense = withNans(denseOp(Activation::relu), {{5, 9}, {4, 9}, {4}});
    dense.atol = 1e-5;
    checkAgainstReference(dense, stream++, {1, 2});
    for (const Case& conv : {withNans(conv2dOp(Activation::relu, 1), {{2, 3, 9, 7}, {4, 3, 3, 3}, {4}}, 53),
                             withNans(conv2dResidualOp(1, 1, {PointwiseKind::relu}), {{2, 4, 7, 9}, {4, 4, 3, 3}, {4}, {2, 4, 7, 9}}, 53),
                             // Inception's 1x7 and 7x1 kernels: each axis padded by its own "same" amount.
                             withNans(conv2dOp(Activation::relu, 0, 1, {}, false, 3), {{2, 5, 6, 9}, {7, 5, 1, 7}, {7}}, 53),
                             withNans(conv2dOp(Activation::none, 3, 1, {}, false, 0), {{2, 5, 9, 6}, {7, 5, 7, 1}, {7}}, 53),
                             withNans(conv2dResidualOp(0, 2, {PointwiseKind::relu}, false, 1), {{2, 4, 7, 9}, {4, 4, 1, 3}, {4}, {2, 4, 4, 5}}, 53),
                             withNans(groupedConv({1, 1}, {1, 1, 1, 1}, 3, {1, 1}, {PointwiseKind::relu}), {{2, 3, 9, 7}, {6, 1, 3, 3}, {6}}, 53),
                             // Fused with 2x2 max pooling: in the GEMM's stores, and summed over a split at a batch of one.
                             withNans(conv2dMaxPoolOp(Activation::relu, 1), {{2, 3, 9, 11}, {4, 3, 3, 3}, {4}}, 97),
                             withNans(conv2dMaxPoolOp(Activation::none, 1), {{1, 96, 6, 6}, {24, 96, 3, 3}, {24}}, 1009)}) {
      Case c = conv;
      c.low = -1.0f;
      c.high = 1.0f;
      c.atol = 1e-5;
      c.rtol = 1e-4;
      checkAgainstReference(c, stream++, {1, 2});
    }
    checkAgainstReference(withNans(maxPoolOp(), {{2, 3, 9, 7}}), stream++);
    PoolSettings s;
    s.kernel = {3, 3};
    s.strides = {2, 2};
    s.pads = {1, 1, 1, 1};
    checkAgainstReference(withNans(poolOp(s), {{2, 3, 9, 11}}), stream++);
    s.dilations = {2, 1};
    s.ceilMode = true;
    checkAgainstReference(withNans(poolOp(s), {{1, 2, 10, 13}}), stream++);
    // Along an axis: ReduceMax/Min, a global max pool, softmax and the sums, with lines that hold a NaN and lines that
    // do not (a NaN every 11th value of lines of 7, and of 300 so that it meets other values in the group's combination).
    for (const AxisKind kind : {AxisKind::max, AxisKind::min, AxisKind::softmax, AxisKind::logSumExp, AxisKind::sum, AxisKind::layerNormalization,
                                AxisKind::rmsNormalization}) {
      for (const std::uint32_t axis : {7u, 300u}) {
        std::vector<Shape> inputs{{5, axis}};
        if (kind == AxisKind::layerNormalization) inputs = {{5, axis}, {axis}, {axis}};
        if (kind == AxisKind::rmsNormalization) inputs = {{5, axis}, {axis}};
        Case c = withNans(axisOp(kind, 1, 2), inputs, axis == 7u ? 11 : 401);
        c.atol = 1e-6;
        c.rtol = 2e-5;
        checkAgainstReference(c, stream++);
      }
    }
    checkAgainstReference(withNans(axisOp(AxisKind::max, 2, 4), {{2, 3, 5, 5}}, 29), stream++);
    checkAgainstReference(withNans(axisOp(AxisKind::hardmax, 1, 2), {{4, 9}}), stream++);  // NaN throughout its line
  }

  TEST_CASE("broadcast arithmetic matches float64 over NumPy's broadcasting rules") {
    std::uint32_t stream = 340;
    const std::vector<std::vector<Shape>> pairs{{{2, 3, 5}, {2, 3, 5}}, {{2, 3, 5}, {5}},       {{4, 1, 3}, {1, 7, 1}},
                                                {{1}, {3, 2}},          {{2, 1, 3, 1, 2}, {5, 3, 1, 1}}, {{2, 3, 1, 1, 2, 3}, {3, 4, 1, 3}}};
    for (const BinaryKind kind : {BinaryKind::add, BinaryKind::subtract, BinaryKind::multiply, BinaryKind::maximum, BinaryKind::minimum}) {
      for (const auto& shapes : pairs) checkAgainstReference({broadcastOp(kind), shapes}, stream++);
    }
    checkAgainstReference({broadcastOp(BinaryKind::divide), {{3, 4}, {4}}, 0.5f, 2.0f}, stream++);
    checkAgainstReference({broadcastOp(BinaryKind::power), {{3, 4}, {1}}, 0.5f, 2.0f}, stream++);
    checkAgainstReference({broadcastOp(BinaryKind::prelu), {{2, 3, 4, 5}, {3, 1, 1}}}, stream++);  // a slope per channel
    // A residual sum with its activation fused.
    checkAgainstReference({broadcastOp(BinaryKind::add, {PointwiseKind::relu}), {{2, 3, 5, 5}, {2, 3, 5, 5}}}, stream++);
    CHECK_THROWS_WITH(broadcastShapes({2, 3}, {4}), "shapes [2, 3] and [4] do not broadcast");
  }

  TEST_CASE("comparisons, logical ops, Not, IsNaN, IsInf, Mod and Where match float64 over NumPy's broadcasting") {
    // Booleans are floats 0 and 1. NaN in gives NaN out does not apply to the comparisons and logical ops by definition
    // (IEEE, NumPy): a comparison with a NaN is false, a logical op reads a NaN as true (nonzero), IsNaN(NaN) is 1;
    // their outputs are exactly 0 or 1 (atol 0), never NaN. Mod and Where pass a NaN on as arithmetic does.
    std::uint32_t stream = 2700;
    const auto round = [](std::vector<float>& v) {
      for (float& x : v) x = std::nearbyint(x);
    };
    // Whole numbers in [-3, 3] (equal pairs and zeros are frequent), a NaN in every 5th element (a different one per input).
    const auto wholeWithNans = [&](std::size_t i, std::vector<float>& v) {
      round(v);
      for (std::size_t k = i + 2; k < v.size(); k += 5) v[k] = NAN;
    };
    const std::vector<std::vector<Shape>> pairs{{{2, 3, 5}, {5}}, {{4, 1, 3}, {1, 7, 1}}, {{1}, {3, 2}}, {{2, 1, 3, 1, 2}, {5, 3, 1, 1}},
                                                {{3, 1, 1, 2, 1, 3}, {2, 1, 4, 1}}};
    for (const BinaryKind kind : {BinaryKind::equal, BinaryKind::less, BinaryKind::lessOrEqual, BinaryKind::greater, BinaryKind::greaterOrEqual,
                                  BinaryKind::logicalAnd, BinaryKind::logicalOr, BinaryKind::logicalXor}) {
      for (const auto& shapes : pairs) {
        Case c{broadcastOp(kind), shapes, -3.0f, 3.0f, 0.0, 0.0};
        c.adjust = wholeWithNans;
        checkAgainstReference(c, stream++);
      }
      checkAgainstReference({broadcastOp(kind), {{3, 5, 7}, {3, 5, 7}}, -1.0f, 1.0f, 0.0, 0.0}, stream++);  // fractions, no NaN
    }
    // Not with a comparison before it (fused into its kernel), as exports write a != b.
    Case notEqual{broadcastOp(BinaryKind::equal, {PointwiseKind::logicalNot}), {{4, 1, 3}, {1, 7, 1}}, -3.0f, 3.0f, 0.0, 0.0};
    notEqual.adjust = wholeWithNans;
    checkAgainstReference(notEqual, stream++);
    // Not, IsNaN and IsInf (each pair of detect_negative, detect_positive) over zeros, numbers, NaN and both infinities.
    for (const Pointwise& f : std::vector<Pointwise>{{PointwiseKind::logicalNot}, {PointwiseKind::isNan}, {PointwiseKind::isInf, 1, 1},
                                                     {PointwiseKind::isInf, 1, 0}, {PointwiseKind::isInf, 0, 1}, {PointwiseKind::isInf, 0, 0}}) {
      Case c{pointwiseOp(f), {{5, 13}}, -2.0f, 2.0f, 0.0, 0.0};
      c.adjust = [&](std::size_t, std::vector<float>& v) {
        round(v);
        for (std::size_t k = 0; k + 6 < v.size(); k += 7) {
          v[k + 3] = NAN;
          v[k + 5] = INFINITY;
          v[k + 6] = -INFINITY;
        }
      };
      checkAgainstReference(c, stream++);
    }
    // The padding mask of token ids: −inf exactly at the padding id (3), 0 elsewhere.
    Case padding{pointwiseOp({PointwiseKind::paddingMask, 3.0f}), {{5, 13}}, 0.0f, 6.0f, 0.0, 0.0};
    padding.adjust = [&](std::size_t, std::vector<float>& v) { round(v); };
    checkAgainstReference(padding, stream++);
    // Mod: integers (Swin's shape arithmetic) exactly, of both signs and up to 2^24 over divisors up to 167, where
    // a / b may round across a whole number; no divisor is 0.
    // Integer division likewise (ONNX's Div of integer tensors), truncated toward zero.
    for (const BinaryKind kind : {BinaryKind::mod, BinaryKind::fmod, BinaryKind::integerDivide}) {
      for (const float range : {9.0f, 16777216.0f}) {
        Case c{broadcastOp(kind), {{3, 1, 7}, {5, 1}}, -range, range, 0.0, 0.0};
        c.adjust = [&, range](std::size_t i, std::vector<float>& v) {
          if (i == 1) {
            for (float& x : v) x = x * std::min(1.0f, 167.0f / range);
          }
          round(v);
          for (float& x : v) x = i == 1 && x == 0 ? 7.0f : x;
        };
        checkAgainstReference(c, stream++);
      }
      if (kind == BinaryKind::integerDivide) continue;  // of integers only
      // Of floats (a − b·trunc(a/b) in float32: within a few ulp of |a|), and with NaN in, NaN out.
      checkAgainstReference({broadcastOp(kind), {{2, 3, 5}, {3, 1}}, -4.0f, 4.0f, 1e-6, 1e-5}, stream++);
      Case nan{broadcastOp(kind), {{3, 5, 7}, {7}}, -4.0f, 4.0f, 1e-6, 1e-5};
      nan.nanEvery = 7;
      checkAgainstReference(nan, stream++);
    }
    // Where: conditions of whole numbers (zeros, and nonzero values other than 1, true) with a NaN (true) now and then;
    // x and y with a NaN in every 4th element, which passes where chosen.
    for (const std::vector<Shape>& shapes : std::vector<std::vector<Shape>>{{{2, 1, 5}, {3, 5}, {2, 3, 1}}, {{1}, {4, 3}, {3}},
                                                                            {{3, 1, 1}, {1, 4, 1}, {1, 1, 5}}, {{4, 3}, {4, 3}, {4, 3}},
                                                                            {{2, 1, 3, 1, 2, 1}, {3, 1, 4, 1, 3}, {1, 1, 2, 1}}}) {
      Case c{whereOp(), shapes, -2.0f, 2.0f, 0.0, 0.0};
      c.adjust = [&](std::size_t i, std::vector<float>& v) {
        if (i == 0) round(v);
        for (std::size_t k = i == 0 ? 10 : i; k < v.size(); k += i == 0 ? 11 : 4) v[k] = NAN;
      };
      c.expectsNan = true;
      checkAgainstReference(c, stream++);
    }
    CHECK_THROWS_WITH(Graph().apply(whereOp(), {}), "where takes a condition and two tensors");
  }

  TEST_CASE("layout operators (transpose, slice, concat, pad, expand, reshape) match float64") {
    std::uint32_t stream = 380;
    checkAgainstReference({transposeOp({0, 2, 3, 1}), {{2, 3, 5, 7}}}, stream++);
    checkAgainstReference({transposeOp({2, 0, 1}), {{3, 1, 5}}}, stream++);
    checkAgainstReference({transposeOp({5, 4, 3, 2, 1, 0}), {{2, 1, 3, 2, 1, 3}}}, stream++);
    checkAgainstReference({sliceOp({0, 1, 2}, {1, 2, 1}, {2, 3, 3}), {{2, 7, 5}}}, stream++);
    checkAgainstReference({sliceOp({1, 6}, {1, -2}, {2, 4}), {{3, 7}}}, stream++);
    checkAgainstReference({concatOp(1), {{2, 3, 5}, {2, 1, 5}, {2, 4, 5}}}, stream++);
    checkAgainstReference({concatOp(0), {{1, 3}, {2, 3}}}, stream++);
    checkAgainstReference({concatOp(2), {{2, 3, 1}, {2, 3, 2}}}, stream++);
    checkAgainstReference({padOp({0, 0, 1, 2}, {0, 1, 1, 0}, 0.5f), {{2, 3, 4, 5}}}, stream++);
    checkAgainstReference({expandOp({2, 3, 4}), {{3, 1}}}, stream++);
    checkAgainstReference({expandOp({3, 1}), {{2, 1, 5}}}, stream++);
    checkAgainstReference({reshapeOp({6, 5}), {{2, 3, 5}}}, stream++);
    Graph graph;
    CHECK_THROWS_WITH(graph.apply(sliceOp({0}, {1}, {4}), {graph.input("x", {3})}), "slice runs outside [3]");
  }

  TEST_CASE("regions of one tensor (a roll's pieces, every other row and column joined) match float64; regions that leave the tensors, are no boxes of the output, overlap or do not fill it are refused") {
    std::uint32_t stream = 395;
    // torch.roll(x, -2, 1) of [2, 5, 3]: y[:, 0:3] = x[:, 2:5], y[:, 3:5] = x[:, 0:2]; NaN in, NaN out.
    Case roll{regionsOp({2, 5, 3}, {{{2, 3, 3}, 6, 0, {15, 3, 1}, {15, 3, 1}}, {{2, 2, 3}, 0, 9, {15, 3, 1}, {15, 3, 1}}}), {{2, 5, 3}}};
    roll.nanEvery = 7;
    checkAgainstReference(roll, stream++);
    // Rolled along both axes at once, y[i, j] = x[(i + 1) mod 3, (j + 3) mod 4] of [3, 4]: four boxes.
    checkAgainstReference({regionsOp({3, 4}, {{{2, 1}, 7, 0, {4, 1}, {4, 1}},
                                              {{2, 3}, 4, 1, {4, 1}, {4, 1}},
                                              {{1, 1}, 3, 8, {4, 1}, {4, 1}},
                                              {{1, 3}, 0, 9, {4, 1}, {4, 1}}}),
                           {{3, 4}}},
                          stream++);
    // Swin's patch merging of [1, 4, 6, 2]: rows 0::2 and 1::2 of columns 0::2, joined along the channels, [1, 2, 3, 4].
    checkAgainstReference({regionsOp({1, 2, 3, 4}, {{{1, 2, 3, 2}, 0, 0, {48, 24, 4, 1}, {24, 12, 4, 1}},
                                                     {{1, 2, 3, 2}, 12, 2, {48, 24, 4, 1}, {24, 12, 4, 1}}}),
                           {{1, 4, 6, 2}}},
                          stream++);
    Graph graph;
    const Tensor x = graph.input("x", {2, 3});
    CHECK_THROWS_WITH(graph.apply(regionsOp({2, 3}, {{{2, 3}, 1, 0, {3, 1}, {3, 1}}}), {x}), doctest::Contains("runs outside [2, 3]"));
    CHECK_THROWS_WITH(graph.apply(regionsOp({2, 3}, {{{2, 2}, 0, 0, {3, 1}, {3, 1}}}), {x}), "the regions hold 4 elements, not the 6 of [2, 3]");
    // Row 0 twice and row 1 never: as many elements as the output, but not each once.
    CHECK_THROWS_WITH(graph.apply(regionsOp({2, 3}, {{{1, 3}, 0, 0, {3, 1}, {3, 1}}, {{1, 3}, 3, 0, {3, 1}, {3, 1}}}), {x}),
                      "two regions of [2, 3] share elements");
    CHECK_THROWS_WITH(graph.apply(regionsOp({2, 3}, {{{3, 2}, 0, 0, {1, 3}, {1, 3}}}), {x}), "a region of [3, 2] is no box of [2, 3]");
  }

  TEST_CASE("gather, gather nd, scatter nd and trilu, with indices held as floats, match float64") {
    std::uint32_t stream = 400;
    const auto gather = [&](std::shared_ptr<const Op> op, std::vector<Shape> shapes, int low, int high, std::vector<std::size_t> parameters = {}) {
      Case c{std::move(op), std::move(shapes)};
      c.adjust = wholeIndices(1, low, high, stream);
      checkAgainstReference(c, stream++, parameters);
    };
    // An embedding lookup: a table [V, D] (a parameter) at token ids [B, S], negatives from the end.
    gather(gatherOp(0), {{37, 13}, {3, 7}}, -37, 36, {0});
    gather(gatherOp(1), {{3, 5, 4}, {2, 3}}, -5, 4);
    gather(gatherOp(3), {{2, 3, 2, 5}, {1}}, -5, 4);
    gather(gatherOp(2), {{2, 3, 5, 3}, {}}, -5, 4);  // a scalar index drops the axis
    gather(gatherNdOp(0), {{4, 5, 3}, {2, 3, 2}}, -4, 3);
    gather(gatherNdOp(0), {{2, 3, 4}, {5, 3}}, -2, 1);
    gather(gatherNdOp(1), {{3, 5, 2}, {3, 4, 1}}, -5, 4);
    gather(gatherNdOp(2), {{2, 3, 7, 2}, {2, 3, 5, 1}}, -7, 6);
    // An index outside its axis, fractional or NaN gives NaN for what it would have read, and reads nothing.
    for (std::shared_ptr<const Op> op : {gatherOp(1), gatherNdOp(1)}) {
      Case c{op, {{3, 6, 2}, {3, 5, 1}}};
      c.adjust = [](std::size_t i, std::vector<float>& values) {
        if (i != 1) return;
        for (std::size_t k = 0; k < values.size(); ++k) values[k] = static_cast<float>(static_cast<int>(k % 12) - 6);  // -6 to 5
        values[1] = 6, values[4] = -7, values[7] = 2.5f, values[9] = NAN, values[13] = 1e9f;
      };
      c.poison = 7777.0f;
      c.expectsNan = true;
      checkAgainstReference(c, stream++);
    }
    // Scatter: distinct rows, negatives from the end.
    const auto scatter = [&](std::vector<Shape> shapes, std::vector<float> indices) {
      Case c{scatterNdOp(), std::move(shapes)};
      c.adjust = [indices](std::size_t i, std::vector<float>& values) {
        if (i == 1) values = indices;
      };
      c.poison = 7777.0f;
      checkAgainstReference(c, stream++);
    };
    scatter({{5, 4, 3}, {3, 1}, {3, 4, 3}}, {0, -1, 2});
    scatter({{4, 6}, {2, 3, 2}, {2, 3}}, {0, 1, 3, -1, 2, 2, 1, 1, -4, 0, 3, 4});
    scatter({{3, 7}, {1, 2}, {1}}, {2, 6});
    for (const auto& [upper, k] : std::vector<std::pair<bool, std::int64_t>>{{true, 0}, {false, -1}, {true, 2}, {false, 10}, {true, -100}, {false, 0}}) {
      checkAgainstReference({triluOp(upper, k), {{2, 5, 7}}}, stream++);
      checkAgainstReference({triluOp(upper, k), {{6, 3}}}, stream++);
    }
    // NaN stays where the triangle keeps it; where it zeroes, 0 (as numpy.triu and torch.triu).
    checkAgainstReference({triluOp(true, 1), {{3, 5, 4}}, -2.0f, 2.0f, 1e-6, 1e-5, 2}, stream++);
    Graph graph;
    CHECK_THROWS_WITH(graph.apply(gatherNdOp(1), {graph.input("d", {3, 4}), graph.input("i", {2, 1})}), "gather nd's batch axes differ: [3, 4] and [2, 1]");
    CHECK_THROWS_WITH(graph.apply(scatterNdOp(), {graph.input("d", {3, 4}), graph.input("i", {2, 1}), graph.input("u", {2, 3})}),
                      "scatter nd's updates are [2, 3], not [2, 4]");
  }

  TEST_CASE("pooling of any geometry matches float64") {
    std::uint32_t stream = 420;
    const auto pool = [](bool average, std::array<std::uint32_t, 2> kernel, std::array<std::uint32_t, 2> strides,
                         std::array<std::uint32_t, 4> pads, bool ceil, bool countPad, std::array<std::uint32_t, 2> dilations = {1, 1}) {
      PoolSettings s;
      s.average = average;
      s.kernel = kernel;
      s.strides = strides;
      s.pads = pads;
      s.ceilMode = ceil;
      s.countIncludePad = countPad;
      s.dilations = dilations;
      return poolOp(s);
    };
    checkAgainstReference({pool(false, {3, 3}, {2, 2}, {1, 1, 1, 1}, false, false), {{2, 3, 9, 11}}}, stream++);  // ResNet's stem
    checkAgainstReference({pool(false, {3, 3}, {2, 2}, {0, 0, 0, 0}, true, false), {{1, 2, 10, 13}}}, stream++);  // SqueezeNet's ceil mode
    checkAgainstReference({pool(false, {2, 3}, {1, 2}, {0, 1, 1, 0}, false, false, {2, 1}), {{1, 2, 7, 8}}}, stream++);
    checkAgainstReference({pool(true, {2, 2}, {2, 2}, {0, 0, 0, 0}, false, false), {{2, 3, 7, 7}}}, stream++);  // DenseNet's transitions
    checkAgainstReference({pool(true, {3, 3}, {2, 2}, {1, 1, 1, 1}, true, true), {{1, 2, 8, 9}}}, stream++);
    checkAgainstReference({pool(true, {3, 3}, {2, 2}, {1, 1, 1, 1}, true, false), {{1, 2, 8, 9}}}, stream++);
    checkAgainstReference({pool(true, {5, 5}, {3, 3}, {2, 2, 2, 2}, false, true), {{2, 1, 11, 7}}}, stream++);
  }

  TEST_CASE("grouped, depthwise, strided and dilated convolutions match float64") {
    std::uint32_t stream = 460;
    checkAgainstReference({groupedConv({2, 2}, {3, 3, 3, 3}, 1), {{2, 3, 17, 15}, {5, 3, 7, 7}, {5}}, -1, 1, 1e-5, 1e-4}, stream++);  // a stem
    checkAgainstReference({groupedConv({1, 1}, {1, 1, 1, 1}, 6, {1, 1}, {PointwiseKind::clip, 0, 6}), {{2, 6, 9, 7}, {6, 1, 3, 3}, {6}}}, stream++);  // depthwise
    checkAgainstReference({groupedConv({2, 2}, {2, 2, 2, 2}, 4, {1, 1}, {PointwiseKind::hardSwish}), {{1, 4, 11, 11}, {8, 1, 5, 5}, {8}}}, stream++);  // multiplier 2
    checkAgainstReference({groupedConv({1, 2}, {0, 1, 2, 0}, 3, {2, 1}), {{2, 6, 8, 9}, {9, 2, 3, 2}, {9}}}, stream++);
    checkAgainstReference({groupedConv({2, 2}, {0, 0, 0, 0}, 1), {{3, 5, 9, 9}, {7, 5, 1, 1}, {7}}}, stream++);  // a downsampling shortcut
  }

  TEST_CASE("depthwise convolutions (tiles in shared memory) match float64 at every tile shape and edge") {
    std::uint32_t stream = 465;
    // One output per invocation: 3x3 over 40x37 (tiles of 32x8, partial ones at both edges); 5x5 over 23x17; a 7x7
    // plane (one 8x8 tile) with many channels; dilation 2; a 1-pixel row (4 planes per group); 3x3 over 12x16 and
    // 5x5 over 9x40. Runs of
    // 4 outputs per invocation (layers of 2^20 outputs and more): 3x3 over 256x256 (rows of a multiple of 4, each
    // run one vec4 store), 5x5 with dilation 2 over 300x877 (partial tiles and a partial last run per row; among a
    // million sums of 25 products some cancel to 1e-3, hence the stem's tolerance) and 3x3 over 7x7 planes, 4 planes
    // per group (29·739 planes: the last group has 3). Then
    // strided ones (GroupedConv.glsl): 5x5 stride 2, 3x3 stride 2 with MobileNet's uneven padding.
    checkAgainstReference({groupedConv({1, 1}, {1, 1, 1, 1}, 3, {1, 1}, {PointwiseKind::clip, -0.5f, 0.5f}), {{2, 3, 40, 37}, {3, 1, 3, 3}, {3}}}, stream++);
    checkAgainstReference({groupedConv({1, 1}, {2, 2, 2, 2}, 4, {1, 1}, {PointwiseKind::silu}), {{2, 4, 23, 17}, {4, 1, 5, 5}, {4}}}, stream++);
    checkAgainstReference({groupedConv({1, 1}, {1, 1, 1, 1}, 67, {1, 1}, {PointwiseKind::hardSwish}), {{3, 67, 7, 7}, {67, 1, 3, 3}, {67}}}, stream++);
    checkAgainstReference({groupedConv({1, 1}, {2, 2, 2, 2}, 2, {2, 2}), {{1, 2, 11, 13}, {2, 1, 3, 3}, {2}}}, stream++);
    checkAgainstReference({groupedConv({1, 1}, {0, 1, 0, 1}, 3), {{2, 3, 1, 9}, {3, 1, 1, 3}, {3}}}, stream++);
    checkAgainstReference({groupedConv({1, 1}, {1, 1, 1, 1}, 5, {1, 1}, {PointwiseKind::clip, 0, 6}), {{2, 5, 12, 16}, {5, 1, 3, 3}, {5}}}, stream++);
    checkAgainstReference({groupedConv({1, 1}, {2, 2, 2, 2}, 3), {{1, 3, 9, 40}, {3, 1, 5, 5}, {3}}}, stream++);
    checkAgainstReference({groupedConv({1, 1}, {1, 1, 1, 1}, 16, {1, 1}, {PointwiseKind::clip, 0, 6}), {{1, 16, 256, 256}, {16, 1, 3, 3}, {16}}}, stream++);
    checkAgainstReference({groupedConv({1, 1}, {4, 4, 4, 4}, 4, {2, 2}, {PointwiseKind::hardSwish}), {{1, 4, 300, 877}, {4, 1, 5, 5}, {4}}, -1, 1, 1e-5, 1e-4}, stream++);
    checkAgainstReference({groupedConv({1, 1}, {1, 1, 1, 1}, 739, {1, 1}, {PointwiseKind::clip, 0, 6}), {{29, 739, 7, 7}, {739, 1, 3, 3}, {739}}}, stream++);
    checkAgainstReference({groupedConv({2, 2}, {2, 2, 2, 2}, 4, {1, 1}, {PointwiseKind::silu}), {{2, 4, 23, 17}, {4, 1, 5, 5}, {4}}}, stream++);
    checkAgainstReference({groupedConv({2, 2}, {0, 0, 1, 1}, 5), {{1, 5, 12, 12}, {5, 1, 3, 3}, {5}}}, stream++);
  }

  TEST_CASE("a convolution fused with its 2x2 max pooling, split along its sum at a batch of one, matches float64") {
    std::uint32_t stream = 490;
    // One image of 6x6 and of 7x5 (odd edges dropped): one tile each, so the GEMM splits and its sum pools.
    for (const Shape& x : {Shape{1, 96, 6, 6}, Shape{1, 64, 7, 5}}) {
      REQUIRE(ConvOp::forwardSplit({x[0], x[1], x[2], x[3], 24, 3, 3, 1}).splits > 1);
      checkAgainstReference({conv2dMaxPoolOp(Activation::relu, 1), {x, {24, x[1], 3, 3}, {24}}, -1, 1, 1e-5, 1e-4}, stream++);
    }
  }

  TEST_CASE("Winograd's F(2x2, 3x3) and F(4x4, 3x3) convolutions, with every fused epilogue and pooling, match float64") {
    std::uint32_t stream = 520;
    // F(2x2)'s transforms add and subtract up to 16 inputs and 9 weights scaled by 1/2 before the products, and 16
    // products after: a rounding error a few times the direct sum's, bounded here by 2e-5 + 1e-4 x |y|. F(4x4)'s
    // scale by up to 5 (inputs), 1/24 (weights) and 8 (products), so its bound is 4 times larger.
    struct Tile {
      ConvAlgorithm algorithm;
      const char* label;
      double atol, rtol;
    };
    for (const Tile& tile : {Tile{ConvAlgorithm::winogradF2, "conv winograd F2 products", 2e-5, 1e-4},
                             Tile{ConvAlgorithm::winogradF4, "conv winograd F4 products", 8e-5, 4e-4}}) {
      CAPTURE(tile.label);
      const ForcedConvAlgorithm winograd(tile.algorithm);
      const double atol = tile.atol, rtol = tile.rtol;
      const auto products = [&](const std::string& label) { return label.rfind(tile.label, 0) == 0; };
      // Odd planes (tiles past the edges), valid and same padding, channels that are not multiples of 4 (no vec4
      // runs), more tiles than one GEMM tile, a batch of one; pooled planes whose windows straddle tiles of 4x4.
      const std::vector<Case> cases{
          {conv2dOp(Activation::relu, 1), {{2, 5, 9, 7}, {6, 5, 3, 3}, {6}}, -1, 1, atol, rtol},
          {conv2dOp(Activation::none, 0), {{3, 8, 11, 10}, {12, 8, 3, 3}, {12}}, -1, 1, atol, rtol},
          {conv2dOp(Activation::tanh, 1), {{1, 67, 5, 5}, {33, 67, 3, 3}, {33}}, -1, 1, atol, rtol},
          {conv2dOp(Activation::none, 1, 1, {PointwiseKind::clip, 0, 6}), {{2, 16, 17, 13}, {20, 16, 3, 3}, {20}}, -1, 1, atol, rtol},
          {conv2dOp(Activation::sigmoid, 2), {{1, 3, 4, 6}, {4, 3, 3, 3}, {4}}, -1, 1, atol, rtol},
          {conv2dResidualOp(1, 1, {PointwiseKind::relu}), {{2, 12, 7, 9}, {12, 12, 3, 3}, {12}, {2, 12, 7, 9}}, -1, 1, atol, rtol},
          {conv2dMaxPoolOp(Activation::relu, 1), {{2, 7, 9, 11}, {10, 7, 3, 3}, {10}}, -1, 1, atol, rtol},
          {conv2dMaxPoolOp(Activation::none, 0), {{1, 4, 8, 8}, {8, 4, 3, 3}, {8}}, -1, 1, atol, rtol},
          {conv2dMaxPoolOp(Activation::relu, 1), {{1, 5, 14, 10}, {6, 5, 3, 3}, {6}}, -1, 1, atol, rtol},
      };
      for (const Case& c : cases) {
        for (const CompiledGraph::Memory memory : {CompiledGraph::Memory::kept, CompiledGraph::Memory::reused}) {
          const std::vector<std::string> labels = checkAgainstReference(c, stream++, {1, 2}, memory);
          CHECK(std::any_of(labels.begin(), labels.end(), products));
        }
      }
      // In chunks of 2 images (the last one shorter), its scratch placed in the arena among the other tensors.
      const ForcedConvAlgorithm chunked(tile.algorithm, 2);
      for (const Case& c : {cases[1], cases[5], cases[6]}) {
        const std::vector<std::string> labels = checkAgainstReference(c, stream++, {1, 2}, CompiledGraph::Memory::reused);
        CHECK(std::count_if(labels.begin(), labels.end(), products) == (c.inputs[0][0] + 1) / 2);
      }
    }
    {
      // The rule's tile is the whole layer's: 3 images of 30x30 with 128 output channels take F(4x4) (3 x 64 tiles x
      // 128 >= 20 000), and each chunk of one image keeps it though one image alone would take F(2x2).
      const ForcedConvAlgorithm chunked(ConvAlgorithm::winograd, 1);
      const Case layer{conv2dOp(Activation::relu, 1), {{3, 8, 30, 30}, {128, 8, 3, 3}, {128}}, -1, 1, 8e-5, 4e-4};
      REQUIRE(WinogradConvOp::outputTile({3, 8, 30, 30, 128, 3, 3, 1, 1}) == 4);
      REQUIRE(WinogradConvOp::outputTile({1, 8, 30, 30, 128, 3, 3, 1, 1}) == 2);
      const std::vector<std::string> labels = checkAgainstReference(layer, 560, {1, 2}, CompiledGraph::Memory::reused);
      CHECK(std::count_if(labels.begin(), labels.end(), [](const std::string& label) { return label.rfind("conv winograd F4 products", 0) == 0; }) == 3);
      // A strided or 5x5 convolution keeps the implicit GEMM.
      CHECK_FALSE(WinogradConvOp::chosen({1, 8, 9, 9, 8, 3, 3, 1, 2}));
      CHECK_FALSE(WinogradConvOp::chosen({1, 8, 9, 9, 8, 5, 5, 2, 1}));
    }
  }

  TEST_CASE("the rule takes Winograd for 3x3 layers with long sums and enough tiles, F(4x4) for the larger, in chunks of images") {
    const ConvShape resnetLayer2{64, 128, 28, 28, 128, 3, 3, 1}, resnetLayer1{64, 64, 56, 56, 64, 3, 3, 1}, batchOfOne{1, 512, 7, 7, 512, 3, 3, 1};
    CHECK(WinogradConvOp::chosen(resnetLayer2));
    CHECK(WinogradConvOp::outputTile(resnetLayer2) == 4);
    CHECK_FALSE(WinogradConvOp::chosen(resnetLayer1));
    CHECK_FALSE(WinogradConvOp::chosen(batchOfOne));
    const ConvShape vggLayer2{64, 64, 112, 112, 128, 3, 3, 1}, smallBatch{1, 128, 28, 28, 128, 3, 3, 1};
    const ConvShape squeezenetFire9{64, 64, 13, 13, 256, 3, 3, 1};
    CHECK(WinogradConvOp::chosen(vggLayer2));
    CHECK_FALSE(WinogradConvOp::chosen(squeezenetFire9));
    CHECK(WinogradConvOp::chosen(smallBatch));
    CHECK(WinogradConvOp::outputTile(smallBatch) == 2);
    // Scratch over 96 MiB goes in even chunks: this layer's 123 MB in 2 of 32 images, densenet121's first 3x3 layers
    // at batch 64 (290 MB) in 3 of 22.
    CHECK(WinogradConvOp::imagesPerChunk(resnetLayer2) == 32);
    const ConvShape denseLayer{64, 128, 56, 56, 32, 3, 3, 1};
    CHECK(WinogradConvOp::chosen(denseLayer));
    CHECK(WinogradConvOp::imagesPerChunk(denseLayer) == 22);
    CHECK(WinogradConvOp::scratchBytes(denseLayer) <= std::size_t{96} << 20);
    {
      const ForcedConvAlgorithm small(ConvAlgorithm::winogradF2);
      CHECK(WinogradConvOp::chosen(resnetLayer1));
      CHECK(WinogradConvOp::outputTile(resnetLayer2) == 2);
      CHECK(WinogradConvOp::imagesPerChunk(resnetLayer2) == 22);
    }
    const ForcedConvAlgorithm gemm(ConvAlgorithm::implicitGemm);
    CHECK_FALSE(WinogradConvOp::chosen(resnetLayer2));
  }

  TEST_CASE("a concat of tensors that share the activation arena is one dispatch and matches float64") {
    Context& context = test::glContext();
    auto random = test::generator(470);
    for (const std::uint32_t axis : {0u, 1u, 2u}) {
      CAPTURE(axis);
      // Three computed tensors (so in the arena) of sizes differing along the axis, one of them read twice.
      Graph graph;
      Shape first{2, 3, 4, 5}, second = first;
      second[axis] = 2;
      const Tensor x = graph.input("x", first), z = graph.input("z", second);
      const Tensor a = graph.apply(pointwiseOp({PointwiseKind::relu}), {x});
      const Tensor b = graph.apply(pointwiseOp({PointwiseKind::tanh}), {z});
      const Tensor c = graph.apply(pointwiseOp({PointwiseKind::sigmoid}), {x});
      const Tensor y = graph.apply(concatOp(axis), {a, b, c, b});
      CompiledGraph compiled(context, graph, CompiledGraph::Memory::reused, {y});
      Plan plan = compiled.forwardPlan([](Plan&) {});
      const std::vector<std::string> labels = plan.labels();
      CHECK(std::count(labels.begin(), labels.end(), "concat of 4") == 1);
      const std::vector<float> xs = test::uniformFloats(random, elementCount(first)), zs = test::uniformFloats(random, elementCount(second));
      compiled.upload(x, xs.data(), xs.size() * sizeof(float));
      compiled.upload(z, zs.data(), zs.size() * sizeof(float));
      std::vector<float> result(elementCount(graph.tensor(y).shape), NAN);
      compiled.upload(y, result.data(), result.size() * sizeof(float));  // poisoned
      plan.run();
      const BufferView out = compiled.view(y);
      plan.read(*out.buffer, result.data(), result.size() * sizeof(float), out.offset);
      const std::vector<std::vector<double>> reference = referenceValues(graph, {{x.id, test::widen(xs)}, {z.id, test::widen(zs)}});
      test::checkClose(result, reference[static_cast<std::size_t>(y.id)], 1e-6, 1e-6);
    }
  }

  TEST_CASE("strided convolutions as implicit GEMMs, split along their sum at a batch of one, match float64") {
    std::uint32_t stream = 480;
    checkAgainstReference({conv2dOp(Activation::relu, 3, 2), {{2, 3, 17, 15}, {5, 3, 7, 7}, {5}}, -1, 1, 1e-5, 1e-4}, stream++);  // a stem
    checkAgainstReference({conv2dOp(Activation::none, 1, 2), {{3, 6, 9, 10}, {7, 6, 3, 3}, {7}}}, stream++);
    checkAgainstReference({conv2dOp(Activation::none, 0, 2), {{3, 5, 9, 9}, {7, 5, 1, 1}, {7}}}, stream++);  // a downsampling shortcut
    checkAgainstReference({conv2dOp(Activation::tanh, 0, 3), {{1, 4, 10, 8}, {3, 4, 2, 2}, {3}}}, stream++);  // edges left over
    // One image, 3x3 outputs and a sum of 96·9: one tile, so the GEMM is split.
    REQUIRE(ConvOp::forwardSplit({1, 96, 5, 5, 24, 3, 3, 1, 2}).splits > 1);
    checkAgainstReference({conv2dOp(Activation::relu, 1, 2), {{1, 96, 5, 5}, {24, 96, 3, 3}, {24}}, -1, 1, 1e-5, 1e-4}, stream++);
  }

  TEST_CASE("1x1 convolutions of 1x1 planes at a batch of 1 to 4 run as dense layers of few rows and match float64") {
    std::uint32_t stream = 495;
    // A squeeze-excite block's two layers: a reduction with ReLU, an expansion with the hard sigmoid after it; at
    // batches of 1, 3 (odd: no vec4 reads of 37 inputs) and 4, one dispatch each; at 5 the implicit GEMM again.
    const auto labelsOf = [&stream](std::uint32_t batch, std::uint32_t channels, std::uint32_t outChannels, std::shared_ptr<const Op> op) {
      CAPTURE(batch);
      return checkAgainstReference({std::move(op), {{batch, channels, 1, 1}, {outChannels, channels, 1, 1}, {outChannels}}, -1, 1, 1e-6, 1e-5},
                                   stream++, {1, 2}, CompiledGraph::Memory::reused);
    };
    for (const std::uint32_t batch : {1u, 3u, 4u}) {
      const std::vector<std::string> reduce = labelsOf(batch, 96, 24, conv2dOp(Activation::relu, 0));
      CHECK(reduce == std::vector<std::string>{"dense relu few rows"});
      const std::vector<std::string> expand = labelsOf(batch, 37, 96, conv2dOp(Activation::none, 0, 1, {PointwiseKind::hardSigmoid, 0.2f, 0.5f}));
      CHECK(expand == std::vector<std::string>{"dense hard sigmoid few rows"});
    }
    const std::vector<std::string> batchOf5 = labelsOf(5, 96, 24, conv2dOp(Activation::relu, 0));
    CHECK(std::none_of(batchOf5.begin(), batchOf5.end(), [](const std::string& label) { return label.find("few rows") != std::string::npos; }));
  }

  TEST_CASE("per-channel affine maps and squeeze-excite scales, with a function after them, match float64") {
    std::uint32_t stream = 530;
    // Planes of 21 (one element per invocation) and of 16 (vec4s); rank 3; a scale per image and channel.
    checkAgainstReference({channelAffineOp(true, {PointwiseKind::clip, -0.5f, 0.5f}), {{2, 5, 3, 7}, {5}, {5}}}, stream++);
    checkAgainstReference({channelAffineOp(true, {PointwiseKind::relu}), {{3, 3, 4, 4}, {3}, {3}}}, stream++);
    checkAgainstReference({channelAffineOp(true), {{2, 3, 5}, {3}, {3}}}, stream++);
    checkAgainstReference({channelAffineOp(false), {{3, 4, 2, 6}, {3, 4, 1, 1}}}, stream++);
    checkAgainstReference({channelAffineOp(false, {PointwiseKind::hardSwish}), {{2, 6, 5, 5}, {6, 1, 1}}}, stream++);
    CHECK_THROWS_WITH(channelAffineOp(true)->outputShape({{2, 3, 4, 4}, {4}, {4}}),
                      "channel affine takes x [N, C, ...] and scale and shift of C values; got [2, 3, 4, 4], [4], [4]");
  }

  TEST_CASE("implicit-GEMM convolutions with an imported function fused after them, split or not, match float64") {
    std::uint32_t stream = 485;
    // Clip (both bounds within the sums' range), HardSwish and SiLU stored by the GEMM itself, then by the sum of a
    // split GEMM (one image, 3x3 outputs and a sum of 96·9: one tile). Tolerance: fp32 sums of up to 864 products.
    REQUIRE(ConvOp::forwardSplit({1, 96, 3, 3, 24, 3, 3, 1, 1}).splits > 1);
    for (const Pointwise after : {Pointwise{PointwiseKind::clip, -0.5f, 0.5f}, Pointwise{PointwiseKind::hardSwish}, Pointwise{PointwiseKind::silu}}) {
      CAPTURE(after.name());
      checkAgainstReference({conv2dOp(Activation::none, 1, 1, after), {{3, 6, 9, 7}, {5, 6, 3, 3}, {5}}, -1, 1, 1e-5, 1e-4}, stream++);
      checkAgainstReference({conv2dOp(Activation::none, 0, 2, after), {{2, 5, 9, 9}, {7, 5, 1, 1}, {7}}, -1, 1, 1e-5, 1e-4}, stream++);
      checkAgainstReference({conv2dOp(Activation::none, 1, 1, after), {{1, 96, 3, 3}, {24, 96, 3, 3}, {24}}, -1, 1, 1e-5, 1e-4}, stream++);
    }
  }

  TEST_CASE("dense layers with an imported function (GELU) or a residual fused, few rows, one GEMM or split, match float64") {
    std::uint32_t stream = 610;
    // Few rows (DenseFewRows.glsl), the GEMM storing it, and the sum of a split GEMM (6 rows, a sum of 4096) applying it.
    // Tolerance: fp32 sums of up to 4096 products.
    IgnoredGemmTuning ruleOnly;  // the rule's split, whatever this machine's glnet_bench --tune kept
    REQUIRE(chooseGemm(6, 8, 4096).split.splits > 1);
    for (const Pointwise after : {Pointwise{PointwiseKind::gelu}, Pointwise{PointwiseKind::geluTanh}}) {
      CAPTURE(after.name());
      checkAgainstReference({denseOp(Activation::none, after), {{3, 20}, {9, 20}, {9}}, -1, 1, 1e-5, 1e-4}, stream++);
      checkAgainstReference({denseOp(Activation::none, after), {{37, 21}, {11, 21}, {11}}, -1, 1, 1e-5, 1e-4}, stream++);
      checkAgainstReference({denseOp(Activation::relu, after), {{37, 21}, {11, 21}, {11}}, -1, 1, 1e-5, 1e-4}, stream++);
      checkAgainstReference({denseOp(Activation::none, after), {{6, 4096}, {8, 4096}, {8}}, -1, 1, 1e-5, 1e-4}, stream++);
    }
    // A residual added before the function (or none), on each path.
    for (const Pointwise after : {Pointwise{}, Pointwise{PointwiseKind::gelu}}) {
      CAPTURE(after.name());
      checkAgainstReference({denseResidualOp(after), {{3, 20}, {9, 20}, {9}, {3, 9}}, -1, 1, 1e-5, 1e-4}, stream++);
      checkAgainstReference({denseResidualOp(after), {{37, 21}, {11, 21}, {11}, {37, 11}}, -1, 1, 1e-5, 1e-4}, stream++);
      checkAgainstReference({denseResidualOp(after), {{6, 4096}, {8, 4096}, {8}, {6, 8}}, -1, 1, 1e-5, 1e-4}, stream++);
    }
    CHECK_THROWS_WITH(denseResidualOp()->outputShape({{3, 20}, {9, 20}, {9}, {9, 3}}),
                      "dense + residual none takes X [rows, in], W [out, in], b [out], R [rows, out]; got [3, 20] [9, 20] [9] [9, 3]");
  }

  TEST_CASE("convolutions adding a residual before their function, split or not, strided or not, match float64") {
    std::uint32_t stream = 490;
    REQUIRE(ConvOp::forwardSplit({1, 96, 3, 3, 24, 3, 3, 1, 1}).splits > 1);
    for (const Pointwise after : {Pointwise{}, Pointwise{PointwiseKind::relu}}) {
      CAPTURE(after.name());
      checkAgainstReference({conv2dResidualOp(1, 1, after), {{3, 6, 9, 7}, {5, 6, 3, 3}, {5}, {3, 5, 9, 7}}, -1, 1, 1e-5, 1e-4}, stream++);
      checkAgainstReference({conv2dResidualOp(0, 2, after), {{2, 5, 9, 9}, {7, 5, 1, 1}, {7}, {2, 7, 5, 5}}, -1, 1, 1e-5, 1e-4}, stream++);
      checkAgainstReference({conv2dResidualOp(1, 1, after), {{1, 96, 3, 3}, {24, 96, 3, 3}, {24}, {1, 24, 3, 3}}, -1, 1, 1e-5, 1e-4}, stream++);
    }
    CHECK_THROWS_WITH(conv2dResidualOp(1)->outputShape({{1, 2, 5, 5}, {3, 2, 3, 3}, {3}, {1, 3, 5, 4}}),
                      "conv2d + residual none takes X [N, C, H, W], W [OC, C, KH, KW], b [OC] and a residual shaped as its output with "
                      "the kernel inside the padded input; got [1, 2, 5, 5] [3, 2, 3, 3] [3] [1, 3, 5, 4]");
  }

  TEST_CASE("1x1 convolutions scaling their input per image and channel (a squeeze-excite gate), split or not, match float64") {
    std::uint32_t stream = 560;
    REQUIRE(ConvOp::forwardSplit({1, 576, 7, 7, 24, 1, 1, 0, 1}).splits > 1);
    REQUIRE_FALSE(ConvOp::forwardSplit({3, 6, 5, 7, 5, 1, 1, 0, 1}).splits > 1);
    checkAgainstReference({conv2dOp(Activation::none, 0, 1, {}, true), {{3, 6, 5, 7}, {5, 6, 1, 1}, {5}, {3, 6, 1, 1}}, -1, 1, 1e-5, 1e-4}, stream++);
    checkAgainstReference({conv2dOp(Activation::relu, 0, 2, {}, true), {{2, 5, 9, 9}, {7, 5, 1, 1}, {7}, {2, 5}}, -1, 1, 1e-5, 1e-4}, stream++);
    checkAgainstReference({conv2dOp(Activation::none, 0, 1, Pointwise{PointwiseKind::hardSwish}, true),
                           {{1, 576, 7, 7}, {24, 576, 1, 1}, {24}, {1, 576, 1, 1}}, -1, 1, 1e-5, 1e-4}, stream++);
    // 1x1 planes at batch 1, which the few-rows dense kernel would take without the scale.
    checkAgainstReference({conv2dOp(Activation::none, 0, 1, {}, true), {{1, 8, 1, 1}, {4, 8, 1, 1}, {4}, {1, 8, 1, 1}}, -1, 1, 1e-5, 1e-4}, stream++);
    for (const Pointwise after : {Pointwise{}, Pointwise{PointwiseKind::relu}}) {
      CAPTURE(after.name());
      checkAgainstReference({conv2dResidualOp(0, 1, after, true), {{3, 6, 5, 7}, {5, 6, 1, 1}, {5}, {3, 5, 5, 7}, {3, 6, 1, 1}}, -1, 1, 1e-5, 1e-4},
                            stream++);
      checkAgainstReference({conv2dResidualOp(0, 1, after, true), {{1, 576, 7, 7}, {24, 576, 1, 1}, {24}, {1, 24, 7, 7}, {1, 576, 1, 1}}, -1, 1,
                             1e-5, 1e-4}, stream++);
    }
    CHECK_THROWS_WITH(conv2dOp(Activation::none, 1, 1, {}, true)->outputShape({{1, 2, 5, 5}, {3, 2, 3, 3}, {3}, {1, 2, 1, 1}}),
                      "conv2d of scaled input none takes X [N, C, H, W], W [OC, C, KH, KW], b [OC] and X's scale [N, C, 1, 1] (a 1x1 "
                      "kernel without padding) with the kernel inside the padded input; got [1, 2, 5, 5] [3, 2, 3, 3] [3] [1, 2, 1, 1]");
    CHECK_THROWS(conv2dOp(Activation::none, 0, 1, {}, true)->outputShape({{2, 2, 5, 5}, {3, 2, 1, 1}, {3}, {1, 2, 1, 1}}));
  }

  TEST_CASE("1x1 stride-1 convolutions read X as a plain matrix in vec4 runs where H·W allows, under every GEMM configuration") {
    Context& context = test::glContext();
    std::uint32_t stream = 570;
    const auto pointwise = [](const std::vector<std::string>& labels) {
      return std::count_if(labels.begin(), labels.end(), [](const std::string& label) { return label.find("pointwise") != std::string::npos; });
    };
    // Planes of 4x6 and 4x5 with channels that are no multiple of 4; an input scale and a residual; one image of 4x4
    // with a long sum, which the rule splits. Planes of 5x7 keep the gathered rows.
    REQUIRE(ConvOp::forwardSplit({1, 576, 4, 4, 24, 1, 1, 0, 1}).splits > 1);
    const std::vector<Case> cases{
        {conv2dOp(Activation::relu, 0), {{2, 6, 4, 6}, {5, 6, 1, 1}, {5}}, -1, 1, 1e-6, 1e-5},
        {conv2dOp(Activation::none, 0, 1, {PointwiseKind::clip, 0, 6}), {{3, 5, 4, 5}, {7, 5, 1, 1}, {7}}, -1, 1, 1e-6, 1e-5},
        {conv2dOp(Activation::none, 0, 1, {}, true), {{2, 8, 4, 4}, {9, 8, 1, 1}, {9}, {2, 8, 1, 1}}, -1, 1, 1e-6, 1e-5},
        {conv2dResidualOp(0, 1, {PointwiseKind::relu}), {{2, 7, 2, 6}, {6, 7, 1, 1}, {6}, {2, 6, 2, 6}}, -1, 1, 1e-6, 1e-5},
        {conv2dOp(Activation::none, 0), {{1, 576, 4, 4}, {24, 576, 1, 1}, {24}}, -1, 1, 1e-5, 1e-4},
    };
    for (const Case& c : cases) CHECK(pointwise(checkAgainstReference(c, stream++, {1, 2}, CompiledGraph::Memory::reused)) == 1);
    CHECK(pointwise(checkAgainstReference({conv2dOp(Activation::relu, 0), {{3, 5, 5, 7}, {7, 5, 1, 1}, {7}}}, stream++)) == 0);
    for (const GemmConfig* config : gemmConfigsFitting(context.limits())) {
      CAPTURE(config->name);
      const ForcedGemmConfig forced(*config);
      for (const Case& c : {cases[0], cases[2], cases[3]}) CHECK(pointwise(checkAgainstReference(c, stream++, {1, 2})) == 1);
    }
  }

  TEST_CASE("the rule gives 1x1 layers on plain rows larger blocks at batch 64 and the gathered rule's split at batch 1") {
    Context& context = test::glContext();
    // Larger blocks where the device fits them (not at OpenGL ES's minimum limits).
    const std::vector<const GemmConfig*> fitting = gemmConfigsFitting(context.limits());
    const bool largerBlocksFit = std::any_of(fitting.begin(), fitting.end(), [](const GemmConfig* c) { return !c->gathersRuns(); });
    // resnet50's 512 -> 128 layer at 28x28 and its 2048 -> 512 layer at 7x7 (gathered: 49 pixels a plane).
    IgnoredGemmTuning ruleOnly;  // whatever this machine's glnet_bench --tune kept
    const ConvShape wide{64, 512, 28, 28, 128, 1, 1, 0}, single{1, 512, 28, 28, 128, 1, 1, 0}, sevens{64, 2048, 7, 7, 512, 1, 1, 0};
    CHECK(ConvOp::readsPlainRows(wide));
    CHECK_FALSE(ConvOp::readsPlainRows(sevens));
    CHECK_FALSE(ConvOp::readsPlainRows({64, 64, 56, 56, 64, 3, 3, 1}));
    CHECK(ConvOp::forwardGemm(wide, false, true).config->gathersRuns() == !largerBlocksFit);
    const GemmChoice batchOfOne = ConvOp::forwardGemm(single, false, true);
    const GemmChoice gathered = chooseGemm(28 * 28, 128, 512, true, GemmOperand::gathered);
    CHECK(std::string(batchOfOne.config->name) == gathered.config->name);
    CHECK(batchOfOne.split.splits == gathered.split.splits);
    CHECK(ConvOp::forwardGemm(wide, true, true).config->gathersRuns());  // pooled: gathered rows
  }

  TEST_CASE("convolutions store planes of a multiple of 4 pixels in vec4 runs, split or not, and match float64") {
    std::uint32_t stream = 600;
    // 3x3 at stride 1 (4x6 outputs) with a residual and a function; strided to 4x4; one image of 4x4 with a long sum
    // (split: the partial sums in runs too, then summed); beside them a plane of 5x7, stored a float at a time.
    REQUIRE(ConvOp::forwardSplit({1, 96, 4, 4, 24, 3, 3, 1}).splits > 1);
    checkAgainstReference({conv2dResidualOp(1, 1, {PointwiseKind::relu}), {{2, 5, 4, 6}, {6, 5, 3, 3}, {6}, {2, 6, 4, 6}}, -1, 1, 1e-5, 1e-4}, stream++);
    checkAgainstReference({conv2dOp(Activation::none, 1, 2, {PointwiseKind::hardSwish}), {{3, 4, 8, 7}, {5, 4, 3, 3}, {5}}, -1, 1, 1e-5, 1e-4}, stream++);
    checkAgainstReference({conv2dResidualOp(1, 1), {{1, 96, 4, 4}, {24, 96, 3, 3}, {24}, {1, 24, 4, 4}}, -1, 1, 1e-5, 1e-4}, stream++);
    checkAgainstReference({conv2dOp(Activation::tanh, 1), {{2, 3, 5, 7}, {4, 3, 3, 3}, {4}}, -1, 1, 1e-5, 1e-4}, stream++);
  }

  TEST_CASE("layer normalization of a residual sum (x + r summed as it is read) matches float64, along one axis or several") {
    std::uint32_t stream = 620;
    checkAgainstReference({layerNormalizationResidualOp(2, 3, 1e-5f), {{2, 3, 37}, {37}, {37}, {2, 3, 37}}, -2, 2, 1e-5, 1e-4}, stream++);
    checkAgainstReference({layerNormalizationResidualOp(2, 3, 1e-5f), {{1, 2, 1001}, {1001}, {1001}, {1, 2, 1001}}, -2, 2, 1e-5, 1e-4}, stream++);
    checkAgainstReference({layerNormalizationResidualOp(1, 3, 1e-6f), {{3, 4, 5}, {4, 5}, {20}, {3, 4, 5}}, -2, 2, 1e-5, 1e-4}, stream++);
    CHECK_THROWS_WITH(layerNormalizationResidualOp(2, 3, 1e-5f)->outputShape({{2, 3, 4}, {4}, {4}, {1, 3, 4}}),
                      "layer normalization + residual over axes does not fit [2, 3, 4], [4], [4], [1, 3, 4]");
  }

  TEST_CASE("functions along an axis (softmax, log-softmax, layer normalization, reductions) match float64") {
    std::uint32_t stream = 500;
    checkAgainstReference({axisOp(AxisKind::softmax, 1, 2), {{3, 1001}}, -6, 6}, stream++);
    checkAgainstReference({axisOp(AxisKind::softmax, 1, 2), {{2, 5, 3, 3}}, -6, 6}, stream++);  // along channels: strided
    checkAgainstReference({axisOp(AxisKind::logSoftmax, 2, 3), {{2, 3, 17}}, -6, 6}, stream++);
    checkAgainstReference({axisOp(AxisKind::layerNormalization, 2, 3, true, 1e-5f), {{1, 1, 5}, {1, 5}, {5}}, -2, 2, 1e-5, 1e-4}, stream++);
    checkAgainstReference({axisOp(AxisKind::layerNormalization, 2, 3, true, 1e-5f), {{2, 3, 300}, {300}, {300}}, -2, 2, 1e-5, 1e-4}, stream++);
    checkAgainstReference({axisOp(AxisKind::rmsNormalization, 1, 2, true, 1e-6f), {{3, 77}, {77}}, -2, 2, 1e-6, 1e-5}, stream++);
    // Global average pooling: 7x7 (32 invocations per line) and 50x50 (the largest group, ~10 elements each).
    checkAgainstReference({axisOp(AxisKind::mean, 2, 4, true), {{2, 3, 7, 7}}}, stream++);
    checkAgainstReference({axisOp(AxisKind::mean, 2, 4, true), {{1, 2, 50, 50}}}, stream++);
    checkAgainstReference({axisOp(AxisKind::mean, 1, 2, false), {{2, 600, 3}}}, stream++);
    checkAgainstReference({axisOp(AxisKind::sum, 0, 1, false), {{5, 4}}}, stream++);
    checkAgainstReference({axisOp(AxisKind::max, 2, 4, true), {{1, 3, 5, 5}}}, stream++);
    checkAgainstReference({axisOp(AxisKind::min, 1, 3, false), {{2, 3, 4}}}, stream++);
    checkAgainstReference({axisOp(AxisKind::inverseDeviation, 1, 3, true, 1e-3f), {{2, 3, 4}}, -2, 2, 1e-6, 1e-5}, stream++);
    for (const AxisKind kind : {AxisKind::l1, AxisKind::l2, AxisKind::sumSquare, AxisKind::logSumExp}) {
      checkAgainstReference({axisOp(kind, 1, 2, false), {{3, 301, 2}}, -2, 2, 1e-6, 1e-5}, stream++);
    }
    checkAgainstReference({axisOp(AxisKind::logSum, 1, 2, true), {{3, 37}}, 0.1f, 2.0f, 1e-6, 1e-5}, stream++);
    checkAgainstReference({axisOp(AxisKind::product, 0, 1, false), {{19, 4}}, 0.6f, 1.4f, 1e-7, 1e-5}, stream++);
    checkAgainstReference({axisOp(AxisKind::hardmax, 1, 2), {{2, 5, 3}}}, stream++);
    checkAgainstReference({axisOp(AxisKind::hardmax, 1, 2), {{3, 37}}, 1.0f, 1.0f}, stream++);  // all equal: the first wins
  }

  // The kernel picks its invocations per line from the axis length (32 up to the device's group size): every op of
  // the shader at lengths on both sides of each pick, and past the largest group, so that a fault of one group size
  // or one op shows (softmax over 1001 values was wrong on NVIDIA while 300 was right).
  TEST_CASE("functions along an axis match float64 at every group size the kernel picks") {
    std::uint32_t stream = 520;
    for (const std::uint32_t axis : {1u, 31u, 129u, 257u, 511u, 512u, 1001u, 1024u, 1025u, 2050u, 4000u}) {
      for (std::size_t kind = 0; kind < kindCount<AxisKind>(); ++kind) {
        const AxisKind k = static_cast<AxisKind>(kind);
        CAPTURE(axis);
        const bool positive = k == AxisKind::logSum || k == AxisKind::product;
        // A product of many values leaves float's range: near 1 it stays representable.
        const float low = k == AxisKind::product ? 0.999f : positive ? 0.1f : -4.0f, high = k == AxisKind::product ? 1.001f : positive ? 2.0f : 4.0f;
        std::vector<Shape> inputs{{2, axis}};
        if (k == AxisKind::layerNormalization) inputs = {{2, axis}, {axis}, {axis}};
        if (k == AxisKind::rmsNormalization) inputs = {{2, axis}, {axis}};
        checkAgainstReference({axisOp(k, 1, 2, true, 1e-5f), inputs, low, high, 1e-6, 2e-5}, stream++);
      }
      // Along a strided axis (inner 3): each invocation's reads are 3 floats apart.
      checkAgainstReference({axisOp(AxisKind::softmax, 1, 2), {{1, axis, 3}}, -4.0f, 4.0f}, stream++);
    }
  }

  TEST_CASE("products of two computed tensors, batches broadcast, match float64") {
    std::uint32_t stream = 540;
    checkAgainstReference({batchedMatMulOp(), {{3, 5, 7}, {3, 7, 4}}}, stream++);
    checkAgainstReference({batchedMatMulOp(), {{2, 1, 5, 7}, {3, 7, 2}}}, stream++);
    checkAgainstReference({batchedMatMulOp(), {{4, 33}, {33, 3}}}, stream++);
  }
}
