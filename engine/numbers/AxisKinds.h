// The functions along axes of shaders/AxisReduce.glsl (its AXIS_OP define; graph/AxisOps.cpp binds it). A row:
// X(cppName, GLSL_SUFFIX, "printable name"). The order matters: softmax and log-softmax come first (the shader's
// exponent-sum branch), then layer normalization; every kind from mean on reduces its axes (AxisOp::reduces), and
// l1 to logSum are the shader's sums of a function of x (its `AXIS_OP >= AXIS_OP_L1` branch after product and
// logSumExp are taken). l1 is Σ|x|, l2 sqrt(Σx²), sumSquare Σx², logSum log Σx, logSumExp log Σ exp x, product Πx.
// Adding one: its row here (in a place that keeps those ranges), its branch in shaders/AxisReduce.glsl, its
// float64 reference in graph/AxisOps.cpp (AxisOp::referenceForward, a switch without default: -Wswitch names a missing
// case), a test row (tests/graph).
#pragma once

#include "numbers/KindList.h"

namespace glnet {

#define GLNET_AXIS_KINDS(X)                                              \
  X(softmax, SOFTMAX, "softmax")                                         \
  X(logSoftmax, LOG_SOFTMAX, "log-softmax")                              \
  X(layerNormalization, LAYER_NORMALIZATION, "layer normalization")      \
  X(mean, MEAN, "reduce mean")                                           \
  X(sum, SUM, "reduce sum")                                              \
  X(max, MAX, "reduce max")                                              \
  X(min, MIN, "reduce min")                                              \
  /* 1/sqrt(variance + epsilon): LayerNormalization's InvStdDev */      \
  X(inverseDeviation, INVERSE_DEVIATION, "inverse deviation")            \
  X(l1, L1, "reduce l1")                                                 \
  X(l2, L2, "reduce l2")                                                 \
  X(sumSquare, SUM_SQUARE, "reduce sum of squares")                      \
  X(logSum, LOG_SUM, "reduce log-sum")                                   \
  X(logSumExp, LOG_SUM_EXP, "reduce log-sum-exp")                        \
  X(product, PRODUCT, "reduce product")

GLNET_KIND_LIST(AxisKind, GLNET_AXIS_KINDS, "AXIS_OP");

}  // namespace glnet
