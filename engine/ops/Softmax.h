// Binding of shaders/Softmax.glsl: row-wise softmax, and argmax to class indices.
#pragma once

#include "plan/Plan.h"

namespace glnet {

class SoftmaxOp {
 public:
  SoftmaxOp();
  // probabilities [rows × columns] from logits [rows × columns].
  Dispatch softmax(const Buffer& logits, const Buffer& probabilities, std::uint32_t rows, std::uint32_t columns) const;
  // classes[firstRow + r] = argmax of row r; `firstRow` a constant or a plan parameter (location 2).
  Dispatch argmax(const Buffer& logits, const Buffer& classes, std::uint32_t rows, std::uint32_t columns,
                  const Uniform& firstRow) const;
  static constexpr int firstRowLocation = 2;

 private:
  Program softmax_;
  Program argmax_;
};

}  // namespace glnet
