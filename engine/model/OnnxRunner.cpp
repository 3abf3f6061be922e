#include "model/OnnxRunner.h"

#include "base/Stopwatch.h"
#include "base/check.h"
#include "base/log.h"
#include "plan/Statistics.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace glnet {

namespace {

std::vector<OnnxPort> portsOf(const OnnxModel& model, const std::vector<std::pair<std::string, Tensor>>& ports) {
  std::vector<OnnxPort> result;
  for (const auto& [name, tensor] : ports) result.push_back({name, model.graph.tensor(tensor).shape});
  return result;
}

std::vector<Tensor> tensorsOf(const std::vector<std::pair<std::string, Tensor>>& ports) {
  std::vector<Tensor> result;
  for (const auto& port : ports) result.push_back(port.second);
  return result;
}

}  // namespace

OnnxRunner::Bound::Bound(const Context& context, std::uint32_t batch, OnnxModel bound)
    : batch(batch),
      model(std::move(bound)),
      compiled(context, model.graph, CompiledGraph::Memory::reused, tensorsOf(model.outputs)),
      plan(compiled.forwardPlan([](Plan&) {})) {}

OnnxRunner::OnnxRunner(const Context& context, std::string path) : context_(context), parsed_(std::move(path)) {
  OnnxModel model = readOnnx(parsed_, 0);
  inputs_ = portsOf(model, model.inputs);
  outputs_ = portsOf(model, model.outputs);
  for (std::size_t i = 0; i < inputs_.size(); ++i) {
    inputs_[i].batched = model.batchedInputs[i];
    inputs_[i].bytes = model.byteInputs[i];
  }
  if (model.dynamicBatch) {
    // Which outputs follow the batch: their first dimension at another batch size (the shapes alone, no GPU work).
    const OnnxModel twice = readOnnx(parsed_, 2);
    for (std::size_t o = 0; o < outputs_.size(); ++o) {
      const Shape& other = twice.graph.tensor(twice.outputs[o].second).shape;
      outputs_[o].batched = !other.empty() && !outputs_[o].shape.empty() && other[0] != outputs_[o].shape[0];
    }
  }
  dynamicBatch_ = model.dynamicBatch;
  opset_ = model.opset;
  nodeCount_ = model.nodes.size();
  own_ = std::move(model);
}

OnnxRunner::Bound& OnnxRunner::bound(std::uint32_t batch) {
  const auto found = std::find_if(bound_.begin(), bound_.end(), [&](const auto& b) { return b->batch == batch; });
  if (found != bound_.end()) {
    bound_.splice(bound_.begin(), bound_, found);
    return *bound_.front();
  }
  if (batch == 0) throw UsageError("a batch of 0 rows: give at least one");
  if (!dynamicBatch_ && batch != ownBatch()) {
    throw UsageError(path() + ": the model's batch is fixed at " + std::to_string(ownBatch()) + " rows, not " + std::to_string(batch));
  }
  OnnxModel model = own_ && batch == ownBatch() ? std::move(*own_) : readOnnx(parsed_, batch);
  if (batch == ownBatch()) own_.reset();
  if (bound_.size() >= keptBatchPlans) bound_.pop_back();
  bound_.push_front(std::make_unique<Bound>(context_, batch, std::move(model)));
  return *bound_.front();
}

const OnnxModel& OnnxRunner::model(std::uint32_t batch) { return bound(batch).model; }

std::vector<std::size_t> OnnxRunner::inputSizes(std::uint32_t batch) {
  const OnnxModel& bound = model(batch);
  std::vector<std::size_t> sizes;
  for (const auto& input : bound.inputs) sizes.push_back(elementCount(bound.graph.tensor(input.second).shape));
  return sizes;
}

std::size_t OnnxRunner::activationBytes(std::uint32_t batch) { return bound(batch).compiled.activationBytes(); }

std::vector<std::vector<float>> OnnxRunner::run(const std::vector<const float*>& inputs, std::uint32_t batch, RunTimes* times) {
  GLNET_ASSERT(inputs.size() == inputs_.size(), "one value pointer per input");
  Bound& b = bound(batch);
  // NaN in gives NaN out: an input that is not finite is the caller's to give, and the outputs it reaches are not
  // finite either. Only where every input is finite does an output that is not say the model itself overflowed.
  std::string nonFinite;
  for (std::size_t i = 0; i < inputs.size() && nonFinite.empty(); ++i) {
    const std::size_t count = elementCount(b.model.graph.tensor(b.model.inputs[i].second).shape);
    const float* bad = std::find_if(inputs[i], inputs[i] + count, [](float v) { return !std::isfinite(v); });
    if (bad != inputs[i] + count) nonFinite = "input " + b.model.inputs[i].first + " holds NaN or infinite values (the first at element " + std::to_string(bad - inputs[i]) + ")";
  }
  Stopwatch clock;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor tensor = b.model.inputs[i].second;
    b.compiled.upload(tensor, inputs[i], elementCount(b.model.graph.tensor(tensor).shape) * sizeof(float));
  }
  const double uploadMs = clock.restart();
  b.plan.run();
  const double issueMs = clock.restart();
  std::vector<std::vector<float>> outputs;
  for (const auto& [name, tensor] : b.model.outputs) {
    outputs.emplace_back(elementCount(b.model.graph.tensor(tensor).shape));
    const BufferView view = b.compiled.view(tensor);
    b.plan.read(*view.buffer, outputs.back().data(), outputs.back().size() * sizeof(float), view.offset);
  }
  if (times) *times = {uploadMs, issueMs, clock.restart()};
  for (std::size_t o = 0; o < outputs.size(); ++o) {
    if (std::all_of(outputs[o].begin(), outputs[o].end(), [](float v) { return std::isfinite(v); })) continue;
    if (nonFinite.empty()) throw Error("output " + b.model.outputs[o].first + " of " + path() + " holds NaN or infinite values");
    log::warn(path() + ": " + nonFinite + "; output " + b.model.outputs[o].first + " holds NaN or infinite values too");
  }
  return outputs;
}

OnnxRunner::Profile OnnxRunner::profile(std::uint32_t batch, int runs) {
  GLNET_ASSERT(runs > 0, "at least one run");
  Bound& b = bound(batch);
  Profile profile;
  std::vector<std::vector<double>> perStep;
  for (int r = 0; r < runs; ++r) {
    const std::vector<double> times = b.plan.runTimed();
    perStep.resize(times.size());
    double total = 0;
    for (std::size_t i = 0; i < times.size(); ++i) {
      perStep[i].push_back(times[i]);
      total += times[i];
    }
    profile.runMs.push_back(total);
  }
  const std::vector<int>& stepNodes = b.compiled.forwardStepNodes();
  const std::vector<std::string> labels = b.plan.labels();
  const std::vector<std::size_t> recorded = b.plan.recordingOrder();
  std::map<int, NodeTime> perNode;
  for (std::size_t i = 0; i < perStep.size(); ++i) {
    const int node = recorded[i] < stepNodes.size() ? stepNodes[recorded[i]] : -1;
    NodeTime& time = perNode[node];
    if (time.dispatches == 0) {
      const Graph& graph = b.model.graph;
      const OpNode* op = node >= 0 ? &graph.ops()[static_cast<std::size_t>(node)] : nullptr;
      time.node = op ? graph.tensors()[static_cast<std::size_t>(op->output)].name : "(other)";
      time.kernel = op ? op->op->name() : "";
      time.outputShape = op ? describe(graph.tensors()[static_cast<std::size_t>(op->output)].shape) : "";
    }
    ++time.dispatches;
    if (i < labels.size()) time.dispatchLabels += (time.dispatchLabels.empty() ? "" : "; ") + labels[i];
    time.gpuMs += summarize(perStep[i]).median;
  }
  for (auto& entry : perNode) profile.nodes.push_back(std::move(entry.second));
  profile.barriers = b.plan.barrierCount();
  std::stable_sort(profile.nodes.begin(), profile.nodes.end(), [](const NodeTime& a, const NodeTime& b) { return a.gpuMs > b.gpuMs; });
  return profile;
}

}  // namespace glnet
