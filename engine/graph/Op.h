// The extension point of the graph: an operator is its output shape rule, its GPU forward and backward
// (dispatches recorded into a Plan), and its float64 reference forward and backward.
#pragma once

#include "plan/Plan.h"
#include "plan/ProgramCache.h"

#include <optional>
#include <string>
#include <vector>

namespace glnet {

using Shape = std::vector<std::uint32_t>;
std::size_t elementCount(const Shape& shape);
std::string describe(const Shape& shape);  // "[64, 784]"

struct GpuTensor {
  BufferView view;
  Shape shape;
  // For an op's output: the scratch memory it asked for with workspaceBytes, kept from forward to backward.
  std::optional<BufferView> workspace = std::nullopt;
  // For an op that prepares (Op::preparedInputs): its prepare dispatches have run, and the workspace holds their result.
  bool prepared = false;
  // For a preparing op's output in an inference graph: memory its forward pass alone uses (Winograd's transformed
  // tiles), shared with the other ops' scratch; preparedScratchBytes asks for it.
  std::optional<BufferView> scratch = std::nullopt;
};

// Where an input's gradient goes: written, or added to what earlier consumers of the input wrote.
struct GradientTarget {
  BufferView view;
  bool accumulate;
};

// Plan parameter 0 of every plan a CompiledGraph records: the training step (from 1), which Adam's bias correction and
// the ops that draw random numbers (dropout) read.
constexpr int stepPlanParameter = 0;

struct HostTensor64 {
  const std::vector<double>* values;
  Shape shape;
};

class Op {
 public:
  virtual ~Op() = default;
  virtual std::string name() const = 0;
  // Throws glnet::Error naming the op and the shapes when the inputs do not fit together.
  virtual Shape outputShape(const std::vector<Shape>& inputs) const = 0;
  // Inputs holding class indices (uint32 on the GPU) rather than floats; never differentiated.
  virtual bool isIndexInput(std::size_t /*input*/) const { return false; }
  // Whether gradients flow into this input (not into labels or regression targets).
  virtual bool passesGradient(std::size_t input) const { return !isIndexInput(input); }
  // False for metrics such as accuracy, whose output carries no gradient.
  virtual bool differentiable() const { return true; }
  // Scratch bytes the op keeps from forward to backward (max pooling's argmax), or 0.
  virtual std::size_t workspaceBytes(const std::vector<Shape>& /*inputs*/) const { return 0; }
  // The part of workspaceBytes that the forward pass alone uses: what an inference graph gives the op.
  virtual std::size_t inferenceWorkspaceBytes(const std::vector<Shape>& inputs) const { return workspaceBytes(inputs); }
  // A view reinterprets its first input's memory (flatten): it records no dispatch, and its gradient is
  // its input's gradient.
  virtual bool isView() const { return false; }
  // The axis along which the output is the inputs one after another (a concatenation), or none. Where every
  // dimension before it is 1 (NCHW channels at batch 1) each input is a contiguous part of the output, so an
  // inference graph may have the producers write there and leave the op out (MemoryPlan::joined).
  virtual std::optional<std::uint32_t> joinedAxis() const { return std::nullopt; }
  // Inputs whose memory an inference graph may give the output where this op is their last reader (MemoryPlan): the
  // forward pass reads such an input's element only in the invocation that writes the output's element at the same
  // position, before it writes it (elementwise ops, a GEMM's residual in its epilogue).
  virtual std::vector<std::size_t> inPlaceInputs() const { return {}; }

  virtual void forward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& inputs,
                       const GpuTensor& output) const = 0;
  // Dispatches that read only inputs 1 to preparedInputs() (a convolution's transposed weights, in its workspace):
  // an inference graph whose op has parameters there, which stay put, runs them once and records forward with
  // output.prepared set, which then leaves them out. 0: the op prepares nothing.
  virtual std::size_t preparedInputs() const { return 0; }
  // The workspace bytes an inference graph gives a preparing op (kept from prepare to every forward), in place of
  // workspaceBytes, which also covers training's scratch.
  virtual std::size_t preparedBytes(const std::vector<Shape>& /*inputs*/) const { return 0; }
  // Scratch bytes a preparing op's forward pass needs besides what it prepared (GpuTensor::scratch), or 0.
  virtual std::size_t preparedScratchBytes(const std::vector<Shape>& /*inputs*/) const { return 0; }
  virtual void prepare(ProgramCache& /*programs*/, Plan& /*plan*/, const std::vector<GpuTensor>& /*inputs*/, const GpuTensor& /*output*/) const {}
  // Records the gradient of every input that has a target, given the gradient of the output. The output's
  // gradient is this op's alone by then: the op may overwrite it (a convolution turns it into the gradient of its
  // pre-activation in place).
  virtual void backward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& inputs, const GpuTensor& output,
                        const GpuTensor& outputGradient, const std::vector<std::optional<GradientTarget>>& targets) const = 0;

  virtual std::vector<double> referenceForward(const std::vector<HostTensor64>& inputs) const = 0;
  // One gradient per input (empty where passesGradient is false).
  virtual std::vector<std::vector<double>> referenceBackward(const std::vector<HostTensor64>& inputs,
                                                             const std::vector<double>& output,
                                                             const std::vector<double>& outputGradient) const = 0;
};

}  // namespace glnet
