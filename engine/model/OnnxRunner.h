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
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace glnet {

// An input or output of the model: its name and its shape at the model's own binding (1 for each symbolic dimension
// but a fixed batch).
struct OnnxPort {
  std::string name;
  Shape shape;
  // Per axis: the name of a symbolic dimension ("batch", "sequence"; "?" where the file names none), empty where fixed.
  // An output's axis is symbolic where it changes with the inputs' symbolic dimensions.
  std::vector<std::string> symbols;
  // Its first dimension is the batch: an input's is symbolic in the file; an output's changes with the batch.
  bool batched = false;
  // An input's element type as NumPy names it: float32, uint8 (pixels, given as floats 0 to 255), int64, int32 or
  // bool (given as exact floats: see base/ExactInteger.h).
  std::string dtype = "float32";
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

// The ports of a model's inputs, read at its own binding (readOnnx(parsed, 0)): names, shapes, symbols, types.
std::vector<OnnxPort> inputPortsOf(const OnnxModel& model);
// The batch of the model's own file, from its input ports: its fixed batch, or 1 where it is dynamic.
std::uint32_t ownBatchOf(const std::vector<OnnxPort>& inputs);

// The shapes of `inputs` (ports at the model's own binding) at `batch` rows: each symbolic first dimension takes
// `batch`, a symbolic dimension that `dimensions` names (sequence=128) its length there, the others their own (1).
// Throws a UsageError for a batch of 0, a fixed batch other than `batch` (naming `path`), a name no input has (naming
// `path`), the batch's own name or "?" (the importer's mark of an unnamed dimension, which stands for several).
InputShapes bindInputs(const std::vector<OnnxPort>& inputs, bool dynamicBatch, std::uint32_t batch,
                       const std::map<std::string, std::uint32_t>& dimensions, const std::string& path);

class OnnxRunner {
 public:
  // Reads and checks the model (at its own batch) before any GPU work. The file is not read again: a new batch size
  // binds the model parsed here.
  OnnxRunner(const Context& context, std::string path) : OnnxRunner(context, ParsedOnnx(std::move(path))) {}
  // A model already parsed (glnet_info's, read for the host before any device).
  OnnxRunner(const Context& context, ParsedOnnx parsed);
  OnnxRunner(const OnnxRunner&) = delete;
  OnnxRunner& operator=(const OnnxRunner&) = delete;

  const std::string& path() const { return parsed_.path(); }
  const std::vector<OnnxPort>& inputs() const { return inputs_; }
  const std::vector<OnnxPort>& outputs() const { return outputs_; }
  bool dynamicBatch() const { return dynamicBatch_; }
  // The batch of the model's own file: its fixed batch, or 1 where it is dynamic.
  std::uint32_t ownBatch() const { return ownBatchOf(inputs_); }
  std::int64_t opset() const { return opset_; }
  std::size_t nodeCount() const { return nodeCount_; }

  // The input shapes at `batch` rows and the lengths `dimensions` gives (see bindInputs).
  InputShapes batchShapes(std::uint32_t batch, const std::map<std::string, std::uint32_t>& dimensions = {}) const {
    return bindInputs(inputs_, dynamicBatch_, batch, dimensions, path());
  }

  // The model bound to input shapes (a plan per shape set, like a batch size: see keptBatchPlans).
  const OnnxModel& model(const InputShapes& shapes);
  const OnnxModel& model(std::uint32_t batch) { return model(batchShapes(batch)); }
  std::size_t activationBytes(const InputShapes& shapes);
  std::size_t activationBytes(std::uint32_t batch) { return activationBytes(batchShapes(batch)); }

  // The number of floats of each input at `batch`.
  std::vector<std::size_t> inputSizes(std::uint32_t batch);
  // One value pointer per input in the model's order, each holding its shape's count of floats; returns the
  // outputs in the model's order. Throws glnet::Error when an output is not finite.
  std::vector<std::vector<float>> run(const std::vector<const float*>& inputs, const InputShapes& shapes, RunTimes* times = nullptr);
  std::vector<std::vector<float>> run(const std::vector<const float*>& inputs, std::uint32_t batch, RunTimes* times = nullptr) {
    return run(inputs, batchShapes(batch), times);
  }

  // Runs the plan of `shapes` (on the inputs the last run uploaded) `runs` times with a timestamp after every
  // dispatch.
  struct Profile {
    std::vector<NodeTime> nodes;  // by median GPU time, largest first
    std::vector<double> runMs;    // per run, the GPU time of all its dispatches
    std::size_t barriers = 0;     // the barriers one run issues: what orders its dependent dispatches
    // Per GEMM shape (Dispatch::tuningKey), the median GPU time of the dispatches that run it, summed.
    std::map<std::string, double> gemmMs;
  };
  Profile profile(const InputShapes& shapes, int runs);
  Profile profile(std::uint32_t batch, int runs) { return profile(batchShapes(batch), runs); }
  // The dispatches one run of the plan of `shapes` issues and the barriers between them: the plan is built (its
  // programs compiled), not run.
  struct PlanSize {
    std::size_t dispatches = 0, barriers = 0;
  };
  PlanSize planSize(const InputShapes& shapes);
  // Drops every plan kept, so that the next run builds its plan afresh (a GEMM tuning plans again under each candidate).
  void forgetPlans() { bound_.clear(); }

 private:
  struct Bound {
    InputShapes shapes;
    OnnxModel model;
    CompiledGraph compiled;
    Plan plan;
    Bound(const Context& context, InputShapes shapes, OnnxModel model);
  };
  Bound& bound(const InputShapes& shapes);

  const Context& context_;
  ParsedOnnx parsed_;
  std::vector<OnnxPort> inputs_, outputs_;
  bool dynamicBatch_ = false;
  std::int64_t opset_ = 0;
  std::size_t nodeCount_ = 0;
  std::optional<OnnxModel> own_;              // the model at its own shapes, until a plan is built for them
  std::list<std::unique_ptr<Bound>> bound_;   // most recently used first
};

// The largest number of batch sizes (input shape sets) whose plans an OnnxRunner keeps at once.
constexpr std::size_t keptBatchPlans = 4;

}  // namespace glnet
