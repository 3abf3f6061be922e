// Bindings of shaders/ForwardPass.glsl and shaders/BackwardPass.glsl: the dense layer Y = act(X·Wᵀ + b)
// and its gradients, the activation (derivative) fused.
#pragma once

#include "ops/Activation.h"
#include "ops/Gemm.h"
#include "plan/Plan.h"
#include "plan/ProgramCache.h"

#include <optional>

namespace glnet {

struct DenseShape {
  std::uint32_t rows;     // M, the batch
  std::uint32_t inputs;   // K
  std::uint32_t outputs;  // N
};

class DenseOp {
 public:
  DenseOp(ProgramCache& programs, Activation activation, bool hasBias = true);
  // Split along K (two dispatches) when forwardSplit says so and a workspace of partial sums is given.
  std::vector<Dispatch> forward(const BufferView& x, const BufferView& weight, const BufferView& bias, const BufferView& y,
                                const DenseShape& shape, const std::optional<BufferView>& workspace = std::nullopt) const;
  static SplitK forwardSplit(const DenseShape& shape) { return chooseGemm(shape.rows, shape.outputs, shape.inputs).split; }
  // dX = (dY ⊙ act'(Y))·W, written or added (accumulate) to dX.
  Dispatch inputGradient(const BufferView& dy, const BufferView& y, const BufferView& weight, const BufferView& dx,
                         const DenseShape& shape, bool accumulate) const;
  // dW = (dY ⊙ act'(Y))ᵀ·X; split along the batch (two dispatches) when weightGradientSplit says so, with
  // its workspace of partial sums.
  std::vector<Dispatch> weightGradient(const BufferView& dy, const BufferView& y, const BufferView& x, const BufferView& dw,
                                       const DenseShape& shape, bool accumulate,
                                       const std::optional<BufferView>& workspace) const;
  static SplitK weightGradientSplit(const DenseShape& shape) { return chooseGemm(shape.outputs, shape.inputs, shape.rows).split; }
  // db = Σ_rows dY ⊙ act'(Y).
  Dispatch biasGradient(const BufferView& dy, const BufferView& y, const BufferView& db, const DenseShape& shape,
                        bool accumulate) const;
  Activation activation() const { return activation_; }

 private:
  Activation activation_;
  bool hasBias_;
  GemmPrograms forward_;
  SplitBiasActivationOp finishForward_;
  GemmPrograms inputGradient_;
  GemmPrograms weightGradient_;
  SplitSumOp splitSum_;
  const Program& biasGradient_;
};

}  // namespace glnet
