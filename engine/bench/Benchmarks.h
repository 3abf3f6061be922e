// The measurements behind glnet_bench: where the time of MNIST inference goes per batch size (upload,
// issue, GPU per dispatch, fence, three kinds of readback), naive against chained execution, a training
// step, and the reference write-up's elementwise workload. Every workload also checks its results.
#pragma once

#include "gl/Context.h"
#include "model/Network.h"
#include "plan/Statistics.h"

#include <functional>
#include <string>
#include <vector>

namespace glnet {

// One measured quantity in milliseconds: e.g. section "inference", batch 64, stage "gpu".
struct BenchRow {
  std::string section;
  std::size_t batch = 0;
  std::string stage;
  Statistics ms;
};

struct BenchSettings {
  std::vector<std::size_t> batches{1, 8, 64, 512, 4096, 10000};
  int warmup = 3;
  int runs = 20;
  std::size_t elementwiseCount = 1000000;
  std::uint32_t trainingBatch = 64;
  int trainingSteps = 100;
  std::uint32_t seed = 1;
};

struct BenchReport {
  std::vector<BenchRow> rows;
  std::vector<std::pair<std::string, double>> coldStart;  // context creation, then compile and link per program (ms)
  bool persistentMaps = false;                            // ARB_buffer_storage present
  std::size_t trainingDispatches = 0;
  std::size_t trainingBarriers = 0;  // what orders its dependent dispatches, the one before the first included
  std::vector<std::string> failures;                      // correctness checks that failed
  const BenchRow* find(const std::string& section, std::size_t batch, const std::string& stage) const;
};

// `progress` names each workload as it starts.
BenchReport runBenchmarks(const Context& context, const Network& network, const BenchSettings& settings,
                          const std::function<void(const std::string&)>& progress = {});

}  // namespace glnet
