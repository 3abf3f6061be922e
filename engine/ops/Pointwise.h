// The pointwise functions of imported models (ONNX activations and elementwise functions; their list is
// numbers/PointwiseKinds.h): their float64 reference, and the defines that select one in a shader that applies it
// after its own result.
#pragma once

#include "gl/Program.h"
#include "numbers/PointwiseKinds.h"

#include <string>
#include <vector>

namespace glnet {

// A pointwise function with its constants (Clip's min and max, HardSigmoid's alpha and beta, LeakyRelu's, Elu's,
// Celu's and ThresholdedRelu's alpha, Selu's alpha and gamma, Shrink's bias and lambd, Pow's exponent as alpha); the
// numbers of shaders/Pointwise.glsl.
struct Pointwise {
  PointwiseKind kind = PointwiseKind::identity;
  float alpha = 0.0f, beta = 0.0f;
  double operator()(double x) const;
  // Whether it trains (PointwiseOp's backward: HardSwish, exact Gelu and SiLU), and its derivative there.
  bool trainable() const;
  double derivative(double x) const;
  std::string name() const;
  std::vector<ShaderDefine> defines() const;
  // What a kernel that may apply it after its own result needs: its defines and Pointwise.glsl, none for identity
  // (the kernel then compiles as it did without the function).
  std::vector<ShaderDefine> fusedDefines() const;
  std::vector<std::string> fusedIncludes() const;
};

}  // namespace glnet
