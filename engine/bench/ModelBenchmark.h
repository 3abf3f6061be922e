// Where the time of an ONNX model goes per batch size: upload of the float inputs, CPU time to issue the
// plan, readback (which waits for the GPU), end to end, the GPU time by timestamps and per node.
#pragma once

#include "bench/Benchmarks.h"
#include "model/OnnxRunner.h"

#include <functional>
#include <vector>

namespace glnet {

struct ModelBenchRow {
  std::uint32_t batch = 0;
  double compileMs = 0;       // building the graph, programs and plan of this batch size
  Statistics uploadMs, issueMs, readbackMs, endToEndMs;
  Statistics gpuMs;           // the sum of the dispatches' timestamp intervals, per run
  std::size_t activationBytes = 0;
  std::size_t dispatches = 0;
  OnnxRunner::Profile profile;  // per node, by median GPU time, largest first
};

// Runs the model on seeded uniform [0, 1) inputs: `warmup` unmeasured runs, then `runs` measured end to end and
// `runs` timed per dispatch. `progress` names each batch size as it starts.
std::vector<ModelBenchRow> benchmarkModel(OnnxRunner& runner, const std::vector<std::uint32_t>& batches, int warmup, int runs,
                                          std::uint32_t seed, const std::function<void(const std::string&)>& progress = {});

}  // namespace glnet
