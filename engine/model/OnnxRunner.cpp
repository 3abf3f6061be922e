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
  for (const auto& [name, tensor] : ports) {
    const Shape& shape = model.graph.tensor(tensor).shape;
    result.push_back({name, shape, std::vector<std::string>(shape.size())});
  }
  return result;
}

InputShapes shapesOf(const OnnxModel& model) {
  InputShapes shapes;
  for (const auto& input : model.inputs) shapes.push_back(model.graph.tensor(input.second).shape);
  return shapes;
}

std::vector<Tensor> tensorsOf(const std::vector<std::pair<std::string, Tensor>>& ports) {
  std::vector<Tensor> result;
  for (const auto& port : ports) result.push_back(port.second);
  return result;
}

}  // namespace

OnnxRunner::Bound::Bound(const Context& context, InputShapes shapes, OnnxModel bound)
    : shapes(std::move(shapes)),
      model(std::move(bound)),
      compiled(context, model.graph, CompiledGraph::Memory::reused, tensorsOf(model.outputs)),
      plan(compiled.forwardPlan([](Plan&) {})) {}

OnnxRunner::OnnxRunner(const Context& context, ParsedOnnx parsed) : context_(context), parsed_(std::move(parsed)) {
  OnnxModel model = readOnnx(parsed_, 0);
  inputs_ = inputPortsOf(model);
  outputs_ = portsOf(model, model.outputs);
  bool symbolic = false;
  InputShapes grown = shapesOf(model);
  for (std::size_t i = 0; i < inputs_.size(); ++i) {
    for (std::size_t axis = 0; axis < grown[i].size(); ++axis) {
      if (!inputs_[i].symbols[axis].empty()) grown[i][axis] += 1;
    }
    symbolic = symbolic || std::any_of(inputs_[i].symbols.begin(), inputs_[i].symbols.end(), [](const std::string& s) { return !s.empty(); });
  }
  if (symbolic) {
    // Which output axes follow the inputs' symbolic dimensions: those that change when every one grows by 1 (the
    // shapes alone, no GPU work).
    const OnnxModel other = readOnnx(parsed_, grown);
    for (std::size_t o = 0; o < outputs_.size(); ++o) {
      const Shape& otherShape = other.graph.tensor(other.outputs[o].second).shape;
      if (otherShape.size() != outputs_[o].shape.size()) continue;
      for (std::size_t axis = 0; axis < otherShape.size(); ++axis) {
        if (otherShape[axis] != outputs_[o].shape[axis]) outputs_[o].symbols[axis] = axis == 0 && model.dynamicBatch ? inputs_[0].symbols[0] : "?";
      }
      outputs_[o].batched = model.dynamicBatch && !otherShape.empty() && !outputs_[o].symbols[0].empty();
    }
  }
  dynamicBatch_ = model.dynamicBatch;
  opset_ = model.opset;
  nodeCount_ = model.nodes.size();
  own_ = std::move(model);
}

std::vector<OnnxPort> inputPortsOf(const OnnxModel& model) {
  std::vector<OnnxPort> inputs = portsOf(model, model.inputs);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    inputs[i].symbols = model.inputSymbols[i];
    inputs[i].batched = !inputs[i].symbols.empty() && !inputs[i].symbols[0].empty();
    inputs[i].dtype = model.inputTypes[i];
  }
  return inputs;
}

std::uint32_t ownBatchOf(const std::vector<OnnxPort>& inputs) { return inputs.front().shape.empty() ? 1 : inputs.front().shape[0]; }

InputShapes bindInputs(const std::vector<OnnxPort>& inputs, bool dynamicBatch, std::uint32_t batch,
                       const std::map<std::string, std::uint32_t>& dimensions, const std::string& path) {
  if (batch == 0) throw UsageError("a batch of 0 rows: give at least one");
  const std::uint32_t ownBatch = ownBatchOf(inputs);
  if (!dynamicBatch && batch != ownBatch) {
    throw UsageError(path + ": the model's batch is fixed at " + std::to_string(ownBatch) + " rows, not " + std::to_string(batch));
  }
  for (const auto& [symbol, length] : dimensions) {
    if (symbol == "?") throw UsageError("a dimension the file leaves unnamed (?) cannot be set by name");
    const bool known = std::any_of(inputs.begin(), inputs.end(), [&](const OnnxPort& p) {
      return std::find(p.symbols.begin(), p.symbols.end(), symbol) != p.symbols.end();
    });
    if (!known) throw UsageError(path + " has no symbolic dimension " + symbol);
    const bool isBatch = std::any_of(inputs.begin(), inputs.end(), [&](const OnnxPort& p) { return p.batched && p.symbols[0] == symbol; });
    if (isBatch) throw UsageError("the dimension " + symbol + " is the batch: give the batch size instead");
    if (length == 0) throw UsageError("a length of 0 for " + symbol + ": give at least 1");
  }
  InputShapes shapes;
  for (const OnnxPort& input : inputs) {
    shapes.push_back(input.shape);
    for (std::size_t axis = 0; axis < input.symbols.size(); ++axis) {
      const auto length = dimensions.find(input.symbols[axis]);
      if (axis == 0 && input.batched) shapes.back()[0] = batch;
      else if (length != dimensions.end()) shapes.back()[axis] = length->second;
    }
  }
  return shapes;
}

OnnxRunner::Bound& OnnxRunner::bound(const InputShapes& shapes) {
  const auto found = std::find_if(bound_.begin(), bound_.end(), [&](const auto& b) { return b->shapes == shapes; });
  if (found != bound_.end()) {
    bound_.splice(bound_.begin(), bound_, found);
    return *bound_.front();
  }
  const bool own = own_ && shapes == shapesOf(*own_);
  OnnxModel model = own ? std::move(*own_) : readOnnx(parsed_, shapes);
  if (own) own_.reset();
  if (bound_.size() >= keptBatchPlans) bound_.pop_back();
  bound_.push_front(std::make_unique<Bound>(context_, shapes, std::move(model)));
  return *bound_.front();
}

const OnnxModel& OnnxRunner::model(const InputShapes& shapes) { return bound(shapes).model; }

std::vector<std::size_t> OnnxRunner::inputSizes(std::uint32_t batch) {
  const OnnxModel& bound = model(batch);
  std::vector<std::size_t> sizes;
  for (const auto& input : bound.inputs) sizes.push_back(elementCount(bound.graph.tensor(input.second).shape));
  return sizes;
}

std::size_t OnnxRunner::activationBytes(const InputShapes& shapes) { return bound(shapes).compiled.activationBytes(); }

std::vector<std::vector<float>> OnnxRunner::run(const std::vector<const float*>& inputs, const InputShapes& shapes, RunTimes* times) {
  GLNET_ASSERT(inputs.size() == inputs_.size(), "one value pointer per input");
  Bound& b = bound(shapes);
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

OnnxRunner::Profile OnnxRunner::profile(const InputShapes& shapes, int runs) {
  GLNET_ASSERT(runs > 0, "at least one run");
  Bound& b = bound(shapes);
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
  const std::vector<std::string> tuningKeys = b.plan.tuningKeys();
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
    const double median = summarize(perStep[i]).median;
    time.gpuMs += median;
    if (!tuningKeys[i].empty()) profile.gemmMs[tuningKeys[i]] += median;
  }
  for (auto& entry : perNode) profile.nodes.push_back(std::move(entry.second));
  profile.barriers = b.plan.barrierCount();
  std::stable_sort(profile.nodes.begin(), profile.nodes.end(), [](const NodeTime& a, const NodeTime& b) { return a.gpuMs > b.gpuMs; });
  return profile;
}

OnnxRunner::PlanSize OnnxRunner::planSize(const InputShapes& shapes) {
  const Bound& b = bound(shapes);
  return {b.plan.dispatchCount(), b.plan.barrierCount()};
}

}  // namespace glnet
