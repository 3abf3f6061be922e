// Binding of shaders/Softmax.glsl: row-wise softmax, argmax, cross-entropy loss, its gradient, correctness.
#pragma once

#include "plan/Plan.h"
#include "plan/ProgramCache.h"

namespace glnet {

class SoftmaxOp {
 public:
  explicit SoftmaxOp(ProgramCache& programs);
  Dispatch softmax(const BufferView& logits, const BufferView& probabilities, std::uint32_t rows, std::uint32_t columns) const;
  // classes[firstRow + r] = argmax of row r; `firstRow` a constant or a plan parameter (location 2).
  Dispatch argmax(const BufferView& logits, const BufferView& classes, std::uint32_t rows, std::uint32_t columns,
                  const Uniform& firstRow) const;
  // loss[r] = −Σ q log softmax(logits)[r], q = (1 − smoothing)·onehot(labels[r]) + smoothing/columns.
  Dispatch crossEntropy(const BufferView& logits, const BufferView& labels, const BufferView& loss, std::uint32_t rows,
                        std::uint32_t columns, float smoothing = 0.0f) const;
  // dLogits = rowGradient[r] · (softmax − q).
  Dispatch crossEntropyGradient(const BufferView& logits, const BufferView& labels, const BufferView& rowGradient,
                                const BufferView& dLogits, std::uint32_t rows, std::uint32_t columns, bool accumulate,
                                float smoothing = 0.0f) const;
  // correct[r] = 1 when the row's argmax is labels[r], else 0.
  Dispatch correct(const BufferView& logits, const BufferView& labels, const BufferView& correct, std::uint32_t rows,
                   std::uint32_t columns) const;
  static constexpr int firstRowLocation = 2;

 private:
  Dispatch rowwise(const Program& program, const char* label, std::vector<StorageBinding> buffers, std::uint32_t rows,
                   std::uint32_t columns, const Uniform& firstRow, bool accumulate) const;
  const Program& softmax_;
  const Program& argmax_;
  const Program& crossEntropy_;
  const Program& crossEntropyGradient_;
  const Program& correct_;
};

}  // namespace glnet
