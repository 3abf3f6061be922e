// A network's training step on random data, and the GEMM tuning of that step (ops/GemmTuning.h): what
// `glnet_train --tune` and `glnet_bench --tune` run before they train or measure.
#pragma once

#include "gl/Context.h"
#include "graph/CompiledGraph.h"
#include "model/Network.h"
#include "ops/GemmTuning.h"

#include <cstdint>
#include <functional>
#include <string>

namespace glnet {

// The network's training step (SGD) at `batch`, compiled under the GEMM choices in force, a random batch uploaded:
// pixels, or a token network's ids below its vocabulary. The step's GEMMs have the shapes of any optimizer's.
struct RandomTrainingStep {
  RandomTrainingStep(const Context& context, const Network& network, std::uint32_t batch, std::uint32_t seed);
  NetworkGraph nodes;
  CompiledGraph compiled;
};

// How a training step's tuning times each plan: `warmup` steps unmeasured, then `runs` (at least one) timed dispatch by
// dispatch, at `batch` images (or texts) per step.
struct TrainingTimings {
  std::uint32_t batch = 64;
  int warmup = 2;
  int runs = 8;
  std::uint32_t seed = 1;
};

// The GEMMs of `network`'s training step timed under every candidate (tuneGemms), each shape's fastest kept in this
// device's tuning table, which every later plan on this device reads (glnet_train's too).
GemmTuningReport tuneTrainingGemms(const Context& context, const Network& network, const TrainingTimings& timings,
                                   const std::function<void(const std::string&)>& progress = {});

// One line: what a tuning did ("18 shapes under 36 candidates in 110.4 s, 5 kept: the step's GPU time 6.65 -> 6.33 ms").
std::string describeTuning(const GemmTuningReport& report);

}  // namespace glnet
