// Binding of shaders/Transpose.glsl: a row-major matrix transposed on the GPU (the dense forward pass of a large
// layer reads its operands transposed, in the layout where the GEMM core is fastest).
#pragma once

#include "plan/Plan.h"
#include "plan/ProgramCache.h"

namespace glnet {

class TransposeOp {
 public:
  explicit TransposeOp(ProgramCache& programs);
  // target [columns × rows] = sourceᵀ, source [rows × columns].
  Dispatch operator()(const BufferView& source, const BufferView& target, std::uint32_t rows, std::uint32_t columns,
                      std::string label) const;

 private:
  const Program& program_;
};

}  // namespace glnet
