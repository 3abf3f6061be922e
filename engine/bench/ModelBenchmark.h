// Where the time of an ONNX model goes per batch size: upload of the float inputs, CPU time to issue the
// plan, readback (which waits for the GPU), end to end, the GPU time by timestamps and per node.
#pragma once

#include "bench/Benchmarks.h"
#include "bench/GemmTuner.h"
#include "model/OnnxRunner.h"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace glnet {

struct ModelBenchRow {
  std::uint32_t batch = 0;
  InputShapes shapes;         // the inputs' shapes at this batch
  double compileMs = 0;       // building the graph, programs and plan of this batch size
  Statistics uploadMs, issueMs, readbackMs, endToEndMs;
  Statistics gpuMs;           // the sum of the dispatches' timestamp intervals, per run
  std::size_t activationBytes = 0;
  std::size_t dispatches = 0;
  OnnxRunner::Profile profile;  // per node, by median GPU time, largest first
  std::optional<GemmTuningReport> tuning;  // ModelBenchSetup::tune: what tuning this batch's GEMMs did, before the runs
};

// What an input holds in a benchmark: seeded uniform [0, 1) (the default of float inputs), ones (the default of integer
// and boolean inputs: a valid token id, token type and mask everywhere), zeros, or seeded whole numbers below `bound`
// (token ids below a vocabulary's size).
struct BenchInput {
  enum class Kind { uniform, ones, zeros, ids } kind = Kind::uniform;
  std::uint32_t bound = 0;
};
// "uniform", "ones", "zeros" or "ids:V"; throws a UsageError naming the choices.
BenchInput parseBenchInput(const std::string& text);

struct ModelBenchSetup {
  std::map<std::string, BenchInput> inputs;           // by input name; the others by their type's default
  std::map<std::string, std::uint32_t> dimensions;    // symbolic dimensions other than the batch by name (sequence=128)
  bool tune = false;                                  // tune each batch's GEMMs (tuneGemms) before measuring it
};

// Runs the model on seeded inputs as `setup` says: `warmup` unmeasured runs, then `runs` measured end to end and
// `runs` timed per dispatch. `progress` names each batch size as it starts. Throws a UsageError for a name in `setup`
// that the model does not have.
std::vector<ModelBenchRow> benchmarkModel(OnnxRunner& runner, const std::vector<std::uint32_t>& batches, int warmup, int runs,
                                          std::uint32_t seed, const std::function<void(const std::string&)>& progress = {},
                                          const ModelBenchSetup& setup = {});

}  // namespace glnet
