// An ONNX model on the GPU at any batch size its file allows: the file is parsed once, the graph built from it and
// compiled once per batch size and its plan kept (the few most recent sizes), float32 inputs uploaded, the plan
// replayed, the outputs read back with one synchronisation. glnet_run, glnet_bench --model M.onnx and the Python
// package run models through it.
#pragma once

#include "importer/Onnx.h"
#include "gl/Context.h"
#include "graph/CompiledGraph.h"

#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace glnet {

// An input or output of the model: its name and its shape at the model's own batch (1 where it is dynamic).
struct OnnxPort {
  std::string name;
  Shape shape;
  // Its first dimension is the batch: an input's is symbolic in the file; an output's changes with the batch.
  bool batched = false;
  bool bytes = false;  // an input the file declares uint8 (its values are given as floats 0 to 255)
};

struct RunTimes {
  double uploadMs = 0;    // host → device copies of the inputs
  double issueMs = 0;     // CPU time to issue the plan
  double readbackMs = 0;  // waiting for the GPU, then copying the outputs back
};

// GPU time of one node (an op after fusion: a convolution with its bias, activation and residual add is one).
struct NodeTime {
  std::string node;     // the name of the tensor it writes
  std::string kernel;   // glnet's op
  std::string outputShape;
  std::string dispatchLabels;  // what its dispatches ran ("conv relu 64x64 split-K; split-K sum, bias, activation")
  std::size_t dispatches = 0;
  double gpuMs = 0;     // median over the runs, summed over its dispatches
};

class OnnxRunner {
 public:
  // Reads and checks the model (at its own batch) before any GPU work. The file is not read again: a new batch size
  // binds the model parsed here.
  OnnxRunner(const Context& context, std::string path);
  OnnxRunner(const OnnxRunner&) = delete;
  OnnxRunner& operator=(const OnnxRunner&) = delete;

  const std::string& path() const { return parsed_.path(); }
  const std::vector<OnnxPort>& inputs() const { return inputs_; }
  const std::vector<OnnxPort>& outputs() const { return outputs_; }
  bool dynamicBatch() const { return dynamicBatch_; }
  // The batch of the model's own file: its fixed batch, or 1 where it is dynamic.
  std::uint32_t ownBatch() const { return inputs_.front().shape.empty() ? 1 : inputs_.front().shape[0]; }
  std::int64_t opset() const { return opset_; }
  std::size_t nodeCount() const { return nodeCount_; }

  // The model bound to `batch` rows; throws a UsageError when the batch is fixed and different.
  const OnnxModel& model(std::uint32_t batch);
  std::size_t activationBytes(std::uint32_t batch);

  // The number of floats of each input at `batch`.
  std::vector<std::size_t> inputSizes(std::uint32_t batch);
  // One value pointer per input in the model's order, each holding inputSizes(batch) floats; returns the
  // outputs in the model's order. Throws glnet::Error when an output is not finite.
  std::vector<std::vector<float>> run(const std::vector<const float*>& inputs, std::uint32_t batch, RunTimes* times = nullptr);

  // Runs the plan of `batch` (on the inputs the last run uploaded) `runs` times with a timestamp after every
  // dispatch.
  struct Profile {
    std::vector<NodeTime> nodes;  // by median GPU time, largest first
    std::vector<double> runMs;    // per run, the GPU time of all its dispatches
    std::size_t barriers = 0;     // the barriers one run issues: what orders its dependent dispatches
  };
  Profile profile(std::uint32_t batch, int runs);

 private:
  struct Bound {
    std::uint32_t batch;
    OnnxModel model;
    CompiledGraph compiled;
    Plan plan;
    Bound(const Context& context, std::uint32_t batch, OnnxModel model);
  };
  Bound& bound(std::uint32_t batch);

  const Context& context_;
  ParsedOnnx parsed_;
  std::vector<OnnxPort> inputs_, outputs_;
  bool dynamicBatch_ = false;
  std::int64_t opset_ = 0;
  std::size_t nodeCount_ = 0;
  std::optional<OnnxModel> own_;              // the model at its own batch, until a plan is built for it
  std::list<std::unique_ptr<Bound>> bound_;   // most recently used first
};

// The largest number of batch sizes whose plans an OnnxRunner keeps at once.
constexpr std::size_t keptBatchPlans = 4;

}  // namespace glnet
