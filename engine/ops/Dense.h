// Bindings of shaders/ForwardPass.glsl and shaders/BackwardPass.glsl: the dense layer Y = act(X·Wᵀ + b)
// and its gradients, the activation (derivative) fused.
#pragma once

#include "numbers/Activation.h"
#include "ops/Gemm.h"
#include "ops/Pointwise.h"
#include "ops/Transpose.h"
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
  // `after`: an imported model's function applied after the activation; `residual`: forward reads a tensor shaped as
  // Y added before the activation (a residual connection). Both inference only: the gradients take neither.
  DenseOp(ProgramCache& programs, Activation activation, bool hasBias = true, const Pointwise& after = {}, bool residual = false);
  // With a workspace of forwardWorkspaceBytes: a large layer (transposesOperands) transposes X and W into it and
  // runs its GEMM on the transposes (three dispatches); a layer with bias splits along K (two dispatches) when the
  // rule says so. Otherwise, or with no workspace, one dispatch; a few rows (fewRows) one of DenseFewRows.glsl.
  std::vector<Dispatch> forward(const BufferView& x, const BufferView& weight, const BufferView& bias, const BufferView& y,
                                const DenseShape& shape, const std::optional<BufferView>& workspace = std::nullopt,
                                const BufferView* residual = nullptr) const;
  static std::size_t forwardWorkspaceBytes(const DenseShape& shape, bool hasBias);
  // A batch of 1 to 4 rows: the forward pass reads the weights once in coalesced runs (DenseFewRows.glsl) instead of
  // through a GEMM's tiles (on the H100, vgg11's 25088 -> 4096 layer at batch 1: 0.51 ms as a split GEMM).
  static bool fewRows(const DenseShape& shape) { return shape.rows <= 4; }
  // That pass alone, with `after` (an imported model's function) applied after the activation: also what a 1x1
  // convolution of 1x1 planes at a batch of 1 to 4 runs as (a squeeze-excite block's two layers).
  static Dispatch fewRowsForward(ProgramCache& programs, Activation activation, bool hasBias, const Pointwise& after,
                                 const BufferView& x, const BufferView& weight, const BufferView& bias, const BufferView& y,
                                 const DenseShape& shape, const BufferView* residual = nullptr);
  // Whether the forward pass reads X and W transposed (Xᵀ [K×M], Wᵀ [K×N]): the layout in which the GEMM core
  // runs both operands along its tile, its fastest (on the H100, 4096³: 24 TFLOP/s on X·Wᵀ, 40 with the
  // transposes), for two copies that cost little beside a GEMM of at least 512 in every dimension and 2^31
  // multiply-adds.
  static bool transposesOperands(const DenseShape& shape);
  // dX = (dY ⊙ act'(Y))·W, written or added (accumulate) to dX.
  Dispatch inputGradient(const BufferView& dy, const BufferView& y, const BufferView& weight, const BufferView& dx,
                         const DenseShape& shape, bool accumulate) const;
  // A layer that transposesOutputGradient runs dX on dZᵀ and W instead, both along the GEMM core's tile: first
  // dY ⊙= act'(Y) in place, so that dY becomes dZ (which dW and db then read with an op of Activation::none), and
  // dZᵀ into `dzT` (inputGradientWorkspaceBytes), then dX = (dZᵀ)ᵀ·W.
  Dispatch preActivationGradient(const BufferView& dy, const BufferView& y, const BufferView& dzT, const DenseShape& shape) const;
  Dispatch inputGradientOnTransposed(const BufferView& dzT, const BufferView& weight, const BufferView& dx,
                                     const DenseShape& shape, bool accumulate) const;
  // A large layer (transposesOperands) with at least 1024 inputs, over which the transpose of dZ is amortised: on
  // the H100, 4096³ dX 4.20 -> 3.39 ms and 1024×4096×4096 1.07 -> 0.88 ms, but 1024×784×4096 0.30 -> 0.37 ms,
  // where no configuration on dZᵀ beats the plain layout by the 0.02 ms the transpose takes (bench/NOTES-gemm.md
  // row 24).
  static bool transposesOutputGradient(const DenseShape& shape);
  // dZᵀ, rounded up to 256 bytes (the largest storage buffer offset alignment GL allows), so that more may follow.
  static std::size_t inputGradientWorkspaceBytes(const DenseShape& shape);
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
  // The function the forward pass applies last, as its dispatches' labels name it.
  std::string functionName() const;
  ProgramCache* programs_;
  Activation activation_;
  bool hasBias_;
  Pointwise after_;
  bool residual_;
  GemmPrograms forward_;
  GemmPrograms forwardTransposed_;
  TransposeOp transpose_;
  SplitBiasActivationOp finishForward_;
  GemmPrograms inputGradient_;
  GemmPrograms inputGradientTransposed_;
  GemmPrograms weightGradient_;
  SplitSumOp splitSum_;
  const Program& biasGradient_;
};

}  // namespace glnet
