#include "bench/GemmBenchmarks.h"

#include "ops/GemmTuning.h"
#include "base/Stopwatch.h"
#include "gl/Sync.h"
#include "ops/Gemm.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <optional>
#include <random>

namespace glnet {
namespace {

constexpr double minimumWarmupGpuMs = 100;
constexpr double maximumWarmupWallMs = 500;

std::string shapeText(const GemmCase& c) {
  const bool dense = c.layout == GemmLayout::denseForward || c.layout == GemmLayout::denseInputGradient ||
                     c.layout == GemmLayout::denseWeightGradient;
  if (dense) {
    return "M" + std::to_string(c.dense.rows) + " K" + std::to_string(c.dense.inputs) + " N" + std::to_string(c.dense.outputs);
  }
  const ConvShape& s = c.conv;
  return "N" + std::to_string(s.batch) + " C" + std::to_string(s.channels) + " " + std::to_string(s.height) + "x" +
         std::to_string(s.width) + " OC" + std::to_string(s.outChannels) + " " + std::to_string(s.kernelHeight) + "x" +
         std::to_string(s.kernelWidth) + " pad" + std::to_string(s.padding);
}

GemmCase denseCase(GemmLayout layout, std::uint32_t rows, std::uint32_t inputs, std::uint32_t outputs) {
  GemmCase c{"", layout, {rows, inputs, outputs}, {}};
  c.name = std::string(gemmLayoutName(layout)) + " " + shapeText(c);
  return c;
}

GemmCase convCase(GemmLayout layout, const ConvShape& shape) {
  GemmCase c{"", layout, {}, shape};
  c.name = std::string(gemmLayoutName(layout)) + " " + shapeText(c);
  return c;
}

std::vector<float> randomFloats(std::mt19937& random, std::uint64_t count) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(count);
  for (float& value : values) value = uniform(random);
  return values;
}

// Σ a·b in double with Σ|a·b|, for the tolerance.
struct Dot {
  double sum = 0, magnitude = 0;
  void add(double a, double b) {
    sum += a * b;
    magnitude += std::abs(a * b);
  }
};

// Host copies of the operands and the float64 value of one output element.
struct Operands {
  std::vector<float> first, second, bias;  // layout-specific: see makeOperands
};

Dot referenceElement(const GemmCase& c, const Operands& o, std::uint64_t index) {
  Dot dot;
  const std::vector<float>& p = o.first;
  const std::vector<float>& q = o.second;
  if (c.layout == GemmLayout::denseForward || c.layout == GemmLayout::denseInputGradient ||
      c.layout == GemmLayout::denseWeightGradient) {
    const std::uint64_t M = c.dense.rows, K = c.dense.inputs, N = c.dense.outputs;
    if (c.layout == GemmLayout::denseForward) {  // p = X [M×K], q = W [N×K]
      const std::uint64_t r = index / N, s = index % N;
      for (std::uint64_t k = 0; k < K; ++k) dot.add(p[r * K + k], q[s * K + k]);
      dot.add(o.bias[s], 1.0);
    } else if (c.layout == GemmLayout::denseInputGradient) {  // p = dY [M×N], q = W [N×K]
      const std::uint64_t m = index / K, k = index % K;
      for (std::uint64_t n = 0; n < N; ++n) dot.add(p[m * N + n], q[n * K + k]);
    } else {  // p = dY [M×N], q = X [M×K]
      const std::uint64_t n = index / K, k = index % K;
      for (std::uint64_t m = 0; m < M; ++m) dot.add(p[m * N + n], q[m * K + k]);
    }
    return dot;
  }
  const ConvShape& s = c.conv;
  const std::int64_t H = s.height, W = s.width, OH = s.outHeight(), OW = s.outWidth(), P = s.padding;
  const std::uint64_t C = s.channels, OC = s.outChannels, KH = s.kernelHeight, KW = s.kernelWidth;
  const auto input = [&](const std::vector<float>& x, std::uint64_t n, std::uint64_t ch, std::int64_t h, std::int64_t w) {
    return h < 0 || w < 0 || h >= H || w >= W ? 0.0 : double{x[((n * C + ch) * H + h) * W + w]};
  };
  if (c.layout == GemmLayout::convForward) {  // p = X, q = Wt
    const std::int64_t ow = index % OW, oh = (index / OW) % OH;
    const std::uint64_t oc = (index / (OW * OH)) % OC, n = index / (OW * OH * OC);
    for (std::uint64_t ch = 0; ch < C; ++ch)
      for (std::uint64_t kh = 0; kh < KH; ++kh)
        for (std::uint64_t kw = 0; kw < KW; ++kw)
          dot.add(input(p, n, ch, oh + kh - P, ow + kw - P), q[((oc * C + ch) * KH + kh) * KW + kw]);
    dot.add(o.bias[oc], 1.0);
  } else if (c.layout == GemmLayout::convInputGradient) {  // p = dY, q = Wt
    const std::int64_t w = index % W, h = (index / W) % H;
    const std::uint64_t ch = (index / (W * H)) % C, n = index / (W * H * C);
    for (std::uint64_t oc = 0; oc < OC; ++oc)
      for (std::uint64_t kh = 0; kh < KH; ++kh)
        for (std::uint64_t kw = 0; kw < KW; ++kw) {
          const std::int64_t oh = h - std::int64_t(kh) + P, ow = w - std::int64_t(kw) + P;
          if (oh < 0 || ow < 0 || oh >= OH || ow >= OW) continue;
          dot.add(p[((n * OC + oc) * OH + oh) * OW + ow], q[((oc * C + ch) * KH + kh) * KW + kw]);
        }
  } else {  // p = dY, q = X
    const std::uint64_t kw = index % KW, kh = (index / KW) % KH, ch = (index / (KW * KH)) % C, oc = index / (KW * KH * C);
    for (std::uint64_t n = 0; n < s.batch; ++n)
      for (std::int64_t oh = 0; oh < OH; ++oh)
        for (std::int64_t ow = 0; ow < OW; ++ow)
          dot.add(p[((n * OC + oc) * OH + oh) * OW + ow], input(q, n, ch, oh + kh - P, ow + kw - P));
  }
  return dot;
}

std::uint64_t outputCount(const GemmCase& c) {
  switch (c.layout) {
    case GemmLayout::denseForward: return std::uint64_t{c.dense.rows} * c.dense.outputs;
    case GemmLayout::denseInputGradient: return std::uint64_t{c.dense.rows} * c.dense.inputs;
    case GemmLayout::denseWeightGradient: return std::uint64_t{c.dense.outputs} * c.dense.inputs;
    case GemmLayout::convForward:
      return std::uint64_t{c.conv.batch} * c.conv.outChannels * c.conv.outHeight() * c.conv.outWidth();
    case GemmLayout::convInputGradient: return std::uint64_t{c.conv.batch} * c.conv.channels * c.conv.height * c.conv.width;
    case GemmLayout::convWeightGradient:
      return std::uint64_t{c.conv.outChannels} * c.conv.channels * c.conv.kernelHeight * c.conv.kernelWidth;
  }
  return 0;
}

Operands makeOperands(const GemmCase& c, std::mt19937& random) {
  const std::uint64_t M = c.dense.rows, K = c.dense.inputs, N = c.dense.outputs;
  const ConvShape& s = c.conv;
  const std::uint64_t xCount = std::uint64_t{s.batch} * s.channels * s.height * s.width;
  const std::uint64_t yCount = std::uint64_t{s.batch} * s.outChannels * s.outHeight() * s.outWidth();
  const std::uint64_t wCount = std::uint64_t{s.outChannels} * s.channels * s.kernelHeight * s.kernelWidth;
  switch (c.layout) {
    case GemmLayout::denseForward: return {randomFloats(random, M * K), randomFloats(random, N * K), randomFloats(random, N)};
    case GemmLayout::denseInputGradient: return {randomFloats(random, M * N), randomFloats(random, N * K), {}};
    case GemmLayout::denseWeightGradient: return {randomFloats(random, M * N), randomFloats(random, M * K), {}};
    case GemmLayout::convForward: return {randomFloats(random, xCount), randomFloats(random, wCount), randomFloats(random, s.outChannels)};
    case GemmLayout::convInputGradient: return {randomFloats(random, yCount), randomFloats(random, wCount), {}};
    case GemmLayout::convWeightGradient: return {randomFloats(random, yCount), randomFloats(random, xCount), {}};
  }
  return {};
}

// The op's dispatches on GPU copies of `o`, writing `out`. Activation none, so dZ = dY and the forward
// output Y that the dense gradients read for act' is not needed: dY stands in for it.
// `keep` is a deque so that references to its buffers survive the workspaces added after them.
void record(const GemmCase& c, const DenseOp& dense, const ConvOp& conv, const Operands& o, Plan& plan, std::deque<Buffer>& keep,
            const Buffer& out) {
  keep.push_back(Buffer::of(o.first));
  keep.push_back(Buffer::of(o.second));
  keep.push_back(Buffer::of(o.bias.empty() ? std::vector<float>{0.0f} : o.bias));
  const Buffer &first = keep[keep.size() - 3], &second = keep[keep.size() - 2], &bias = keep.back();
  const auto workspace = [&](std::size_t bytes) {
    keep.emplace_back(std::max<std::size_t>(bytes, 4));
    return std::optional<BufferView>(keep.back());
  };
  const DenseShape& d = c.dense;
  switch (c.layout) {
    case GemmLayout::denseForward:
      plan.record(dense.forward(first, second, bias, out, d, workspace(DenseOp::forwardWorkspaceBytes(d, true))));
      break;
    case GemmLayout::denseInputGradient:
      if (DenseOp::transposesOutputGradient(d)) {
        const BufferView dzT = *workspace(DenseOp::inputGradientWorkspaceBytes(d));
        plan.record(dense.preActivationGradient(first, first, dzT, d));
        plan.record(dense.inputGradientOnTransposed(dzT, second, out, d, false));
      } else {
        plan.record(dense.inputGradient(first, first, second, out, d, false));
      }
      break;
    case GemmLayout::denseWeightGradient:
      plan.record(dense.weightGradient(first, first, second, out, d, false,
                                       workspace(DenseOp::weightGradientSplit(d).workspaceBytes(d.outputs, d.inputs))));
      break;
    case GemmLayout::convForward:
      keep.emplace_back(ConvOp::transposedWeightBytes(c.conv));
      plan.record(conv.forward(first, second, bias, out, c.conv, keep.back()));
      break;
    case GemmLayout::convInputGradient:
      keep.emplace_back(ConvOp::inputGradientWorkspaceBytes(c.conv));
      plan.record(conv.inputGradient(first, second, out, c.conv, false, keep.back()));
      break;
    case GemmLayout::convWeightGradient:
      plan.record(conv.weightGradient(first, second, out, c.conv, false,
                                      workspace(ConvOp::weightGradientSplit(c.conv, false).workspaceBytes(c.rows(), c.columns()))));
      break;
  }
}

GemmResult measure(const Context& context, ProgramCache& programs, const GemmCase& c, const Operands& operands,
                   const GemmBenchSettings& settings, const GemmConfig* forced) {
  std::optional<ForcedGemmConfig> force;
  if (forced) force.emplace(*forced);
  const DenseOp dense(programs, Activation::none);
  const ConvOp conv(programs, Activation::none);
  const std::uint64_t count = outputCount(c);
  Buffer out(count * sizeof(float));
  out.fill(0x7fc00000u);  // NaN: an unwritten element fails the check
  Plan plan(context.limits());
  std::deque<Buffer> keep;
  record(c, dense, conv, operands, plan, keep, out);

  GemmResult result{c, forced ? forced->name : "", "", {}, 0, 0, false};
  for (const std::string& label : plan.labels()) result.dispatches += (result.dispatches.empty() ? "" : " + ") + label;
  // Warm up for the runs asked, then on until 100 ms of GPU time (or 500 ms of wall time), so that the clocks
  // have risen again after the CPU-side preparation of the case: with 25 warm-up runs, kernels of 10-50 µs
  // measured 3x slower on the H100 than after 100 ms of work.
  const auto timedRun = [&] {
    TimerQuery start, end;
    start.record();
    plan.run();
    end.record();
    return gpuMilliseconds(start, end);
  };
  double warm = 0;
  const Stopwatch warmup;
  for (int run = 0; run < settings.warmup || (warm < minimumWarmupGpuMs && warmup.milliseconds() < maximumWarmupWallMs); ++run) {
    warm += timedRun();
  }
  std::vector<double> samples;
  for (int run = 0; run < settings.runs; ++run) samples.push_back(timedRun());
  result.ms = summarize(samples);
  result.tflops = result.ms.median > 0 ? c.flops() / (result.ms.median * 1e-3) / 1e12 : 0;

  std::vector<float> gpu(count);
  plan.read(out, gpu.data(), gpu.size() * sizeof(float));
  std::mt19937 pick(static_cast<std::uint32_t>(count));
  std::vector<std::uint64_t> indices{0, count - 1};
  for (int i = 2; i < gemmCheckedElements; ++i) indices.push_back(pick() % count);
  const double unit = std::sqrt(double(c.depth())) * std::ldexp(1.0, -24);
  for (const std::uint64_t index : indices) {
    const Dot expected = referenceElement(c, operands, index);
    const double error = std::abs(double{gpu[index]} - expected.sum) / (expected.magnitude * unit + 1e-30);
    result.worstError = std::isnan(gpu[index]) ? INFINITY : std::max(result.worstError, error);
  }
  result.passed = result.worstError <= 4.0;
  return result;
}

}  // namespace

const char* gemmLayoutName(GemmLayout layout) {
  switch (layout) {
    case GemmLayout::denseForward: return "dense X.W^T";
    case GemmLayout::denseInputGradient: return "dense dX=dY.W";
    case GemmLayout::denseWeightGradient: return "dense dW=dY^T.X";
    case GemmLayout::convForward: return "conv forward";
    case GemmLayout::convInputGradient: return "conv dX";
    case GemmLayout::convWeightGradient: return "conv dW";
  }
  return "?";
}

std::uint64_t GemmCase::rows() const {
  switch (layout) {
    case GemmLayout::denseForward:
    case GemmLayout::denseInputGradient: return dense.rows;
    case GemmLayout::denseWeightGradient: return dense.outputs;
    case GemmLayout::convForward: return std::uint64_t{conv.batch} * conv.outHeight() * conv.outWidth();
    case GemmLayout::convInputGradient: return std::uint64_t{conv.batch} * conv.height * conv.width;
    case GemmLayout::convWeightGradient: return conv.outChannels;
  }
  return 0;
}

std::uint64_t GemmCase::columns() const {
  switch (layout) {
    case GemmLayout::denseForward: return dense.outputs;
    case GemmLayout::denseInputGradient:
    case GemmLayout::denseWeightGradient: return dense.inputs;
    case GemmLayout::convForward: return conv.outChannels;
    case GemmLayout::convInputGradient: return conv.channels;
    case GemmLayout::convWeightGradient: return std::uint64_t{conv.channels} * conv.kernelHeight * conv.kernelWidth;
  }
  return 0;
}

std::uint64_t GemmCase::depth() const {
  switch (layout) {
    case GemmLayout::denseForward: return dense.inputs;
    case GemmLayout::denseInputGradient: return dense.outputs;
    case GemmLayout::denseWeightGradient: return dense.rows;
    case GemmLayout::convForward: return std::uint64_t{conv.channels} * conv.kernelHeight * conv.kernelWidth;
    case GemmLayout::convInputGradient: return std::uint64_t{conv.outChannels} * conv.kernelHeight * conv.kernelWidth;
    case GemmLayout::convWeightGradient: return std::uint64_t{conv.batch} * conv.outHeight() * conv.outWidth();
  }
  return 0;
}

std::vector<GemmCase> standardGemmCases() {
  using L = GemmLayout;
  std::vector<GemmCase> cases;
  const auto allDense = [&](std::uint32_t m, std::uint32_t k, std::uint32_t n) {
    for (const L layout : {L::denseForward, L::denseInputGradient, L::denseWeightGradient}) cases.push_back(denseCase(layout, m, k, n));
  };
  allDense(1024, 1024, 1024);
  allDense(4096, 4096, 4096);
  // 784-4096-4096-10 at batch 1024 (training), 784-128-10 at batch 64 (training) and 1, 1000, 10 000
  // (inference), the CNN's dense layers at batch 100 (training) and 10 000 (evaluation).
  allDense(1024, 784, 4096);
  allDense(1024, 4096, 4096);
  allDense(1024, 4096, 10);
  allDense(64, 784, 128);
  allDense(64, 128, 10);
  allDense(100, 3136, 512);
  allDense(100, 512, 10);
  for (const std::uint32_t m : {1u, 1000u, 10000u}) cases.push_back(denseCase(L::denseForward, m, 784, 128));
  cases.push_back(denseCase(L::denseForward, 10000, 128, 10));
  cases.push_back(denseCase(L::denseForward, 10000, 3136, 512));
  cases.push_back(denseCase(L::denseForward, 10000, 512, 10));
  // BERT-base's dense layers at 64 × 128 tokens: Q, K and V joined, the attention's output, the intermediate and output.
  for (const auto& [k, n] : {std::pair<std::uint32_t, std::uint32_t>{768, 2304}, {768, 768}, {768, 3072}, {3072, 768}}) {
    cases.push_back(denseCase(L::denseForward, 8192, k, n));
  }
  // The CNN's convolutions (5×5, same padding) at batch 100 in each direction, and at 10 000 forward.
  const ConvShape conv1{100, 1, 28, 28, 32, 5, 5, 2}, conv2{100, 32, 14, 14, 64, 5, 5, 2};
  for (const ConvShape& shape : {conv1, conv2}) {
    for (const L layout : {L::convForward, L::convInputGradient, L::convWeightGradient}) cases.push_back(convCase(layout, shape));
  }
  for (ConvShape shape : {conv1, conv2}) {
    shape.batch = 10000;
    cases.push_back(convCase(L::convForward, shape));
  }
  return cases;
}

std::vector<GemmResult> runGemmBenchmarks(const Context& context, const GemmBenchSettings& settings,
                                          const std::function<void(const std::string&)>& progress) {
  ProgramCache programs;
  std::mt19937 random(settings.seed);
  std::vector<GemmResult> results;
  for (const GemmCase& c : standardGemmCases()) {
    if (!settings.filter.empty() && c.name.find(settings.filter) == std::string::npos) continue;
    if (settings.maxGigaflop > 0 && c.flops() > settings.maxGigaflop * 1e9) continue;
    if (progress) progress(c.name);
    const Operands operands = makeOperands(c, random);
    // The forced configurations run first, so that the rule's choice is measured on a program that has
    // already run, like theirs (NVIDIA runs a new program slower for a while after its first dispatch).
    std::vector<GemmResult> forced;
    if (settings.everyConfiguration) {
      for (const GemmConfig* config : gemmConfigsFitting(context.limits())) {
        forced.push_back(measure(context, programs, c, operands, settings, config));
      }
    }
    {
      const IgnoredGemmTuning ruleOnly;  // the rule's row is the rule's, whatever this device's tuning kept
      results.push_back(measure(context, programs, c, operands, settings, nullptr));
    }
    results.insert(results.end(), forced.begin(), forced.end());
  }
  return results;
}

}  // namespace glnet
