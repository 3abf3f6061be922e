// The pointwise functions of imported models (ONNX activations and elementwise functions), in shaders/Pointwise.glsl's
// POINTWISE define. A row: X(cppName, GLSL_SUFFIX, "printable name", "ONNX op type" that maps to it with no attribute
// (empty where attributes decide, or where its own row in importer/OnnxOps.cpp folds it on constants:
// importer/OnnxFusion.cpp), float64 reference of x with the constants alpha and beta).
// Not, IsNaN and IsInf write exactly 0 or 1 (ONNX's booleans, held as floats), a number for a NaN: NaN in gives NaN
// out does not apply to them. Not takes any nonzero value, NaN included, as true.
// Adding one: its row here, its case in shaders/Pointwise.glsl's pointwise(), a test row (tests/graph).
#pragma once

#include "numbers/KindList.h"

namespace glnet {

// clang-format off
#define GLNET_POINTWISE_KINDS(X)                                                                                      \
  X(identity, IDENTITY, "identity", "", x)                                                                             \
  X(relu, RELU, "relu", "Relu", std::max(x, 0.0))                                                                     \
  X(sigmoid, SIGMOID, "sigmoid", "Sigmoid", 1 / (1 + std::exp(-x)))                                                   \
  X(tanh, TANH, "tanh", "Tanh", std::tanh(x))                                                                         \
  X(clip, CLIP, "clip", "", std::min(std::max(x, double{alpha}), double{beta}))                                        \
  X(hardSigmoid, HARD_SIGMOID, "hard sigmoid", "", std::clamp(alpha * x + beta, 0.0, 1.0))                            \
  X(hardSwish, HARD_SWISH, "hard swish", "HardSwish", x * std::clamp(x / 6 + 0.5, 0.0, 1.0))                           \
  X(leakyRelu, LEAKY_RELU, "leaky relu", "", x >= 0 ? x : alpha * x)                                                  \
  X(erf, ERF, "erf", "Erf", std::erf(x))                                                                              \
  X(gelu, GELU, "gelu", "", 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))))                                             \
  X(geluTanh, GELU_TANH, "gelu (tanh)", "", 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)))) \
  X(sqrt, SQRT, "sqrt", "Sqrt", std::sqrt(x))                                                                         \
  X(pow, POW, "pow", "", std::pow(x, double{alpha}))                                                                  \
  X(exp, EXP, "exp", "Exp", std::exp(x))                                                                              \
  X(log, LOG, "log", "Log", std::log(x))                                                                              \
  X(negate, NEGATE, "negate", "Neg", -x)                                                                              \
  X(abs, ABS, "abs", "Abs", std::abs(x))                                                                              \
  X(reciprocal, RECIPROCAL, "reciprocal", "Reciprocal", 1 / x)                                                        \
  X(elu, ELU, "elu", "", x >= 0 ? x : alpha * (std::exp(x) - 1))                                                      \
  X(softplus, SOFTPLUS, "softplus", "Softplus", std::log1p(std::exp(x)))                                              \
  X(silu, SILU, "silu", "", x / (1 + std::exp(-x)))                                                                   \
  X(ceil, CEIL, "ceil", "Ceil", std::ceil(x))                                                                         \
  X(floor, FLOOR, "floor", "Floor", std::floor(x))                                                                    \
  X(round, ROUND, "round", "Round", std::nearbyint(x))                                                                \
  /* a cast to an integer type, and to bool: glnet's GPU holds both as floats (importer/Onnx.cpp's importIdentity) */  \
  X(trunc, TRUNC, "trunc", "", std::trunc(x))                                                                         \
  X(nonZero, NONZERO, "not zero", "", x != 0 ? 1.0 : 0.0)                                                             \
  X(sign, SIGN, "sign", "Sign", x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0)                                                      \
  X(sin, SIN, "sin", "Sin", std::sin(x))                                                                              \
  X(cos, COS, "cos", "Cos", std::cos(x))                                                                              \
  X(tan, TAN, "tan", "Tan", std::tan(x))                                                                              \
  X(asin, ASIN, "asin", "Asin", std::asin(x))                                                                         \
  X(acos, ACOS, "acos", "Acos", std::acos(x))                                                                         \
  X(atan, ATAN, "atan", "Atan", std::atan(x))                                                                         \
  X(sinh, SINH, "sinh", "Sinh", std::sinh(x))                                                                         \
  X(cosh, COSH, "cosh", "Cosh", std::cosh(x))                                                                         \
  X(asinh, ASINH, "asinh", "Asinh", std::asinh(x))                                                                    \
  X(acosh, ACOSH, "acosh", "Acosh", std::acosh(x))                                                                    \
  X(atanh, ATANH, "atanh", "Atanh", std::atanh(x))                                                                    \
  /* PyTorch's Threshold keeps a NaN */                                                                               \
  X(thresholdedRelu, THRESHOLDED_RELU, "thresholded relu", "", x > alpha || std::isnan(x) ? x : 0.0)                  \
  X(shrink, SHRINK, "shrink", "", x < -beta ? x + alpha : x > beta || std::isnan(x) ? x - alpha : 0.0)                 \
  X(celu, CELU, "celu", "", std::max(x, 0.0) + std::min(0.0, alpha * (std::exp(x / alpha) - 1)))                      \
  X(selu, SELU, "selu", "", beta * (x > 0 ? x : alpha * (std::exp(x) - 1)))                                           \
  X(softsign, SOFTSIGN, "softsign", "Softsign", x / (1 + std::abs(x)))                                              \
  X(mish, MISH, "mish", "Mish", x * std::tanh(std::log1p(std::exp(x))))                                              \
  X(logicalNot, NOT, "not", "", x == 0 ? 1.0 : 0.0)                                                                   \
  X(isNan, IS_NAN, "is nan", "", std::isnan(x) ? 1.0 : 0.0)                                                           \
  /* alpha: detect_negative, beta: detect_positive */                                                                 \
  X(isInf, IS_INF, "is inf", "", std::isinf(x) && (x < 0 ? alpha != 0 : beta != 0) ? 1.0 : 0.0)               \
  /* a token id's additive attention mask: −inf for the padding id alpha, else 0 (NaN kept) */                       \
  X(paddingMask, PADDING_MASK, "padding mask", "", std::isnan(x) ? x : x == alpha ? -INFINITY : 0.0)
// clang-format on

GLNET_KIND_LIST(PointwiseKind, GLNET_POINTWISE_KINDS, "POINTWISE");

}  // namespace glnet
