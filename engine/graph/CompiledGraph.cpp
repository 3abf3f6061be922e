#include "graph/CompiledGraph.h"

#include "base/check.h"
#include "graph/MemoryPlan.h"
#include "ops/Elementwise.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>

namespace glnet {
namespace {

std::size_t bytesOf(const Shape& shape) { return std::max<std::size_t>(elementCount(shape), 1) * sizeof(float); }

}  // namespace

CompiledGraph::CompiledGraph(const Context& context, const Graph& graph, Tensor loss, std::vector<Tensor> metrics,
                             const OptimizerSettings& optimizer)
    : context_(context), graph_(graph), loss_(loss), metrics_(std::move(metrics)), optimizer_(optimizer) {
  const TensorNode& lossNode = graph_.tensor(loss);
  if (lossNode.shape.size() != 1 || lossNode.role != TensorRole::computed) {
    throw Error("the loss must be a per-row vector computed by the graph, not " + lossNode.name + " " + describe(lossNode.shape));
  }
  rows_ = lossNode.shape[0];
  allocate(true);
}

CompiledGraph::CompiledGraph(const Context& context, const Graph& graph, Memory memory, const std::vector<Tensor>& kept)
    : context_(context), graph_(graph) {
  allocate(false, memory, kept);
}

void CompiledGraph::allocate(bool training, Memory memory, const std::vector<Tensor>& kept) {
  const auto& tensors = graph_.tensors();
  // Every tensor is bound whole as one storage block: one larger than the device's limit is refused here,
  // before any buffer is allocated, naming the size asked and the limit.
  const auto blockLimit = static_cast<std::uint64_t>(context_.limits().maxStorageBlockBytes);
  for (const auto& tensor : tensors) {
    const std::uint64_t bytes = bytesOf(tensor.shape);
    if (blockLimit > 0 && bytes > blockLimit) {
      throw DeviceLimitError("tensor " + tensor.name + " " + describe(tensor.shape) + " needs " + std::to_string(bytes) +
                  " bytes; this device binds at most " + std::to_string(blockLimit) +
                  " bytes as one storage block (GL_MAX_SHADER_STORAGE_BLOCK_SIZE): use a smaller batch or narrower layers");
    }
  }
  // Parameter offsets honour the device's binding alignment so each can be bound as its own range.
  const std::size_t alignment = std::max<std::size_t>(static_cast<std::size_t>(context_.limits().storageBufferOffsetAlignment), 4) / 4;
  // Trained parameters first, then state, so that the optimizer's update covers the trained ones alone; with weight
  // decay the trained ones that decay (weights: rank 2 and more) come first. Without it the trained ones keep the
  // graph's order, which puts each layer's weight beside its bias (fewer, larger gradient buckets for data-parallel
  // sums: the MNIST CNN's 7).
  enum class Group { decayed, trained, state };
  const bool decays = optimizer_.weightDecay > 0;
  const auto groupOf = [&](const TensorNode& t) {
    return !t.needsGradient ? Group::state : decays && t.shape.size() >= 2 ? Group::decayed : Group::trained;
  };
  arenaOffset_.assign(tensors.size(), 0);
  for (const Group group : {Group::decayed, Group::trained, Group::state}) {
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      if (tensors[i].role != TensorRole::parameter || groupOf(tensors[i]) != group) continue;
      arenaFloats_ = (arenaFloats_ + alignment - 1) / alignment * alignment;
      arenaOffset_[i] = arenaFloats_;
      arenaFloats_ += elementCount(tensors[i].shape);
    }
    if (group == Group::decayed) decayedFloats_ = arenaFloats_;
    if (group == Group::trained) trainedFloats_ = arenaFloats_;
  }
  parameters_ = Buffer(std::max<std::size_t>(arenaFloats_, 1) * sizeof(float));
  gradients_ = Buffer(training ? parameters_.bytes() : sizeof(float));
  parameters_.clear();
  gradients_.clear();  // parameters no loss depends on keep a zero gradient
  for (std::size_t s = 0; training && s < OptimizerOp::stateBuffers(optimizer_.kind); ++s) {
    state_.emplace_back(parameters_.bytes());
    state_.back().clear();
  }
  storage_.resize(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const int producer = tensors[i].producer;
    const bool view = producer >= 0 && graph_.ops()[static_cast<std::size_t>(producer)].op->isView();
    storage_[i] = view ? storage_[static_cast<std::size_t>(graph_.ops()[static_cast<std::size_t>(producer)].inputs[0])]
                       : static_cast<int>(i);
  }
  const bool reuse = !training && memory == Memory::reused;
  // Inference: an op that prepares keeps what it prepared in a workspace of its own and runs in its scratch; any other
  // op's workspace lives within its own dispatches. With reused memory both are placed in the arena like a tensor,
  // alive while their op runs.
  std::vector<std::size_t> workspaceBytes, preparedBytes, scratchBytes;
  for (const OpNode& node : graph_.ops()) {
    std::vector<Shape> shapes;
    for (const int id : node.inputs) shapes.push_back(tensors[static_cast<std::size_t>(id)].shape);
    const bool preparing = !training && preparesOnce(graph_, node);
    workspaceBytes.push_back(preparing ? 0 : training ? node.op->workspaceBytes(shapes) : node.op->inferenceWorkspaceBytes(shapes));
    preparedBytes.push_back(preparing ? node.op->preparedBytes(shapes) : 0);
    scratchBytes.push_back(preparing ? node.op->preparedScratchBytes(shapes) : 0);
  }
  if (reuse) {
    // An op has a workspace or a scratch, never both: their sum is what it needs while it runs.
    std::vector<std::size_t> runBytes(workspaceBytes.size());
    std::transform(workspaceBytes.begin(), workspaceBytes.end(), scratchBytes.begin(), runBytes.begin(), std::plus<>());
    const MemoryPlan plan = planMemory(graph_, kept, alignment * sizeof(float), runBytes);
    placed_ = plan.offset;
    runMemoryPlaced_ = plan.scratchOffset;
    joined_ = plan.joined;
    scratchBytes_ = scratchBytes;
    workspaceBytes_ = workspaceBytes;
    activationBytes_ = plan.arenaBytes + plan.resultBytes;
    activations_ = Buffer(std::max<std::size_t>(activationBytes_, sizeof(float)));
  }
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const bool view = storage_[i] != static_cast<int>(i);
    const bool inArena = tensors[i].role == TensorRole::parameter || (reuse && placed_[i].has_value());
    values_.push_back(inArena || view ? nullptr : std::make_unique<Buffer>(bytesOf(tensors[i].shape)));
    if (!reuse && !view && tensors[i].role == TensorRole::computed) activationBytes_ += bytesOf(tensors[i].shape);
    const bool ownGradient = training && !inArena && !view && tensors[i].needsGradient;
    tensorGradients_.push_back(ownGradient ? std::make_unique<Buffer>(bytesOf(tensors[i].shape)) : nullptr);
    if (inArena) parameters_.upload(tensors[i].initial, arenaOffset_[i] * sizeof(float));
  }
  for (std::size_t n = 0; n < workspaceBytes.size(); ++n) {
    const std::size_t own = preparedBytes[n] ? preparedBytes[n] : reuse ? 0 : workspaceBytes[n];
    if (own) workspaces_.push_back(std::make_unique<Buffer>(own));
    workspaceOf_.push_back(own ? workspaces_.back().get() : nullptr);
    if (scratchBytes[n] && !reuse) workspaces_.push_back(std::make_unique<Buffer>(scratchBytes[n]));
    scratchOf_.push_back(scratchBytes[n] && !reuse ? workspaces_.back().get() : nullptr);
  }
  if (!reuse) {
    activationBytes_ += std::accumulate(workspaceBytes.begin(), workspaceBytes.end(), std::size_t{0}) +
                        std::accumulate(scratchBytes.begin(), scratchBytes.end(), std::size_t{0});
  }
  if (!training) {
    // The preparations run once now, and again whenever the parameters are written.
    prepared_.assign(graph_.ops().size(), false);
    setupPlan_.emplace(context_.limits());
    for (std::size_t n = 0; n < graph_.ops().size(); ++n) {
      const OpNode& node = graph_.ops()[n];
      if (!preparedBytes[n]) continue;
      std::vector<GpuTensor> inputs;
      for (const int id : node.inputs) inputs.push_back({view({id}), tensors[static_cast<std::size_t>(id)].shape});
      node.op->prepare(programs_, *setupPlan_, inputs, outputOf(n));
      prepared_[n] = true;
    }
    setupPlan_->run();
  }
  rowGradient_ = Buffer::of(std::vector<float>(std::max<std::uint32_t>(rows_, 1), 1.0f / static_cast<float>(std::max<std::uint32_t>(rows_, 1))));
  totals_ = Buffer((1 + metrics_.size()) * sizeof(float));
  zeros_ = Buffer::of(std::vector<float>(1 + metrics_.size(), 0.0f));
  resetPlan_.emplace(context_.limits());
  resetPlan_->record(ElementwiseOp(programs_, ElementwiseKind::copy)(zeros_, zeros_, totals_,
                                                                     static_cast<std::uint32_t>(1 + metrics_.size()), false));
  resetTotals();
}

BufferView CompiledGraph::view(Tensor tensor) const {
  const auto index = static_cast<std::size_t>(storage_.at(static_cast<std::size_t>(tensor.id)));
  if (values_.at(index)) return *values_[index];
  if (placed_.size() > index && placed_[index]) return {activations_, *placed_[index], bytesOf(graph_.tensors()[index].shape)};
  return {parameters_, arenaOffset_[index] * sizeof(float), elementCount(graph_.tensors()[index].shape) * sizeof(float)};
}

GpuTensor CompiledGraph::outputOf(std::size_t node) const {
  const int id = graph_.ops()[node].output;
  GpuTensor output{view({id}), graph_.tensors()[static_cast<std::size_t>(id)].shape};
  if (workspaceOf_[node]) output.workspace = BufferView(*workspaceOf_[node]);
  output.prepared = prepared_.size() > node && prepared_[node];
  if (scratchOf_.size() > node && scratchOf_[node]) output.scratch = BufferView(*scratchOf_[node]);
  if (runMemoryPlaced_.size() > node && runMemoryPlaced_[node]) {
    const std::size_t offset = *runMemoryPlaced_[node];
    if (scratchBytes_[node]) output.scratch = BufferView(activations_, offset, scratchBytes_[node]);
    if (workspaceBytes_[node]) output.workspace = BufferView(activations_, offset, workspaceBytes_[node]);
  }
  return output;
}

void CompiledGraph::recordForward(Plan& plan) {
  stepNodes_.assign(plan.dispatchCount(), -1);
  for (std::size_t n = 0; n < graph_.ops().size(); ++n) {
    const OpNode& node = graph_.ops()[n];
    if (node.op->isView() || (joined_.size() > n && joined_[n])) continue;
    std::vector<GpuTensor> inputs;
    for (const int id : node.inputs) inputs.push_back({view({id}), graph_.tensors()[static_cast<std::size_t>(id)].shape});
    node.op->forward(programs_, plan, inputs, outputOf(n));
    stepNodes_.resize(plan.dispatchCount(), static_cast<int>(n));
  }
  const ReduceOp reduce(programs_);
  if (loss_) plan.record(reduce.sumInto(view(*loss_), rows_, totals_, 0));
  for (std::size_t m = 0; m < metrics_.size(); ++m) {
    plan.record(reduce.sumInto(view(metrics_[m]), static_cast<std::uint32_t>(elementCount(graph_.tensor(metrics_[m]).shape)),
                               totals_, static_cast<std::uint32_t>(1 + m)));
  }
}

void CompiledGraph::recordBackward(Plan& plan) {
  const auto& tensors = graph_.tensors();
  // Views share their input's memory and gradient: all bookkeeping is by the tensor that owns the memory.
  const auto owner = [&](std::size_t id) { return static_cast<std::size_t>(storage_[id]); };
  const auto gradientView = [&](std::size_t id) -> BufferView {
    const std::size_t root = owner(id);
    if (tensorGradients_[root]) return *tensorGradients_[root];
    return {gradients_, arenaOffset_[root] * sizeof(float), elementCount(tensors[root].shape) * sizeof(float)};
  };
  std::vector<bool> written(tensors.size(), false);
  const auto lossId = static_cast<std::size_t>(loss_->id);
  GLNET_ASSERT(tensors[lossId].needsGradient, "the loss depends on no parameter");
  written[owner(lossId)] = true;  // its gradient is rowGradient_: d mean / d row = 1/rows
  for (std::size_t n = graph_.ops().size(); n-- > 0;) {
    const OpNode& node = graph_.ops()[n];
    const auto output = static_cast<std::size_t>(node.output);
    if (!tensors[output].needsGradient || !written[owner(output)] || node.op->isView()) continue;
    std::vector<GpuTensor> inputs;
    std::vector<std::optional<GradientTarget>> targets;
    for (std::size_t i = 0; i < node.inputs.size(); ++i) {
      const auto id = static_cast<std::size_t>(node.inputs[i]);
      inputs.push_back({view({node.inputs[i]}), tensors[id].shape});
      if (!tensors[id].needsGradient || !node.op->passesGradient(i)) {
        targets.emplace_back();
        continue;
      }
      targets.push_back(GradientTarget{gradientView(id), written[owner(id)]});
      written[owner(id)] = true;
    }
    const BufferView outputGradient = output == lossId ? BufferView(rowGradient_) : gradientView(output);
    node.op->backward(programs_, plan, inputs, outputOf(n), {outputGradient, tensors[output].shape}, targets);
  }
}

void CompiledGraph::recordUpdate(Plan& plan) {
  std::vector<BufferView> state(state_.begin(), state_.end());
  std::optional<BufferView> squaredNorm;
  if (optimizer_.clipNorm > 0) {
    plan.record(ReduceOp(programs_).squaresInto(gradients_, static_cast<std::uint32_t>(trainedFloats_), squaredNorm_, 0));
    squaredNorm = BufferView(squaredNorm_);
  }
  plan.record(OptimizerOp(programs_, optimizer_).update(parameters_, gradients_, state, static_cast<std::uint32_t>(trainedFloats_),
                                                        static_cast<std::uint32_t>(decayedFloats_), stepParameter,
                                                        learningRateParameter, squaredNorm));
}

Plan CompiledGraph::trainingPlan(const Feed& feed) {
  Plan plan = unfinishedGradientPlan(feed);
  recordUpdate(plan);
  plan.finishPrograms();
  return plan;
}

Plan CompiledGraph::gradientPlan(const Feed& feed) {
  Plan plan = unfinishedGradientPlan(feed);
  plan.finishPrograms();
  return plan;
}

Plan CompiledGraph::unfinishedGradientPlan(const Feed& feed) {
  GLNET_ASSERT(loss_.has_value(), "a forward-only graph has no training plan");
  Plan plan = unfinishedForwardPlan(feed);
  recordBackward(plan);
  plan.groupIndependentSteps();
  return plan;
}

Plan CompiledGraph::updatePlan() {
  GLNET_ASSERT(loss_.has_value(), "a forward-only graph has no training plan");
  Plan plan(context_.limits());
  GLNET_ASSERT(plan.addParameter(1) == stepParameter, "the step is the first plan parameter");
  GLNET_ASSERT(plan.addParameter(0) == learningRateParameter, "the learning rate is the second plan parameter");
  setLearningRate(plan, optimizer_.learningRate);
  recordUpdate(plan);
  plan.finishPrograms();
  return plan;
}

void CompiledGraph::averageOver(std::uint32_t rows) {
  GLNET_ASSERT(rows >= rows_ && rows > 0, "the whole batch has at least this graph's rows");
  rowGradient_.upload(std::vector<float>(std::max<std::uint32_t>(rows_, 1), 1.0f / static_cast<float>(rows)));
}

Plan CompiledGraph::forwardPlan(const Feed& feed) {
  Plan plan = unfinishedForwardPlan(feed);
  plan.finishPrograms();
  return plan;
}

Plan CompiledGraph::unfinishedForwardPlan(const Feed& feed) {
  Plan plan(context_.limits());
  GLNET_ASSERT(plan.addParameter(1) == stepParameter, "the step is the first plan parameter");
  GLNET_ASSERT(plan.addParameter(0) == learningRateParameter, "the learning rate is the second plan parameter");
  setLearningRate(plan, optimizer_.learningRate);
  feed(plan);
  recordForward(plan);
  plan.groupIndependentSteps();
  return plan;
}

void CompiledGraph::setLearningRate(Plan& plan, float rate) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &rate, sizeof bits);
  plan.setParameter(learningRateParameter, bits);
}

void CompiledGraph::resetTotals() { resetPlan_->run(); }

std::vector<double> CompiledGraph::readTotals() const {
  const std::vector<float> values = totals_.read<float>();
  return {values.begin(), values.end()};
}

void CompiledGraph::upload(Tensor tensor, const void* data, std::size_t bytes) {
  const auto index = static_cast<std::size_t>(tensor.id);
  GLNET_ASSERT(bytes == elementCount(graph_.tensor(tensor).shape) * 4, "upload of the wrong size for " + graph_.tensor(tensor).name);
  if (values_.at(index)) {
    values_[index]->upload(data, bytes);
  } else if (placed_.size() > index && placed_[index]) {
    activations_.upload(data, bytes, *placed_[index]);
  } else {
    parameters_.upload(data, bytes, arenaOffset_[index] * sizeof(float));
    if (setupPlan_) setupPlan_->run();
  }
}

std::vector<std::vector<float>> CompiledGraph::readParameters() const { return splitArena(parameters_); }
std::vector<std::vector<float>> CompiledGraph::readGradients() const { return splitArena(gradients_); }

std::vector<std::vector<float>> CompiledGraph::splitArena(const Buffer& buffer) const {
  const std::vector<float> arena = buffer.read<float>();
  std::vector<std::vector<float>> values;
  for (const Tensor& parameter : graph_.parameters()) {
    const auto begin = arena.begin() + static_cast<std::ptrdiff_t>(arenaOffset_[static_cast<std::size_t>(parameter.id)]);
    values.emplace_back(begin, begin + static_cast<std::ptrdiff_t>(elementCount(graph_.tensor(parameter).shape)));
  }
  return values;
}

void CompiledGraph::writeParameters(const std::vector<std::vector<float>>& values) {
  writeArena(parameters_, values);
  if (setupPlan_) setupPlan_->run();
}

void CompiledGraph::writeArena(Buffer& arena, const std::vector<std::vector<float>>& values) {
  const std::vector<Tensor> parameters = graph_.parameters();
  GLNET_ASSERT(values.size() == parameters.size(), "one value list per parameter");
  for (std::size_t p = 0; p < parameters.size(); ++p) {
    const auto id = static_cast<std::size_t>(parameters[p].id);
    GLNET_ASSERT(values[p].size() == elementCount(graph_.tensors()[id].shape), "parameter size mismatch");
    arena.upload(values[p], arenaOffset_[id] * sizeof(float));
  }
}

std::vector<std::vector<std::vector<float>>> CompiledGraph::readOptimizerState() const {
  std::vector<std::vector<std::vector<float>>> state;
  for (const Buffer& buffer : state_) state.push_back(splitArena(buffer));
  return state;
}

void CompiledGraph::writeOptimizerState(const std::vector<std::vector<std::vector<float>>>& state) {
  GLNET_ASSERT(state.size() == state_.size(), "one state list per optimizer buffer");
  for (std::size_t s = 0; s < state.size(); ++s) writeArena(state_[s], state[s]);
}

}  // namespace glnet
