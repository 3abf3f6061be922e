// A graph on the GPU: every tensor in a buffer, parameters and their gradients in one arena each, and the
// training step (forward, loss totals, reverse-mode backward, optimizer update) recorded into one Plan.
#pragma once

#include "gl/Context.h"
#include "graph/Graph.h"
#include "ops/Optimizer.h"

#include <functional>
#include <memory>
#include <optional>

namespace glnet {

class CompiledGraph {
 public:
  // `loss` is a per-row loss whose mean is minimised; `metrics` are per-row values summed beside it.
  CompiledGraph(const Context& context, const Graph& graph, Tensor loss, std::vector<Tensor> metrics,
                const OptimizerSettings& optimizer);
  // Forward only (inference): no loss, no gradients, no optimizer state. `memory` reused: computed tensors share
  // one arena by liveness (a tensor's bytes serve another once its last reader has run), and the ops one scratch
  // workspace; only the results (tensors no op reads), the inputs and `kept` may be read after a run.
  enum class Memory { kept, reused };
  CompiledGraph(const Context& context, const Graph& graph, Memory memory = Memory::kept, const std::vector<Tensor>& kept = {});
  // Device bytes of the computed tensors and the ops' workspaces (the activation memory a run needs); inputs and
  // parameters apart.
  std::size_t activationBytes() const { return activationBytes_; }

  // Records the dispatches that fill the graph's inputs for one step, first in the plan. Each plan below comes back
  // with its programs compiled (Plan::finishPrograms: side by side, a compile error thrown here).
  using Feed = std::function<void(Plan&)>;
  // Feed, forward, totals, backward, update. Plan parameter `stepParameter` is Adam's step t (from 1), and
  // `learningRateParameter` the learning rate (setLearningRate; the optimizer settings' at first).
  Plan trainingPlan(const Feed& feed);
  // The same step in two parts, so that data-parallel ranks sum their gradients in between: feed, forward,
  // totals, backward; then the update (with the same step parameter).
  Plan gradientPlan(const Feed& feed);
  Plan updatePlan();
  // For data-parallel ranks: the loss is the mean over `rows` rows of the whole batch, of which this graph
  // holds rows(), so that the ranks' gradients sum to the whole batch's.
  void averageOver(std::uint32_t rows);
  // Every parameter's gradient, in the order and at the offsets of the parameter arena.
  Buffer& gradientArena() { return gradients_; }
  // Feed, forward, totals: evaluation with the same buffers.
  Plan forwardPlan(const Feed& feed);
  static constexpr int stepParameter = stepPlanParameter;
  static constexpr int learningRateParameter = 1;
  static void setLearningRate(Plan& plan, float rate);

  // For the plan forwardPlan returned last: the op node (index into graph().ops()) that recorded each of its
  // dispatches, −1 for the feed's; the loss totals after them are not included.
  const std::vector<int>& forwardStepNodes() const { return stepNodes_; }

  BufferView view(Tensor tensor) const;
  // Host values for an input or parameter tensor (small problems and tests; datasets feed through the plan).
  void upload(Tensor tensor, const void* data, std::size_t bytes);
  const Graph& graph() const { return graph_; }
  // The loss's rows (the batch); 0 without a loss.
  std::uint32_t rows() const { return rows_; }

  // Totals since the last reset: [Σ loss, Σ metric 0, ...]. Reading them is a host synchronisation. The
  // reset is a dispatch, ordered after the plans already issued (a host upload was seen to be overtaken by
  // queued reductions on NVIDIA 580).
  void resetTotals();
  std::vector<double> readTotals() const;

  // Parameter values (and the gradients of the last step) in the order of graph().parameters().
  std::vector<std::vector<float>> readParameters() const;
  std::vector<std::vector<float>> readGradients() const;
  void writeParameters(const std::vector<std::vector<float>>& values);
  // The optimizer's state (none, one or two buffers: momentum's velocity, Adam's m and v), each split per
  // parameter like readParameters, so a checkpoint does not depend on a device's arena alignment.
  std::vector<std::vector<std::vector<float>>> readOptimizerState() const;
  void writeOptimizerState(const std::vector<std::vector<std::vector<float>>>& state);
  double compileMilliseconds() const { return programs_.compileMilliseconds(); }
  std::vector<std::pair<std::string, double>> compileTimes() const { return programs_.compileTimes(); }

 private:
  // The plans above before their programs are finished, so that a plan built from another compiles all of its at once.
  Plan unfinishedForwardPlan(const Feed& feed);
  Plan unfinishedGradientPlan(const Feed& feed);
  void recordForward(Plan& plan);
  void recordBackward(Plan& plan);
  void recordUpdate(Plan& plan);
  void allocate(bool training, Memory memory = Memory::kept, const std::vector<Tensor>& kept = {});
  GpuTensor outputOf(std::size_t node) const;
  std::vector<std::vector<float>> splitArena(const Buffer& arena) const;
  void writeArena(Buffer& arena, const std::vector<std::vector<float>>& values);

  const Context& context_;
  Graph graph_;
  std::optional<Tensor> loss_;
  std::vector<Tensor> metrics_;
  OptimizerSettings optimizer_;
  std::uint32_t rows_ = 0;
  ProgramCache programs_;
  std::size_t arenaFloats_ = 0;
  std::size_t decayedFloats_ = 0;  // the arena's weights (weight decay applies), first
  std::size_t trainedFloats_ = 0;  // then the other trained parameters; then the state
  Buffer squaredNorm_{sizeof(float)};  // Σ g² over the trained gradients, when clipping
  std::vector<std::size_t> arenaOffset_;  // per tensor, in floats (parameters)
  Buffer parameters_, gradients_;
  std::vector<Buffer> state_;
  std::vector<std::unique_ptr<Buffer>> values_, tensorGradients_;  // per tensor; null where the arena holds it or a view
  std::vector<int> storage_;                                        // per tensor: the tensor whose memory it uses
  std::vector<std::unique_ptr<Buffer>> workspaces_;                  // the ops' scratch memory
  std::vector<const Buffer*> workspaceOf_;                           // per op node: its workspace, or null
  std::vector<const Buffer*> scratchOf_;                             // per op node: its forward pass's own scratch, or null
  std::vector<bool> joined_;  // per op node, reused memory: a concatenation its inputs' producers did (MemoryPlan::joined)
  // Per op node, reused memory: the offset in activations_ of its scratch (an op that prepares) or its workspace (any
  // other), and their sizes.
  std::vector<std::optional<std::size_t>> runMemoryPlaced_;
  std::vector<std::size_t> scratchBytes_, workspaceBytes_;
  Buffer rowGradient_, totals_, zeros_;
  std::optional<Plan> resetPlan_;
  std::vector<int> stepNodes_;
  std::optional<Plan> setupPlan_;  // inference: the ops' preparations (Op::prepare)
  std::vector<bool> prepared_;     // per op node
  Buffer activations_{sizeof(float)};                // the arena of reused memory
  std::vector<std::optional<std::size_t>> placed_;  // per tensor: its byte offset in activations_
  std::size_t activationBytes_ = 0;
};

}  // namespace glnet
