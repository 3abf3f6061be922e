// Binding of shaders/ForwardPass.glsl: Y = act(X·Wᵀ + b), bias and activation fused.
#pragma once

#include "model/Mlp.h"
#include "plan/Plan.h"

namespace glnet {

struct DenseShape {
  std::uint32_t rows;     // M, the batch
  std::uint32_t inputs;   // K
  std::uint32_t outputs;  // N
};

class DenseOp {
 public:
  explicit DenseOp(Activation activation);
  Dispatch forward(const Buffer& x, const Buffer& weight, const Buffer& bias, const Buffer& y,
                   const DenseShape& shape) const;
  Activation activation() const { return activation_; }

 private:
  Activation activation_;
  Program program_;
};

}  // namespace glnet
