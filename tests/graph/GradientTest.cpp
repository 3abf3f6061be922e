// Every op's reference backward against central finite differences in double, and every op's GPU forward
// and backward against its reference.
#include "graph/InferenceOps.h"
#include "graph/Ops.h"
#include "ops/Conv.h"
#include "ops/Dense.h"
#include "ops/Gemm.h"
#include "support/Compare.h"
#include "support/GlContext.h"
#include "support/Random.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

using namespace glnet;

namespace {

struct OpCase {
  std::string name;
  std::shared_ptr<const Op> op;
  std::vector<Shape> shapes;
  std::size_t classes = 0;  // > 0: input 1 holds labels below this
  bool reluKinks = false;   // inputs must keep pre-activations away from 0
  std::shared_ptr<const Op> linear = nullptr;  // the op without its activation, for the kink check
  // Remakes input i's random values where they must be of a kind (token ids, a mask).
  std::function<void(std::size_t i, std::vector<double>& values, std::mt19937& random)> adjust = nullptr;
};

// Input 0 as whole ids below `rows`, each of them likely repeated.
OpCase withIds(OpCase c, std::uint32_t rows) {
  c.adjust = [rows](std::size_t i, std::vector<double>& values, std::mt19937& random) {
    if (i == 0) {
      for (double& v : values) v = static_cast<double>(random() % rows);
    }
  };
  return c;
}

// Input 1 as a key padding mask [..., S]: −inf for about a third of the positions, never the first of a sequence
// (a query that sees no key is NaN, checked apart).
OpCase withKeyMask(OpCase c) {
  const std::uint32_t sequence = c.shapes[1].back();
  c.adjust = [sequence](std::size_t i, std::vector<double>& values, std::mt19937& random) {
    if (i != 1) return;
    for (std::size_t k = 0; k < values.size(); ++k) values[k] = k % sequence != 0 && random() % 3 == 0 ? -INFINITY : 0.0;
  };
  return c;
}

// Input 1 as a key padding mask hiding the first two keys of every sequence (left padding), and a third of the others
// but the last.
OpCase withLeadingKeysMasked(OpCase c) {
  const std::uint32_t sequence = c.shapes[1].back();
  c.adjust = [sequence](std::size_t i, std::vector<double>& values, std::mt19937& random) {
    if (i != 1) return;
    for (std::size_t k = 0; k < values.size(); ++k) {
      const std::size_t position = k % sequence;
      values[k] = position < 2 || (position + 1 < sequence && random() % 3 == 0) ? -INFINITY : 0.0;
    }
  };
  return c;
}

std::vector<OpCase> cases(std::uint32_t rows = 5) {
  const Shape x{rows, 7}, w{3, 7}, b{3};
  std::vector<OpCase> result = {
      {"dense none", denseOp(Activation::none), {x, w, b}},
      {"dense relu", denseOp(Activation::relu), {x, w, b}, 0, true, denseOp(Activation::none)},
      {"dense tanh", denseOp(Activation::tanh), {x, w, b}},
      {"dense sigmoid", denseOp(Activation::sigmoid), {x, w, b}},
      {"matmul", matMulOp(), {x, w}},
      {"dense tanh, long batch (split-K dW)", denseOp(Activation::tanh), {{rows * 45, 5}, {3, 5}, {3}}},
      {"bias add", biasAddOp(), {{rows, 3}, b}},
      {"relu", activationOp(Activation::relu), {x}, 0, true},
      {"tanh", activationOp(Activation::tanh), {x}},
      {"sigmoid", activationOp(Activation::sigmoid), {x}},
      {"add", addOp(), {x, x}},
      {"add + relu", addOp(Activation::relu), {x, x}, 0, true, addOp()},
      {"add + sigmoid", addOp(Activation::sigmoid), {x, x}},
      {"multiply", multiplyOp(), {x, x}},
      {"softmax cross-entropy", softmaxCrossEntropyOp(), {{rows, 4}, {rows}}, 4},
      {"softmax cross-entropy, label smoothing 0.1", softmaxCrossEntropyOp(0.1f), {{rows, 5}, {rows}}, 5},
      {"mean squared error", meanSquaredErrorOp(), {x, x}},
      {"conv2d relu same", conv2dOp(Activation::relu, 1), {{rows, 3, 7, 6}, {4, 3, 3, 3}, {4}}, 0, true,
       conv2dOp(Activation::none, 1)},
      {"conv2d none valid", conv2dOp(Activation::none, 0), {{rows, 2, 6, 5}, {3, 2, 3, 2}, {3}}},
      {"conv2d tanh same 5x5", conv2dOp(Activation::tanh, 2), {{rows, 1, 5, 7}, {2, 1, 5, 5}, {2}}},
      {"conv2d sigmoid same, 16 output channels (split-K dX)", conv2dOp(Activation::sigmoid, 1),
       {{rows, 3, 6, 5}, {16, 3, 3, 3}, {16}}},
      {"conv2d tanh same, 8 input channels (dX reads its weights as vec4s)", conv2dOp(Activation::tanh, 1),
       {{rows, 8, 5, 4}, {4, 8, 3, 3}, {4}}},
      {"max pool", maxPoolOp(), {{rows, 3, 7, 6}}},
      {"conv2d relu 1x3 kernel, left and right padding only", conv2dOp(Activation::relu, 0, 1, {}, false, 1), {{rows, 3, 6, 5}, {4, 3, 1, 3}, {4}}},
      {"conv2d tanh 3x1 kernel, top and bottom padding only", conv2dOp(Activation::tanh, 1, 1, {}, false, 0), {{rows, 2, 5, 7}, {3, 2, 3, 1}, {3}}},
      {"conv2d none 1x5 kernel stride 2, padding 0 and 2", conv2dOp(Activation::none, 0, 2, {}, false, 2),
       {{rows, 2, 7, 9}, {3, 2, 1, 5}, {3}}},
      {"conv2d relu stride 2 same", conv2dOp(Activation::relu, 1, 2), {{rows, 3, 7, 6}, {4, 3, 3, 3}, {4}}, 0, true,
       conv2dOp(Activation::none, 1, 2)},
      {"conv2d none stride 2, 1x1 (a downsampling shortcut)", conv2dOp(Activation::none, 0, 2), {{rows, 5, 7, 8}, {6, 5, 1, 1}, {6}}},
      {"conv2d tanh stride 3 valid, edges no window reaches", conv2dOp(Activation::tanh, 0, 3), {{rows, 2, 8, 9}, {3, 2, 3, 2}, {3}}},
      {"batch norm (training) [N, C, H, W]", batchNormOp(true), {{rows, 3, 5, 4}, {3}, {3}, {3}, {3}}},
      {"batch norm (training), 67 rows in 3 chunks of a channel's values", batchNormOp(true), {{rows, 2, 9, 8}, {2}, {2}, {2}, {2}}},
      {"batch norm (training) [N, C]", batchNormOp(true, 0.1f, 1e-3f), {{rows + 1, 6}, {6}, {6}, {6}, {6}}},
      {"batch norm (training) + relu [N, C, H, W]", batchNormOp(true, 0.1f, 1e-5f, Activation::relu), {{rows, 3, 5, 4}, {3}, {3}, {3}, {3}}, 0, true,
       batchNormOp(true)},
      {"batch norm (training) + tanh, 67 rows in 3 chunks of a channel's values", batchNormOp(true, 0.1f, 1e-5f, Activation::tanh),
       {{rows, 2, 9, 8}, {2}, {2}, {2}, {2}}},
      {"batch norm (training) + add + relu (a residual block's end)", batchNormOp(true, 0.1f, 1e-5f, Activation::relu, true),
       {{rows, 3, 5, 4}, {3}, {3}, {3}, {3}, {rows, 3, 5, 4}}, 0, true, batchNormOp(true, 0.1f, 1e-5f, Activation::none, true)},
      {"batch norm (training) + add, 67 rows in 3 chunks of a channel's values", batchNormOp(true, 0.1f, 1e-5f, Activation::none, true),
       {{rows, 2, 9, 8}, {2}, {2}, {2}, {2}, {rows, 2, 9, 8}}},
      {"layer norm [N, C]", layerNormOp(), {{rows, 9}, {9}, {9}}},
      {"layer norm [N, S, C], 301 values a row (several invocations each)", layerNormOp(1e-3f), {{rows, 2, 301}, {301}, {301}}},
      {"layer norm, 40·rows rows (dgamma and dbeta summed in 2 chunks at 67)", layerNormOp(), {{rows * 40, 5}, {5}, {5}}},
      {"tokens of [N, C, H, W]", tokensOp(), {{rows, 3, 4, 5}}},
      {"self-attention, 2 heads of 3 features over 5 positions", selfAttentionOp(2), {{rows, 5, 18}}},
      {"self-attention, causal, 1 head of 8 features over 7 positions, two leading axes", selfAttentionOp(1, true), {{rows, 2, 7, 24}}},
      withKeyMask({"self-attention with a padding mask, 2 heads of 3 features over 6 positions", selfAttentionOp(2), {{rows, 6, 18}, {rows, 6}}}),
      withLeadingKeysMasked({"self-attention, its first two keys masked", selfAttentionOp(3), {{rows, 6, 18}, {rows, 6}}}),
      withKeyMask({"self-attention, causal, with a padding mask, two leading axes", selfAttentionOp(1, true), {{rows, 2, 5, 12}, {rows, 2, 5}}}),
      withIds({"embedding of ids [N, 3] in a table of 11 rows of 5", embeddingOp(), {{rows, 3}, {11, 5}}}, 11),
      withIds({"embedding of 131 features (5 an invocation, 4 lanes), ids [N, 2, 3]", embeddingOp(), {{rows, 2, 3}, {4, 131}}}, 4),
      {"first position of [N, S, E]", firstPositionOp(), {{rows, 4, 6}}},
      {"first position of [N, 2, S, E]", firstPositionOp(), {{rows, 2, 3, 5}}},
      {"max pool 3x3 stride 2 padding 1", poolOp({false, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}}), {{rows, 2, 7, 6}}},
      {"max pool 2x2 dilation 2", poolOp({false, {2, 2}, {1, 1}, {2, 2}, {0, 0, 0, 0}}), {{rows, 2, 6, 5}}},
      {"average pool 3x3 stride 2 padding 1, padding counted", poolOp({true, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, false, true}),
       {{rows, 2, 7, 6}}},
      {"average pool 2x3 stride 1, ceil mode", poolOp({true, {2, 3}, {1, 2}, {1, 1}, {0, 0, 0, 0}, true}), {{rows, 2, 5, 6}}},
      {"global average pool", poolOp({true, {5, 7}, {1, 1}, {1, 1}, {0, 0, 0, 0}}), {{rows, 3, 5, 7}}},
      {"silu", pointwiseOp({PointwiseKind::silu}), {{rows, 9}}},
      {"gelu", pointwiseOp({PointwiseKind::gelu}), {{rows, 9}}},
      {"gelu (tanh)", pointwiseOp({PointwiseKind::geluTanh}), {{rows, 9}}},
      {"hard swish", pointwiseOp({PointwiseKind::hardSwish}), {{rows, 9}}},
      {"depthwise conv 3x3", groupedConvOp({{1, 1}, {1, 1}, {1, 1, 1, 1}, 4}), {{rows, 4, 6, 5}, {4, 1, 3, 3}, {4}}},
      {"depthwise conv 3x3 stride 2, 2 outputs per channel", groupedConvOp({{2, 2}, {1, 1}, {1, 1, 1, 1}, 3}),
       {{rows, 3, 7, 6}, {6, 1, 3, 3}, {6}}},
      {"concat of three along the channels", concatOp(1), {{rows, 2, 3, 4}, {rows, 3, 3, 4}, {rows, 1, 3, 4}}},
      {"concat of two rows of features", concatOp(1), {{rows, 5}, {rows, 2}}},
      {"dropout 0.3 (the mask of step 1)", dropoutOp(0.3f, 12345u), {{rows, 37}}},
      {"grouped conv, 2 groups, dilation 2, uneven padding", groupedConvOp({{1, 2}, {2, 1}, {2, 0, 1, 1}, 2}),
       {{rows, 4, 7, 8}, {6, 2, 3, 2}, {6}}},
  };
  return result;
}

std::vector<std::vector<double>> randomInputs(const OpCase& c, std::mt19937& random) {
  std::vector<std::vector<double>> inputs;
  for (std::size_t i = 0; i < c.shapes.size(); ++i) {
    std::vector<double> values(elementCount(c.shapes[i]));
    for (double& v : values) {
      v = c.classes && i == 1 ? static_cast<double>(random() % c.classes) : std::uniform_real_distribution<double>(-1, 1)(random);
    }
    if (c.adjust) c.adjust(i, values, random);
    inputs.push_back(values);
  }
  return inputs;
}

// A case's inputs on the GPU: the labels of a loss (input 1) as uint32, the others as float32.
struct GpuInputs {
  std::vector<Buffer> buffers;
  std::vector<GpuTensor> tensors;  // views of `buffers`
};
GpuInputs upload(const OpCase& c, const std::vector<std::vector<double>>& inputs) {
  GpuInputs result;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (c.classes && i == 1) {
      result.buffers.push_back(Buffer::of(std::vector<std::uint32_t>(inputs[i].begin(), inputs[i].end())));
    } else {
      result.buffers.push_back(Buffer::of(std::vector<float>(inputs[i].begin(), inputs[i].end())));
    }
  }
  for (std::size_t i = 0; i < inputs.size(); ++i) result.tensors.push_back({result.buffers[i], c.shapes[i]});
  return result;
}

std::vector<HostTensor64> host(const OpCase& c, const std::vector<std::vector<double>>& values) {
  std::vector<HostTensor64> result;
  for (std::size_t i = 0; i < values.size(); ++i) result.push_back({&values[i], c.shapes[i]});
  return result;
}

// The smallest |pre-activation| of a ReLU case; finite differences across a kink are meaningless.
double kinkDistance(const OpCase& c, const std::vector<std::vector<double>>& inputs) {
  const auto pre = c.linear ? c.linear->referenceForward(host(c, inputs)) : inputs[0];
  double distance = INFINITY;
  for (const double value : pre) distance = std::min(distance, std::abs(value));
  return distance;
}

}  // namespace

TEST_CASE("every op's reference backward matches central finite differences") {
  auto random = test::generator(40);
  for (const OpCase& c : cases()) {
    CAPTURE(c.name);
    std::vector<std::vector<double>> inputs = randomInputs(c, random);
    for (int attempt = 0; c.reluKinks && kinkDistance(c, inputs) < 1e-3 && attempt < 1000; ++attempt) {
      inputs = randomInputs(c, random);
    }
    const std::vector<double> output = c.op->referenceForward(host(c, inputs));
    std::vector<double> weights(output.size());
    for (double& w : weights) w = std::uniform_real_distribution<double>(-1, 1)(random);
    const auto objective = [&](const std::vector<std::vector<double>>& at) {
      const std::vector<double> y = c.op->referenceForward(host(c, at));
      double sum = 0;
      for (std::size_t k = 0; k < y.size(); ++k) sum += weights[k] * y[k];
      return sum;
    };
    const auto gradients = c.op->referenceBackward(host(c, inputs), output, weights);
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      if (!c.op->passesGradient(i)) continue;
      REQUIRE(gradients[i].size() == inputs[i].size());
      for (std::size_t k = 0; k < inputs[i].size(); ++k) {
        const double h = 1e-6;
        auto plus = inputs, minus = inputs;
        plus[i][k] += h;
        minus[i][k] -= h;
        const double numeric = (objective(plus) - objective(minus)) / (2 * h);
        CAPTURE(i);
        CAPTURE(k);
        // Central differences in double: truncation O(h²) and rounding O(1e-16/h) both far below 1e-7.
        CHECK(std::abs(numeric - gradients[i][k]) <= 1e-7 + 1e-6 * std::abs(numeric));
      }
    }
  }
}

TEST_CASE("layer normalization and self-attention refuse shapes they cannot run, in a line naming the shapes") {
  CHECK_THROWS_WITH(layerNormOp()->outputShape({{0, 4}, {4}, {4}}), doctest::Contains("takes x [..., C] of at least one value and gamma and beta of [C]; got [0, 4] [4] [4]"));
  CHECK_THROWS_WITH(layerNormOp()->outputShape({{3, 4}, {5}, {5}}), doctest::Contains("got [3, 4] [5] [5]"));
  CHECK_THROWS_WITH(selfAttentionOp(2)->outputShape({{3, 5, 9}}), doctest::Contains("self-attention of 2 heads takes [..., S, 3·heads·D] (queries, keys and values), not [3, 5, 9]"));
  CHECK_THROWS_WITH(selfAttentionOp(1)->outputShape({{5, 12}}), doctest::Contains("not [5, 12]"));
  CHECK_THROWS_WITH(tokensOp()->outputShape({{2, 3, 4}}), doctest::Contains("tokens takes [N, C, H, W], not [2, 3, 4]"));
  CHECK_THROWS_WITH(selfAttentionOp(2)->outputShape({{3, 5, 18}, {3, 4}}), doctest::Contains("key mask must be [3, 5] for queries, keys and values [3, 5, 18], not [3, 4]"));
  CHECK_THROWS_WITH(embeddingOp()->outputShape({{3, 5}, {7}}), doctest::Contains("embedding takes ids [N, ...] and a table [rows, features], not [3, 5], [7]"));
  CHECK_THROWS_WITH(firstPositionOp()->outputShape({{3, 5}}), doctest::Contains("first position takes [N, ..., positions, features], not [3, 5]"));
}

TEST_CASE("dropout drops its rate of the elements, and other ones at the next step") {
  const std::uint32_t count = 200000, salt = 99;
  std::size_t kept = 0, changed = 0;
  for (std::uint32_t i = 0; i < count; ++i) {
    const bool now = dropoutKeeps(i, salt, 5, 0.3f);
    kept += now;
    changed += now != dropoutKeeps(i, salt, 6, 0.3f);
  }
  // Binomial standard deviations at 200 000 draws are about 0.001; 0.005 is five of them.
  CHECK(std::abs(static_cast<double>(kept) / count - 0.7) < 0.005);
  CHECK(std::abs(static_cast<double>(changed) / count - 2 * 0.3 * 0.7) < 0.005);
  CHECK(dropoutKeeps(17, salt, 5, 0.0f));
}

namespace {

// Which gradients a check asks for: input i's is skipped when absent[i], and added where the others are written
// (and the reverse) when flipped[i]. Empty: all of them, written then added together.
struct TargetPattern {
  std::vector<bool> absent, flipped;
  bool isAbsent(std::size_t i) const { return i < absent.size() && absent[i]; }
  bool isFlipped(std::size_t i) const { return i < flipped.size() && flipped[i]; }
};

// Absolute and relative tolerance of a check against float64. The default suits sums of up to 67 terms.
struct Tolerance {
  double absolute = 1e-5, relative = 1e-4;
};

// The op's GPU forward and backward, gradients written and then accumulated, against its reference. Returns the
// labels of the last plan's dispatches.
std::vector<std::string> checkAgainstReference(Context& context, ProgramCache& programs, const OpCase& c, std::uint32_t rows,
                                               std::mt19937& random, const TargetPattern& pattern = {},
                                               const Tolerance& tolerance = {}) {
  CAPTURE(c.name);
  CAPTURE(rows);
  const auto inputs = randomInputs(c, random);
  const GpuInputs uploaded = upload(c, inputs);
  const std::vector<GpuTensor>& gpuInputs = uploaded.tensors;
  const Shape outShape = c.op->outputShape(c.shapes);
  Buffer out(elementCount(outShape) * sizeof(float));
  out.fill(test::nanPoison);
  const std::size_t workspaceBytes = c.op->workspaceBytes(c.shapes);
  Buffer workspace(std::max<std::size_t>(workspaceBytes, 4));
  GpuTensor output{out, outShape};
  if (workspaceBytes) output.workspace = BufferView(workspace);
  // Reference values from the fp32-rounded inputs the GPU sees.
  std::vector<std::vector<double>> rounded = inputs;
  const auto referenceOut = c.op->referenceForward(host(c, rounded));
  const auto dOutValues = test::uniformFloats(random, referenceOut.size());
  const std::vector<double> dOut(dOutValues.begin(), dOutValues.end());
  const auto referenceGradients = c.op->referenceBackward(host(c, rounded), referenceOut, dOut);

  std::vector<std::string> labels;
  for (const bool accumulateFirst : {false, true}) {
    CAPTURE(accumulateFirst);
    const auto accumulates = [&](std::size_t i) { return accumulateFirst != pattern.isFlipped(i); };
    Buffer dOutBuffer = Buffer::of(dOutValues);
    std::vector<Buffer> gradientBuffers;
    std::vector<std::optional<GradientTarget>> targets;
    const float prior = 0.25f;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      gradientBuffers.emplace_back(inputs[i].size() * sizeof(float));
      if (accumulates(i)) {
        gradientBuffers.back().upload(std::vector<float>(inputs[i].size(), prior));
      } else {
        gradientBuffers.back().fill(test::nanPoison);
      }
    }
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const bool wanted = c.op->passesGradient(i) && !pattern.isAbsent(i);
      targets.push_back(wanted ? std::optional<GradientTarget>(GradientTarget{gradientBuffers[i], accumulates(i)}) : std::nullopt);
    }
    // An op reads only what it wrote to its workspace first (split sums' slices, rearranged weights).
    workspace.fill(test::nanPoison);
    Plan plan(context.limits());
    // The step a training plan gives as parameter 0; dropout's reference draws the mask of step 1.
    plan.addParameter(1);
    c.op->forward(programs, plan, gpuInputs, output);
    c.op->backward(programs, plan, gpuInputs, output, {dOutBuffer, outShape}, targets);
    plan.run();
    labels = plan.labels();
    test::checkClose(out.read<float>(), referenceOut, tolerance.absolute, tolerance.relative);
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      if (!targets[i]) continue;
      CAPTURE(i);
      std::vector<double> expected = referenceGradients[i];
      if (accumulates(i)) {
        for (double& value : expected) value += prior;
      }
      test::checkClose(gradientBuffers[i].read<float>(), expected, tolerance.absolute, tolerance.relative);
    }
  }
  return labels;
}

bool anyLabelContains(const std::vector<std::string>& labels, const std::string& text) {
  for (const std::string& label : labels) {
    if (label.find(text) != std::string::npos) return true;
  }
  return false;
}

// Every case of cases(67) whose name starts with `family`, checked under each GEMM configuration this device runs. The
// dense and convolution families are two test cases, so that the GPU suite's parts (tests/CMakeLists.txt) compile
// their programs side by side.
void checkUnderEveryGemmConfig(const std::string& family, std::uint32_t seed) {
  Context& context = test::glContext();
  auto random = test::generator(seed);
  ProgramCache programs;
  for (const GemmConfig* fitting : gemmConfigsFitting(context.limits())) {
    const GemmConfig& config = *fitting;
    ForcedGemmConfig forced(config);
    CAPTURE(config.name);
    for (const OpCase& c : cases(67)) {
      if (c.name.rfind(family, 0) == 0) checkAgainstReference(context, programs, c, 67, random);
    }
  }
}

// Cases whose sizes only the GPU check takes: central differences over thousands of values drown in rounding, and
// cases() checks the same references by them at small sizes.
std::vector<OpCase> largeCases(std::uint32_t rows) {
  return {{"batch norm (training) + sigmoid, 2100·rows values a channel (69 chunks at 67 rows: more than one a combining invocation)",
           batchNormOp(true, 0.1f, 1e-5f, Activation::sigmoid), {{rows, 1, 2100}, {1}, {1}, {1}, {1}}}};
}

}  // namespace

TEST_SUITE("gl") {
  TEST_CASE("every op's GPU forward and backward match its reference, written and accumulated") {
    Context& context = test::glContext();
    auto random = test::generator(41);
    ProgramCache programs;
    for (const std::uint32_t rows : {1u, 67u}) {
      for (const OpCase& c : cases(rows)) checkAgainstReference(context, programs, c, rows, random);
      for (const OpCase& c : largeCases(rows)) checkAgainstReference(context, programs, c, rows, random);
    }
  }

  TEST_CASE("self-attention's backward pass across its blocks of rows and their tiles") {
    Context& context = test::glContext();
    auto random = test::generator(48);
    ProgramCache programs;
    // 70 positions: D = 32 and 64 in blocks of 32 rows (the last of 6) and tiles of 16, D = 128 in blocks of 16 and
    // tiles of 8 (as a device of 32 KiB of shared memory picks them); D = 5 and 70 leave the last invocations of a
    // block's accumulators without a feature.
    checkAgainstReference(context, programs, {"1 head of 64 features", selfAttentionOp(1), {{2, 70, 192}}}, 2, random);
    checkAgainstReference(context, programs, {"causal, 3 heads of 5 features", selfAttentionOp(3, true), {{2, 70, 45}}}, 2, random);
    checkAgainstReference(context, programs, withKeyMask({"1 head of 70 features, a padding mask", selfAttentionOp(1), {{1, 70, 210}, {1, 70}}}), 1, random);
    checkAgainstReference(context, programs, withKeyMask({"2 heads of 32 features, a padding mask", selfAttentionOp(2), {{2, 70, 192}, {2, 70}}}), 2, random);
    checkAgainstReference(context, programs, {"causal, 1 head of 128 features", selfAttentionOp(1, true), {{2, 70, 384}}}, 2, random);
    checkAgainstReference(context, programs, withKeyMask({"causal, 1 head of 128 features, a padding mask", selfAttentionOp(1, true), {{1, 70, 384}, {1, 70}}}), 1, random);
  }

  TEST_CASE("self-attention over a sequence of padding alone gives NaN there, forward and backward, and the other sequence its numbers") {
    Context& context = test::glContext();
    ProgramCache programs;
    auto random = test::generator(49);
    const auto op = selfAttentionOp(2);
    const Shape qkvShape{2, 5, 18}, maskShape{2, 5};
    const std::vector<float> qkv = test::uniformFloats(random, elementCount(qkvShape));
    std::vector<float> mask(10, 0.0f);
    std::fill(mask.begin(), mask.begin() + 5, -INFINITY);  // the first sequence: every key hidden
    const std::vector<double> qkv64(qkv.begin(), qkv.end()), mask64(mask.begin(), mask.end());
    const std::vector<HostTensor64> host{{&qkv64, qkvShape}, {&mask64, maskShape}};
    const std::vector<double> expected = op->referenceForward(host);
    const std::vector<float> dY = test::uniformFloats(random, expected.size());
    const std::vector<double> expectedGradient = op->referenceBackward(host, expected, {dY.begin(), dY.end()})[0];
    Buffer qkvBuffer = Buffer::of(qkv), maskBuffer = Buffer::of(mask), dYBuffer = Buffer::of(dY);
    const Shape outShape = op->outputShape({qkvShape, maskShape});
    Buffer out(expected.size() * sizeof(float)), dQkv(qkv.size() * sizeof(float)), workspace(op->workspaceBytes({qkvShape, maskShape}) + 4);
    out.fill(test::nanPoison);
    dQkv.fill(test::nanPoison);
    GpuTensor output{out, outShape};
    output.workspace = BufferView(workspace);
    const std::vector<GpuTensor> inputs{{qkvBuffer, qkvShape}, {maskBuffer, maskShape}};
    Plan plan(context.limits());
    op->forward(programs, plan, inputs, output);
    op->backward(programs, plan, inputs, output, {dYBuffer, outShape}, {GradientTarget{dQkv, false}, std::nullopt});
    plan.run();
    // The reference is NaN exactly over the first sequence.
    for (std::size_t i = 0; i < expected.size(); ++i) CHECK(std::isnan(expected[i]) == (i < expected.size() / 2));
    test::checkNanPropagated(out.read<float>(), expected, 1e-5, 1e-4);
    test::checkNanPropagated(dQkv.read<float>(), expectedGradient, 1e-5, 1e-4);
  }

  TEST_CASE("causal self-attention: a NaN at one position reaches only the gradients that depend on it") {
    Context& context = test::glContext();
    ProgramCache programs;
    auto random = test::generator(50);
    const auto op = selfAttentionOp(1, true);
    const Shape shape{1, 40, 24};  // one head of 8 features
    // A NaN in the key of position 30 (later queries' rows only: dQ of the earlier ones stays finite), then in the
    // query of position 5 (the keys it sees: dK and dV of the later ones stay finite).
    for (const std::size_t poisoned : {std::size_t{30 * 24 + 8}, std::size_t{5 * 24}}) {
      CAPTURE(poisoned);
      std::vector<float> qkv = test::uniformFloats(random, elementCount(shape));
      qkv[poisoned] = NAN;
      const std::vector<double> qkv64(qkv.begin(), qkv.end());
      const std::vector<HostTensor64> host{{&qkv64, shape}};
      const std::vector<double> expected = op->referenceForward(host);
      const std::vector<float> dY = test::uniformFloats(random, expected.size());
      const std::vector<double> expectedGradient = op->referenceBackward(host, expected, {dY.begin(), dY.end()})[0];
      Buffer qkvBuffer = Buffer::of(qkv), dYBuffer = Buffer::of(dY);
      const Shape outShape = op->outputShape({shape});
      Buffer out(expected.size() * sizeof(float)), dQkv(qkv.size() * sizeof(float)), workspace(op->workspaceBytes({shape}) + 4);
      out.fill(test::nanPoison);
      dQkv.fill(test::nanPoison);
      GpuTensor output{out, outShape};
      output.workspace = BufferView(workspace);
      Plan plan(context.limits());
      op->forward(programs, plan, {{qkvBuffer, shape}}, output);
      op->backward(programs, plan, {{qkvBuffer, shape}}, output, {dYBuffer, outShape}, {GradientTarget{dQkv, false}});
      plan.run();
      test::checkNanPropagated(out.read<float>(), expected, 1e-5, 1e-4);
      test::checkNanPropagated(dQkv.read<float>(), expectedGradient, 1e-5, 1e-4);
    }
  }

  TEST_CASE("max pooling gives a window's NaN and passes its gradient to that NaN, on the GPU and in the reference") {
    // PyTorch's max pooling propagates a NaN and picks it as the window's argmax; the backward pass must pick the
    // element the forward pass did. Windows: {5, NaN, 1, 2}, {3, 4, 9, NaN} (a larger number before the NaN), then numbers.
    Context& context = test::glContext();
    ProgramCache programs;
    const Shape shape{1, 1, 4, 4};
    const std::vector<float> x{5, NAN, 3, 4, 1, 2, 9, NAN, 0, 1, 2, 3, 4, 5, 6, 7};
    const std::vector<double> wide(x.begin(), x.end()), dy{1, 2, 3, 4};
    const std::vector<double> expectedGradient{0, 1, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 3, 0, 4};
    PoolSettings s;
    s.kernel = {2, 2};
    s.strides = {2, 2};
    for (const auto& op : {maxPoolOp(), poolOp(s)}) {
      CAPTURE(op->name());
      const std::vector<double> y = op->referenceForward({{&wide, shape}});
      REQUIRE(y.size() == 4u);
      CHECK((std::isnan(y[0]) && std::isnan(y[1]) && y[2] == 5 && y[3] == 7));
      CHECK(op->referenceBackward({{&wide, shape}}, y, dy)[0] == expectedGradient);
      const Buffer input = Buffer::of(x), dyBuffer = Buffer::of(std::vector<float>(dy.begin(), dy.end()));
      Buffer out(4 * sizeof(float)), dx(x.size() * sizeof(float)), workspace(std::max<std::size_t>(op->workspaceBytes({shape}), 4));
      GpuTensor output{out, {1, 1, 2, 2}};
      if (op->workspaceBytes({shape})) output.workspace = BufferView(workspace);
      Plan plan(context.limits());
      plan.addParameter(1);
      op->forward(programs, plan, {{input, shape}}, output);
      op->backward(programs, plan, {{input, shape}}, output, {dyBuffer, {1, 1, 2, 2}}, {GradientTarget{dx, false}});
      plan.run();
      const std::vector<float> gpu = out.read<float>();
      CHECK((std::isnan(gpu[0]) && std::isnan(gpu[1]) && gpu[2] == 5 && gpu[3] == 7));
      const std::vector<float> gradient = dx.read<float>();
      CHECK(std::vector<double>(gradient.begin(), gradient.end()) == expectedGradient);
    }
  }

  TEST_CASE("a convolution's dW and db: one split GEMM when both are wanted alike, apart otherwise") {
    Context& context = test::glContext();
    auto random = test::generator(43);
    ProgramCache programs;
    // 3 output channels over 67·9·8 pixels: the rule splits the weight gradient's long sum.
    const OpCase c{"conv2d tanh same, long batch of pixels", conv2dOp(Activation::tanh, 1), {{67, 2, 9, 8}, {3, 2, 3, 3}, {3}}};
    CHECK(anyLabelContains(checkAgainstReference(context, programs, c, 67, random), "conv dW+db"));
    for (const TargetPattern& pattern : {TargetPattern{{false, false, false}, {false, false, true}},
                                         TargetPattern{{false, false, true}, {}}, TargetPattern{{true, true, false}, {}},
                                         TargetPattern{{true, false, false}, {false, true, false}}}) {
      CAPTURE(pattern.absent);
      CAPTURE(pattern.flipped);
      const std::vector<std::string> labels = checkAgainstReference(context, programs, c, 67, random, pattern);
      CHECK(!anyLabelContains(labels, "dW+db"));
      CHECK(anyLabelContains(labels, "conv db") == !pattern.isAbsent(2));
    }
  }

  TEST_CASE("a convolution's weight gradient from the pixels (ConvWeightGradient.glsl) matches float64 across its tiles and bands") {
    Context& context = test::glContext();
    auto random = test::generator(46);
    ProgramCache programs;
    // Output channels and input channels that end inside a tile (10 of 16, 40 of 64; 9 and 17 of 16), bands that end
    // inside the planes (20 columns: bands of 3 rows over 7), rows cut into segments (70 columns: 2 of 35), kernels of
    // 3x3, 3x2, 1x3 and 2x2, convolutions of stride 2 and 3 (X's windows STRIDE columns apart), and dW with and without db.
    const std::vector<OpCase> direct{
        {"conv2d relu same, 9 channels to 10", conv2dOp(Activation::relu, 1), {{3, 9, 11, 13}, {10, 9, 3, 3}, {10}}, 0, true,
         conv2dOp(Activation::none, 1)},
        {"conv2d tanh valid 3x3, bands ending inside the planes", conv2dOp(Activation::tanh, 0), {{2, 8, 9, 22}, {5, 8, 3, 3}, {5}}},
        {"conv2d none valid 3x2, 17 channels to 40", conv2dOp(Activation::none, 0), {{3, 17, 6, 5}, {40, 17, 3, 2}, {40}}},
        {"conv2d tanh same, rows of 70 in two segments", conv2dOp(Activation::tanh, 1), {{2, 8, 4, 70}, {6, 8, 3, 3}, {6}}},
        {"conv2d sigmoid 1x3, left and right padding only", conv2dOp(Activation::sigmoid, 0, 1, {}, false, 1), {{2, 12, 5, 9}, {7, 12, 1, 3}, {7}}},
        {"conv2d none valid 2x2", conv2dOp(Activation::none, 0), {{4, 8, 5, 6}, {3, 8, 2, 2}, {3}}},
        {"conv2d relu stride 2 same", conv2dOp(Activation::relu, 1, 2), {{3, 8, 9, 8}, {12, 8, 3, 3}, {12}}, 0, true,
         conv2dOp(Activation::none, 1, 2)},
        {"conv2d tanh 3x2 stride 3, odd planes", conv2dOp(Activation::tanh, 1, 3), {{2, 9, 13, 11}, {10, 9, 3, 2}, {10}}}};
    // Sums of up to 3·11·13 = 429 fp32 products of values in [-1, 1].
    const Tolerance sums{1e-4, 1e-4};
    for (const OpCase& c : direct) {
      std::vector<std::string> labels = checkAgainstReference(context, programs, c, c.shapes[0][0], random, {}, sums);
      CHECK(anyLabelContains(labels, "conv dW+db from pixels"));
      // dW alone (db absent), and dW added where db is written.
      labels = checkAgainstReference(context, programs, c, c.shapes[0][0], random, {{false, false, true}, {}}, sums);
      CHECK(anyLabelContains(labels, "conv dW from pixels"));
      labels = checkAgainstReference(context, programs, c, c.shapes[0][0], random, {{}, {false, true, false}}, sums);
      CHECK(anyLabelContains(labels, "conv dW from pixels"));
      CHECK(anyLabelContains(labels, "conv db"));
    }
  }

  TEST_CASE("a NaN in X reaches only the weights whose window reads it, in the weight gradient from the pixels") {
    Context& context = test::glContext();
    auto random = test::generator(47);
    ProgramCache programs;
    // Valid 3x3 over 9x22: 7 output rows in bands of 3, so the last band's rows 8 and 9 lie past the planes. X's last
    // row is read by kernel row 2 alone; a pixel past the planes would read it with kernel rows 0 and 1 too.
    // Image 1, channel 3, row 8, column 5.
    const OpCase c{"conv2d none valid, a NaN in X's last row", conv2dOp(Activation::none, 0), {{2, 8, 9, 22}, {5, 8, 3, 3}, {5}}, 0, false,
                   nullptr, [](std::size_t i, std::vector<double>& values, std::mt19937&) {
                     if (i == 0) values[(std::size_t{1} * 8 + 3) * 9 * 22 + 8 * 22 + 5] = NAN;
                   }};
    const std::vector<std::vector<double>> inputs = randomInputs(c, random);
    const GpuInputs uploaded = upload(c, inputs);
    const Shape outShape = c.op->outputShape(c.shapes);
    Buffer out(elementCount(outShape) * sizeof(float)), workspace(c.op->workspaceBytes(c.shapes));
    const std::vector<double> y = c.op->referenceForward(host(c, inputs));
    const std::vector<float> dY = test::uniformFloats(random, y.size());
    const std::vector<double> expected = c.op->referenceBackward(host(c, inputs), y, {dY.begin(), dY.end()})[1];
    Buffer dYBuffer = Buffer::of(dY), dW(elementCount(c.shapes[1]) * sizeof(float));
    dW.fill(test::nanPoison);
    Plan plan(context.limits());
    plan.addParameter(1);
    const GpuTensor output{out, outShape, BufferView(workspace)};
    c.op->forward(programs, plan, uploaded.tensors, output);
    c.op->backward(programs, plan, uploaded.tensors, output, {dYBuffer, outShape}, {std::nullopt, GradientTarget{dW, false}, std::nullopt});
    plan.run();
    CHECK(anyLabelContains(plan.labels(), "conv dW from pixels"));
    const std::vector<float> gpu = dW.read<float>();
    std::size_t nans = 0;
    for (std::size_t i = 0; i < gpu.size(); ++i) {
      CAPTURE(i);
      CHECK(std::isnan(gpu[i]) == std::isnan(expected[i]));
      if (std::isnan(expected[i])) {
        ++nans;
        CHECK(i % 72 / 9 == 3);  // channel 3
        CHECK(i % 9 / 3 == 2);   // kernel row 2
      } else if (!std::isnan(gpu[i])) {
        CHECK(std::abs(gpu[i] - expected[i]) <= 1e-4 + 1e-4 * std::abs(expected[i]));
      }
    }
    CHECK(nans == 5u * 3u);  // every output channel, kernel row 2, its 3 columns
  }

  TEST_CASE("a convolution with few output pixels and a long sum splits its forward GEMM and matches float64") {
    Context& context = test::glContext();
    auto random = test::generator(45);
    ProgramCache programs;
    // One image of 5x5 pixels, 24 output channels, a sum of 64·3·3: one tile, so the rule splits the sum; the split's
    // partials are added with the bias and the activation in the NCHW output.
    const OpCase c{"conv2d relu same, one image of 5x5 and 64 channels", conv2dOp(Activation::relu, 1), {{1, 64, 5, 5}, {24, 64, 3, 3}, {24}}};
    REQUIRE(ConvOp::forwardSplit({1, 64, 5, 5, 24, 3, 3, 1}).splits > 1);
    const std::vector<std::string> labels = checkAgainstReference(context, programs, c, 1, random);
    CHECK(anyLabelContains(labels, "split-K sum, bias, activation"));
  }

  TEST_CASE("a strided convolution's input gradient, phase by phase of the stride, matches float64: uneven phases, phases no kernel offset reaches, split sums") {
    Context& context = test::glContext();
    auto random = test::generator(48);
    ProgramCache programs;
    // Planes of odd sizes (phases of unequal rows and columns), kernels smaller and larger than the stride, a 1x1
    // kernel whose odd phases no offset reaches (written: zeros; added: untouched), 8 input channels (the weights
    // read as vec4s from each phase's block), and one image with 96 output channels, whose mean phase the rule
    // splits (every phase then fills the same slices, those past its shorter sum with zeros).
    const std::vector<OpCase> strided{
        {"conv2d tanh 5x5 stride 2, padding 2, 8 channels", conv2dOp(Activation::tanh, 2, 2), {{2, 8, 11, 9}, {5, 8, 5, 5}, {5}}},
        {"conv2d none 11x11 stride 4, padding 2", conv2dOp(Activation::none, 2, 4), {{1, 3, 19, 17}, {4, 3, 11, 11}, {4}}},
        {"conv2d none 1x1 stride 3", conv2dOp(Activation::none, 0, 3), {{2, 5, 8, 7}, {6, 5, 1, 1}, {6}}},
        {"conv2d tanh 7x7 stride 2, padding 3 (a stem)", conv2dOp(Activation::tanh, 3, 2), {{2, 3, 9, 10}, {4, 3, 7, 7}, {4}}},
        {"conv2d none 3x3 stride 4, padding 1, planes of 3x5 (phases with no pixels)", conv2dOp(Activation::none, 1, 4), {{2, 4, 3, 5}, {3, 4, 3, 3}, {3}}},
        {"conv2d relu 3x3 stride 2 same, one image, 96 output channels", conv2dOp(Activation::relu, 1, 2), {{1, 8, 5, 7}, {96, 8, 3, 3}, {96}},
         0, true, conv2dOp(Activation::none, 1, 2)}};
    REQUIRE(ConvOp::inputGradientSplit({1, 8, 5, 7, 96, 3, 3, 1, 2}).splits > 1);
    const std::vector<ConvOp::InputGradientPhase> phases = ConvOp::inputGradientPhases({2, 5, 8, 7, 6, 1, 1, 0, 3});
    REQUIRE(phases.size() == 9);
    CHECK(phases[0].depth == 6);
    CHECK(phases[0].rows == 2 * 3 * 3);
    CHECK(phases[4].depth == 0);
    CHECK(phases[8].rows == 2 * 2 * 2);
    // Sums of up to 96·2·2 fp32 products of values in [-1, 1].
    const Tolerance sums{1e-4, 1e-4};
    for (const OpCase& c : strided) {
      std::vector<std::string> labels = checkAgainstReference(context, programs, c, c.shapes[0][0], random, {}, sums);
      CHECK(anyLabelContains(labels, "phase 0,0"));
      CHECK(anyLabelContains(labels, "phase 1,1 split-K") == (c.shapes[1][0] == 96));
      // dX alone, written and added.
      checkAgainstReference(context, programs, c, c.shapes[0][0], random, {{false, true, true}, {}}, sums);
    }
    // The phases write disjoint pixels of dX: one barrier, after the weights' rearrangement, none between them.
    {
      const ConvShape shape{2, 8, 11, 9, 5, 5, 5, 2, 2};
      Buffer dz(std::size_t{2} * 5 * 6 * 5 * sizeof(float)), weights(std::size_t{5} * 8 * 25 * sizeof(float)),
          dx(std::size_t{2} * 8 * 11 * 9 * sizeof(float)), workspace(ConvOp::inputGradientWorkspaceBytes(shape));
      Plan plan(context.limits());
      plan.record(ConvOp(programs, Activation::none).inputGradient(dz, weights, dx, shape, false, workspace));
      CHECK(anyLabelContains(plan.labels(), "phase 1,1"));
      CHECK(plan.barrierCount() == 2);
    }
    // Every phase split into 4 parts, the 1x1 kernel's phases of no offset among them.
    const OpCase wide{"conv2d none 1x1 stride 2, 1100 output channels", conv2dOp(Activation::none, 0, 2), {{1, 4, 5, 5}, {1100, 4, 1, 1}, {1100}}};
    // 64x32 fits OpenGL ES 3.1's minimum limits.
    const auto smallest = std::find_if(gemmConfigs().begin(), gemmConfigs().end(), [](const GemmConfig& c) { return std::string(c.name) == "64x32"; });
    REQUIRE(smallest != gemmConfigs().end());
    ForcedGemmConfig forced(*smallest, true, 4);
    REQUIRE(ConvOp::inputGradientSplit(ConvShape{1, 4, 5, 5, 1100, 1, 1, 0, 2}).splits == 4);
    CHECK(anyLabelContains(checkAgainstReference(context, programs, wide, 1, random, {}, sums), "phase 1,1 split-K"));
  }

  TEST_CASE("a large dense layer's gradients, dY made dZ in place and dX run on dZ transposed, match float64") {
    Context& context = test::glContext();
    auto random = test::generator(44);
    ProgramCache programs;
    // The smallest layer that transposes dZ (512 rows, 1024 outputs, 4096 inputs: 2^31 multiply-adds). Tanh, whose
    // derivative is smooth: ReLU's would flip where an fp32 output rounds across its kink.
    const OpCase c{"dense tanh, large", denseOp(Activation::tanh), {{512, 4096}, {1024, 4096}, {1024}}};
    REQUIRE(DenseOp::transposesOutputGradient({512, 4096, 1024}));
    // Sums of 4096 (forward), 1024 (dX) and 512 (dW, db) fp32 products of values in [-1, 1].
    const std::vector<std::string> labels = checkAgainstReference(context, programs, c, 512, random, {}, {5e-4, 1e-4});
    CHECK(anyLabelContains(labels, "dense dZ in place and transposed"));
    CHECK(anyLabelContains(labels, "on dZ transposed"));
  }

  TEST_CASE("a convolution fused with its max pooling matches the reference convolution then pooling under every GEMM configuration") {
    Context& context = test::glContext();
    auto random = test::generator(45);
    ProgramCache programs;
    // Odd output sizes (pooling drops the last row or column), both paddings, and pooled rows (N·OH/2·OW/2·4:
    // 144, 320 and 1372) crossing the tile edges of every configuration.
    const std::vector<OpCase> fused{
        {"conv2d relu same + max pool, odd edges", conv2dMaxPoolOp(Activation::relu, 1), {{3, 2, 9, 7}, {5, 2, 3, 3}, {5}}},
        {"conv2d tanh valid + max pool", conv2dMaxPoolOp(Activation::tanh, 0), {{5, 3, 10, 11}, {6, 3, 3, 4}, {6}}},
        {"conv2d none same 5x5 + max pool", conv2dMaxPoolOp(Activation::none, 2), {{7, 1, 14, 14}, {8, 1, 5, 5}, {8}}}};
    for (const GemmConfig* config : gemmConfigsFitting(context.limits())) {
      ForcedGemmConfig forced(*config);
      for (const OpCase& c : fused) {
        CAPTURE(config->name);
        CAPTURE(c.name);
        const auto inputs = randomInputs(c, random);
        const GpuInputs uploaded = upload(c, inputs);
        const Shape outShape = c.op->outputShape(c.shapes);
        Buffer out(elementCount(outShape) * sizeof(float));
        out.fill(test::nanPoison);
        Buffer workspace(c.op->workspaceBytes(c.shapes));
        GpuTensor output{out, outShape, BufferView(workspace)};
        Plan plan(context.limits());
        c.op->forward(programs, plan, uploaded.tensors, output);
        plan.run();
        CHECK(anyLabelContains(plan.labels(), "+ max pool"));
        // Sums of at most 27 fp32 products of values in [-1, 1].
        test::checkClose(out.read<float>(), c.op->referenceForward(host(c, inputs)), 1e-5, 1e-4);
      }
    }
  }

  TEST_CASE("the dense ops on the GEMM core match their reference under every GEMM configuration") { checkUnderEveryGemmConfig("dense", 42); }

  TEST_CASE("the convolutions on the GEMM core match their reference under every GEMM configuration") { checkUnderEveryGemmConfig("conv2d", 43); }
}

TEST_SUITE("gl") {
  TEST_CASE("batch normalization moves its running statistics as PyTorch does, and inference uses them") {
    Context& context = test::glContext();
    auto random = test::generator(47);
    ProgramCache programs;
    // 5 200 values per channel: three chunks, the last shorter, combined.
    const std::uint32_t n = 40, channels = 5, spatial = 130;
    const Shape x{n, channels, spatial, 1}, c{channels};
    // A large mean, so that a one-pass variance would lose digits.
    std::vector<float> xs = test::uniformFloats(random, elementCount(x));
    for (float& value : xs) value = 40.0f + 3.0f * value;
    std::vector<float> gamma = test::uniformFloats(random, channels), beta = test::uniformFloats(random, channels);
    std::vector<float> runningMean = test::uniformFloats(random, channels), runningVar = test::uniformFloats(random, channels);
    for (float& v : runningVar) v = 0.5f + std::abs(v);
    std::vector<Buffer> buffers;
    for (const std::vector<float>* values : {&xs, &gamma, &beta, &runningMean, &runningVar}) buffers.push_back(Buffer::of(*values));
    std::vector<GpuTensor> in;
    for (std::size_t i = 0; i < buffers.size(); ++i) in.push_back({buffers[i], i == 0 ? x : c});
    const float momentum = 0.25f;
    const auto training = batchNormOp(true, momentum);
    Buffer out(elementCount(x) * sizeof(float)), workspace(training->workspaceBytes({x, c, c, c, c}));
    out.fill(test::nanPoison);
    Plan plan(context.limits());
    training->forward(programs, plan, in, {out, x, BufferView(workspace)});
    plan.run();
    std::vector<double> expectedMean(channels), expectedVar(channels);
    std::vector<float> batchMean(channels), batchVar(channels);
    for (std::uint32_t ch = 0; ch < channels; ++ch) {
      double sum = 0, squares = 0;
      for (std::uint32_t k = 0; k < n * spatial; ++k) sum += xs[(k / spatial * channels + ch) * spatial + k % spatial];
      const double mean = sum / (n * spatial);
      for (std::uint32_t k = 0; k < n * spatial; ++k) {
        const double d = xs[(k / spatial * channels + ch) * spatial + k % spatial] - mean;
        squares += d * d;
      }
      batchMean[ch] = static_cast<float>(mean);
      batchVar[ch] = static_cast<float>(squares / (n * spatial));
      expectedMean[ch] = (1 - momentum) * runningMean[ch] + momentum * mean;
      expectedVar[ch] = (1 - momentum) * runningVar[ch] + momentum * squares / (n * spatial - 1);
    }
    test::checkClose(buffers[3].read<float>(), expectedMean, 1e-5, 1e-5);
    test::checkClose(buffers[4].read<float>(), expectedVar, 1e-5, 1e-4);

    // Inference normalizes with the running statistics just written.
    const auto inference = batchNormOp(false);
    std::vector<std::vector<double>> host64;
    for (const std::vector<float>* values : {&xs, &gamma, &beta}) host64.emplace_back(values->begin(), values->end());
    const std::vector<float> gpuMean = buffers[3].read<float>(), gpuVar = buffers[4].read<float>();
    host64.emplace_back(gpuMean.begin(), gpuMean.end());
    host64.emplace_back(gpuVar.begin(), gpuVar.end());
    std::vector<HostTensor64> host;
    for (std::size_t i = 0; i < host64.size(); ++i) host.push_back({&host64[i], i == 0 ? x : c});
    out.fill(test::nanPoison);
    Plan evaluation(context.limits());
    inference->forward(programs, evaluation, in, {out, x});
    evaluation.run();
    test::checkClose(out.read<float>(), inference->referenceForward(host), 1e-4, 1e-4);
    CHECK_FALSE(inference->differentiable());
    // And with the ReLU after it fused, under the batch's own statistics: values on both sides of 0 (the running ones
    // put whole channels on one side).
    const auto rectified = batchNormOp(false, 0.1f, 1e-5f, Activation::relu);
    const Buffer meanBuffer = Buffer::of(batchMean), varBuffer = Buffer::of(batchVar);
    std::vector<GpuTensor> batchStatistics = in;
    batchStatistics[3] = {meanBuffer, c};
    batchStatistics[4] = {varBuffer, c};
    host64[3].assign(batchMean.begin(), batchMean.end());
    host64[4].assign(batchVar.begin(), batchVar.end());
    out.fill(test::nanPoison);
    Plan rectifiedEvaluation(context.limits());
    rectified->forward(programs, rectifiedEvaluation, batchStatistics, {out, x});
    rectifiedEvaluation.run();
    const std::vector<float> rectifiedOutput = out.read<float>();
    test::checkClose(rectifiedOutput, rectified->referenceForward(host), 1e-4, 1e-4);
    CHECK(std::count(rectifiedOutput.begin(), rectifiedOutput.end(), 0.0f) > 0);
    CHECK(std::count_if(rectifiedOutput.begin(), rectifiedOutput.end(), [](float v) { return v > 0; }) > 0);
  }
}

TEST_SUITE("gl") {
  TEST_CASE("batch normalization with a ReLU fused: a NaN in x gives NaN over its channel's output, dx and dgamma, dbeta 0 there (the ReLU passes nothing through NaN), the other channels as the reference") {
    Context& context = test::glContext();
    auto random = test::generator(50);
    ProgramCache programs;
    const Shape x{5, 3, 4}, c{3};
    std::vector<float> xs = test::uniformFloats(random, elementCount(x));
    const std::size_t poisoned = (2 * 3 + 1) * 4 + 3;  // image 2, channel 1, position 3
    xs[poisoned] = NAN;
    const std::vector<float> gamma = test::uniformFloats(random, 3), beta = test::uniformFloats(random, 3), dy = test::uniformFloats(random, xs.size());
    const std::vector<float> runningMean(3, 0.0f), runningVar(3, 1.0f);
    std::vector<Buffer> buffers;
    for (const std::vector<float>* values : std::initializer_list<const std::vector<float>*>{&xs, &gamma, &beta, &runningMean, &runningVar, &dy}) {
      buffers.push_back(Buffer::of(*values));
    }
    const auto op = batchNormOp(true, 0.1f, 1e-5f, Activation::relu);
    Buffer out(xs.size() * sizeof(float)), workspace(op->workspaceBytes({x, c, c, c, c})), dx(xs.size() * sizeof(float)),
        dgamma(3 * sizeof(float)), dbeta(3 * sizeof(float));
    for (Buffer* b : {&out, &dx, &dgamma, &dbeta}) b->fill(test::nanPoison);
    std::vector<GpuTensor> in;
    for (std::size_t i = 0; i < 5; ++i) in.push_back({buffers[i], i == 0 ? x : c});
    const GpuTensor output{out, x, BufferView(workspace)};
    Plan plan(context.limits());
    op->forward(programs, plan, in, output);
    op->backward(programs, plan, in, output, {buffers[5], x}, {GradientTarget{dx, false}, GradientTarget{dgamma, false}, GradientTarget{dbeta, false}});
    plan.run();
    std::vector<std::vector<double>> wide;
    for (const std::vector<float>* values : std::initializer_list<const std::vector<float>*>{&xs, &gamma, &beta, &runningMean, &runningVar}) {
      wide.emplace_back(values->begin(), values->end());
    }
    std::vector<HostTensor64> host;
    for (std::size_t i = 0; i < wide.size(); ++i) host.push_back({&wide[i], i == 0 ? x : c});
    const std::vector<double> expected = op->referenceForward(host);
    const std::vector<std::vector<double>> gradients = op->referenceBackward(host, expected, std::vector<double>(dy.begin(), dy.end()));
    const std::vector<float> y = out.read<float>(), gradient = dx.read<float>(), scales = dgamma.read<float>(), shifts = dbeta.read<float>();
    for (std::size_t i = 0; i < xs.size(); ++i) {
      CAPTURE(i);
      const bool inChannel = (i / 4) % 3 == 1;
      CHECK(std::isnan(y[i]) == inChannel);
      CHECK(std::isnan(gradient[i]) == inChannel);
      if (inChannel) continue;
      CHECK(y[i] == doctest::Approx(expected[i]).epsilon(1e-4).scale(1));
      CHECK(gradient[i] == doctest::Approx(gradients[0][i]).epsilon(1e-4).scale(1));
    }
    CHECK(std::isnan(scales[1]));
    CHECK(shifts[1] == 0.0f);
    CHECK(gradients[2][1] == 0.0);
    for (const std::size_t k : {0u, 2u}) {
      CHECK(scales[k] == doctest::Approx(gradients[1][k]).epsilon(1e-4).scale(1));
      CHECK(shifts[k] == doctest::Approx(gradients[2][k]).epsilon(1e-4).scale(1));
    }
  }

  TEST_CASE("an add with a ReLU fused: a NaN gives NaN at its element and no gradient through it, the other elements as the reference") {
    Context& context = test::glContext();
    auto random = test::generator(51);
    ProgramCache programs;
    const Shape shape{3, 7};
    std::vector<float> a = test::uniformFloats(random, 21);
    a[9] = NAN;
    const std::vector<float> b = test::uniformFloats(random, 21), dy = test::uniformFloats(random, 21);
    const Buffer aBuffer = Buffer::of(a), bBuffer = Buffer::of(b), dyBuffer = Buffer::of(dy);
    Buffer out = test::poisoned(21), da = test::poisoned(21), db = test::poisoned(21);
    const auto op = addOp(Activation::relu);
    const std::vector<GpuTensor> in{{aBuffer, shape}, {bBuffer, shape}};
    const GpuTensor output{out, shape};
    Plan plan(context.limits());
    op->forward(programs, plan, in, output);
    op->backward(programs, plan, in, output, {dyBuffer, shape}, {GradientTarget{da, false}, GradientTarget{db, false}});
    plan.run();
    const std::vector<float> y = out.read<float>(), gradientA = da.read<float>(), gradientB = db.read<float>();
    for (std::size_t i = 0; i < 21; ++i) {
      CAPTURE(i);
      CHECK(std::isnan(y[i]) == (i == 9));
      const double sum = static_cast<double>(a[i]) + b[i];
      const double expectedGradient = i != 9 && sum > 0 ? dy[i] : 0.0;
      CHECK(gradientA[i] == doctest::Approx(expectedGradient));
      CHECK(gradientB[i] == doctest::Approx(expectedGradient));
      if (i != 9) CHECK(y[i] == doctest::Approx(std::max(sum, 0.0)));
    }
  }

  TEST_CASE("batch normalization + add + relu whose residual is x itself: one gradient for both, dx's part and then r's") {
    Context& context = test::glContext();
    auto random = test::generator(52);
    ProgramCache programs;
    const Shape x{4, 3, 5}, c{3};
    const std::vector<float> xs = test::uniformFloats(random, elementCount(x)), gamma = test::uniformFloats(random, 3),
                             beta = test::uniformFloats(random, 3), dy = test::uniformFloats(random, xs.size());
    const std::vector<float> runningMean(3, 0.0f), runningVar(3, 1.0f);
    std::vector<Buffer> buffers;
    for (const std::vector<float>* values : {&xs, &gamma, &beta, &runningMean, &runningVar, &dy}) buffers.push_back(Buffer::of(*values));
    const auto op = batchNormOp(true, 0.1f, 1e-5f, Activation::relu, true);
    Buffer out = test::poisoned(xs.size()), dx = test::poisoned(xs.size()), dgamma = test::poisoned(3), dbeta = test::poisoned(3);
    Buffer workspace(op->workspaceBytes({x, c, c, c, c, x}));
    std::vector<GpuTensor> in;
    for (std::size_t i = 0; i < 5; ++i) in.push_back({buffers[i], i == 0 ? x : c});
    in.push_back({buffers[0], x});
    const GpuTensor output{out, x, BufferView(workspace)};
    Plan plan(context.limits());
    op->forward(programs, plan, in, output);
    op->backward(programs, plan, in, output, {buffers[5], x},
                 {GradientTarget{dx, false}, GradientTarget{dgamma, false}, GradientTarget{dbeta, false}, std::nullopt, std::nullopt,
                  GradientTarget{dx, true}});
    plan.run();
    std::vector<std::vector<double>> wide;
    for (const std::vector<float>* values : {&xs, &gamma, &beta, &runningMean, &runningVar, &xs}) wide.emplace_back(values->begin(), values->end());
    std::vector<HostTensor64> host;
    for (std::size_t i = 0; i < wide.size(); ++i) host.push_back({&wide[i], i == 0 || i == 5 ? x : c});
    const std::vector<double> expected = op->referenceForward(host);
    const std::vector<std::vector<double>> gradients = op->referenceBackward(host, expected, std::vector<double>(dy.begin(), dy.end()));
    std::vector<double> both(xs.size());
    for (std::size_t i = 0; i < both.size(); ++i) both[i] = gradients[0][i] + gradients[5][i];
    test::checkClose(out.read<float>(), expected, 1e-5, 1e-4);
    test::checkClose(dx.read<float>(), both, 1e-5, 1e-4);
    test::checkClose(dgamma.read<float>(), gradients[1], 1e-5, 1e-4);
    test::checkClose(dbeta.read<float>(), gradients[2], 1e-5, 1e-4);
  }

  TEST_CASE("layer normalization: a row holding NaN gives NaN in that row's output and input gradient and in every dgamma and dbeta, the other rows as without it") {
    Context& context = test::glContext();
    auto random = test::generator(49);
    ProgramCache programs;
    const Shape x{3, 11}, c{11};
    std::vector<float> xs = test::uniformFloats(random, elementCount(x));
    xs[11 + 4] = NAN;  // row 1
    const std::vector<float> gamma = test::uniformFloats(random, 11), beta = test::uniformFloats(random, 11);
    const std::vector<float> dy = test::uniformFloats(random, elementCount(x));
    const Buffer xBuffer = Buffer::of(xs), gammaBuffer = Buffer::of(gamma), betaBuffer = Buffer::of(beta), dyBuffer = Buffer::of(dy);
    const auto op = layerNormOp();
    Buffer out(xs.size() * sizeof(float)), workspace(op->workspaceBytes({x, c, c})), dx(xs.size() * sizeof(float)),
        dgamma(11 * sizeof(float)), dbeta(11 * sizeof(float));
    for (Buffer* b : {&out, &dx, &dgamma, &dbeta}) b->fill(test::nanPoison);
    const std::vector<GpuTensor> in{{xBuffer, x}, {gammaBuffer, c}, {betaBuffer, c}};
    const GpuTensor output{out, x, BufferView(workspace)};
    Plan plan(context.limits());
    op->forward(programs, plan, in, output);
    op->backward(programs, plan, in, output, {dyBuffer, x}, {GradientTarget{dx, false}, GradientTarget{dgamma, false}, GradientTarget{dbeta, false}});
    plan.run();
    const std::vector<float> y = out.read<float>(), gradient = dx.read<float>();
    for (std::size_t i = 0; i < xs.size(); ++i) {
      CAPTURE(i);
      CHECK(std::isnan(y[i]) == (i / 11 == 1));
      CHECK(std::isnan(gradient[i]) == (i / 11 == 1));
    }
    for (const float value : dgamma.read<float>()) CHECK(std::isnan(value));
    // dbeta = Σ dy reads no x: NaN in x leaves it a number.
    const std::vector<float> shifts = dbeta.read<float>();
    for (std::size_t k = 0; k < 11; ++k) CHECK(shifts[k] == doctest::Approx(dy[k] + dy[11 + k] + dy[22 + k]).epsilon(1e-5));
    // The other rows are what the reference gives them.
    const std::vector<double> wide(xs.begin(), xs.end()), gamma64(gamma.begin(), gamma.end()), beta64(beta.begin(), beta.end());
    const std::vector<double> expected = op->referenceForward({{&wide, x}, {&gamma64, c}, {&beta64, c}});
    for (const std::size_t i : {0u, 5u, 10u, 22u, 32u}) CHECK(y[i] == doctest::Approx(expected[i]).epsilon(1e-5));
  }

  TEST_CASE("an embedding: ids past the table, fractional or NaN give NaN rows and no gradient, negative ones count from the end; a table of more rows than one dispatch axis") {
    Context& context = test::glContext();
    ProgramCache programs;
    const std::uint32_t rows = 65600, width = 3;  // 65 535 work groups along x, then a second row of them
    const std::vector<double> ids{0, 65599, 7, 65600, -1, 2.5, NAN, 7, 65599, 65535};
    const Shape idShape{2, 5}, tableShape{rows, width};
    auto random = test::generator(47);
    const std::vector<float> table = test::uniformFloats(random, std::size_t{rows} * width), dY = test::uniformFloats(random, ids.size() * width);
    const std::vector<double> table64(table.begin(), table.end()), dY64(dY.begin(), dY.end());
    const auto op = embeddingOp();
    const std::vector<HostTensor64> host{{&ids, idShape}, {&table64, tableShape}};
    const std::vector<double> expected = op->referenceForward(host), expectedGradient = op->referenceBackward(host, expected, dY64)[1];
    Buffer idBuffer = Buffer::of(std::vector<float>(ids.begin(), ids.end())), tableBuffer = Buffer::of(table), dYBuffer = Buffer::of(dY);
    Buffer out(expected.size() * sizeof(float)), dTable(table.size() * sizeof(float));
    out.fill(test::nanPoison);
    dTable.fill(test::nanPoison);
    Plan plan(context.limits());
    const std::vector<GpuTensor> inputs{{idBuffer, idShape}, {tableBuffer, tableShape}};
    const GpuTensor output{out, {2, 5, width}};
    op->forward(programs, plan, inputs, output);
    op->backward(programs, plan, inputs, output, {dYBuffer, output.shape}, {std::nullopt, GradientTarget{dTable, false}});
    plan.run();
    for (std::size_t p : {3u, 5u, 6u}) CHECK(std::isnan(expected[p * width]));
    CHECK(expected[4 * width] == table64[(rows - 1) * width]);
    test::checkNanPropagated(out.read<float>(), expected, 0, 0);
    // Row 7 sums two positions, in order, and row 65 599 three (−1 among them); rows no valid id names are 0.
    CHECK(expectedGradient[7 * width] == dY64[2 * width] + dY64[7 * width]);
    CHECK(expectedGradient[(rows - 1) * width] == dY64[1 * width] + dY64[4 * width] + dY64[8 * width]);
    test::checkClose(dTable.read<float>(), expectedGradient, 1e-7, 1e-6);
  }

  TEST_CASE("an embedding's table gradient: a row most positions name (padding), lanes of a warp and of a whole group, runs of positions summed apart, added to what is there, the same bits every run") {
    Context& context = test::glContext();
    ProgramCache programs;
    auto random = test::generator(49);
    // Widths giving 4 lanes of 16 features, 2 lanes of 12 and 1 lane of 17 (the last 5 invocations idle) over 3 chunks
    // and 5 positions; then 3 runs of positions (partial tables added by SplitSum.glsl).
    for (const auto& [positions, width] : std::vector<std::pair<std::uint32_t, std::uint32_t>>{{389, 512}, {389, 768}, {389, 2049}, {2600, 131}}) {
      CAPTURE(positions);
      CAPTURE(width);
      const std::uint32_t rows = 6;
      std::vector<double> ids(positions);
      std::uniform_int_distribution<int> pick(0, 9);
      for (double& id : ids) id = std::min(pick(random), 5);  // row 5 named by about half of the positions
      ids[0] = NAN;
      ids[positions - 1] = -1;  // row 5 as well, from the end
      const Shape idShape{positions}, tableShape{rows, width};
      const std::vector<float> table = test::uniformFloats(random, std::size_t{rows} * width), dY = test::uniformFloats(random, std::size_t{positions} * width);
      const std::vector<float> before = test::uniformFloats(random, table.size());
      const std::vector<double> table64(table.begin(), table.end()), dY64(dY.begin(), dY.end());
      const auto op = embeddingOp();
      const std::vector<HostTensor64> host{{&ids, idShape}, {&table64, tableShape}};
      const std::vector<double> expected = op->referenceForward(host), expectedGradient = op->referenceBackward(host, expected, dY64)[1];
      std::vector<double> expectedAdded(expectedGradient);
      for (std::size_t i = 0; i < expectedAdded.size(); ++i) expectedAdded[i] += before[i];
      Buffer idBuffer = Buffer::of(std::vector<float>(ids.begin(), ids.end())), tableBuffer = Buffer::of(table), dYBuffer = Buffer::of(dY);
      Buffer out(expected.size() * sizeof(float)), dTable(table.size() * sizeof(float));
      const std::size_t workspaceBytes = op->workspaceBytes({idShape, tableShape});
      CHECK((workspaceBytes > 0) == (positions > 1024));
      Buffer workspace(std::max<std::size_t>(workspaceBytes, sizeof(float)));
      std::vector<float> firstRun;
      for (int run = 0; run < 3; ++run) {
        const bool accumulate = run == 2;
        if (accumulate) dTable.upload(before);
        else dTable.fill(test::nanPoison);
        workspace.fill(test::nanPoison);
        Plan plan(context.limits());
        const std::vector<GpuTensor> inputs{{idBuffer, idShape}, {tableBuffer, tableShape}};
        GpuTensor output{out, {positions, width}};
        if (workspaceBytes) output.workspace = BufferView(workspace);
        op->backward(programs, plan, inputs, output, {dYBuffer, output.shape}, {std::nullopt, GradientTarget{dTable, accumulate}});
        plan.run();
        const std::vector<float> gradient = dTable.read<float>();
        test::checkClose(gradient, accumulate ? expectedAdded : expectedGradient, 1e-5, 1e-5);
        if (run == 0) firstRun = gradient;
        else if (!accumulate) CHECK(std::memcmp(firstRun.data(), gradient.data(), gradient.size() * sizeof(float)) == 0);
      }
    }
  }

  TEST_CASE("dropout on the GPU draws the mask of the plan's step") {
    Context& context = test::glContext();
    auto random = test::generator(48);
    ProgramCache programs;
    const Shape x{3, 41};
    const std::vector<float> values = test::uniformFloats(random, elementCount(x));
    const std::vector<double> values64(values.begin(), values.end());
    Buffer in = Buffer::of(values), out(elementCount(x) * sizeof(float));
    for (const std::uint32_t step : {7u, 8u}) {
      CAPTURE(step);
      out.fill(test::nanPoison);
      Plan plan(context.limits());
      plan.addParameter(step);
      dropoutOp(0.5f, 3u)->forward(programs, plan, {{in, x}}, {out, x});
      plan.run();
      test::checkClose(out.read<float>(), dropoutOp(0.5f, 3u, step)->referenceForward({{&values64, x}}), 1e-6, 1e-6);
    }
  }
}
