// glnet_bench --gemm: the GEMM core through the real dense and convolution ops, in every operand layout
// they use, on square sizes and the shapes the models run; GPU time, TFLOP/s, the configuration chosen,
// and each result checked against float64 on sampled elements.
#pragma once

#include "gl/Context.h"
#include "bench/Benchmarks.h"
#include "ops/Conv.h"
#include "ops/Dense.h"

#include <functional>
#include <string>
#include <vector>

namespace glnet {

enum class GemmLayout { denseForward, denseInputGradient, denseWeightGradient, convForward, convInputGradient, convWeightGradient };
const char* gemmLayoutName(GemmLayout layout);

struct GemmCase {
  std::string name;  // unique, e.g. "dense X·Wᵀ 1024x784→4096"
  GemmLayout layout;
  DenseShape dense{};  // dense layouts
  ConvShape conv{};    // convolution layouts
  // The GEMM C[rows × columns] = Σ over depth that the op runs.
  std::uint64_t rows() const;
  std::uint64_t columns() const;
  std::uint64_t depth() const;
  double flops() const { return 2.0 * double(rows()) * double(columns()) * double(depth()); }
};

// Square 1024 and 4096 in each dense layout, then the shapes of the MLPs and the CNN in training and
// evaluation.
std::vector<GemmCase> standardGemmCases();

// Output elements checked per result: the first, the last and 64 at random.
constexpr int gemmCheckedElements = 66;

struct GemmResult {
  GemmCase gemmCase;
  std::string forced;      // the configuration forced, or empty for the rule's choice
  std::string dispatches;  // the labels of the op's dispatches (configuration, split-K)
  Statistics ms;           // GPU time of the op's dispatches
  double tflops = 0;       // from the median
  double worstError = 0;   // sampled |gpu − ref| / (Σ|products| · sqrt(depth) · 2⁻²⁴), must stay ≤ 4
  bool passed = false;
};

struct GemmBenchSettings {
  int warmup = 3;
  int runs = 20;
  std::string filter;           // only cases whose name contains this
  double maxGigaflop = 0;       // skip cases above this (0: none)
  bool everyConfiguration = false;  // also run each case under every configuration
  std::uint32_t seed = 1;
};

// `progress` names each case as it starts.
std::vector<GemmResult> runGemmBenchmarks(const Context& context, const GemmBenchSettings& settings,
                                          const std::function<void(const std::string&)>& progress = {});

}  // namespace glnet
