// Binding of shaders/Transpose.glsl: a row-major matrix transposed on the GPU (a large dense layer reads its
// forward operands and its pre-activation gradient transposed, in the layout where the GEMM core is fastest).
#pragma once

#include "numbers/Activation.h"
#include "plan/Plan.h"
#include "plan/ProgramCache.h"

namespace glnet {

class TransposeOp {
 public:
  explicit TransposeOp(ProgramCache& programs);
  // target [columns × rows] = sourceᵀ, source [rows × columns].
  Dispatch operator()(const BufferView& source, const BufferView& target, std::uint32_t rows, std::uint32_t columns,
                      std::string label) const;
  // dY ⊙= act'(Y) in place, dY and the layer's output Y [rows × columns], and target = the result transposed: the
  // pre-activation gradient dZ both ways. With no activation dY is dZ already: target = dYᵀ alone.
  Dispatch preActivationGradient(const BufferView& dy, const BufferView& y, const BufferView& target, std::uint32_t rows,
                                 std::uint32_t columns, Activation activation, std::string label) const;

 private:
  ProgramCache* programs_;
  const Program& plain_;
};

}  // namespace glnet
