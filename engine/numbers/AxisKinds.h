// The functions along axes of shaders/AxisReduce.glsl (its AXIS_OP define; graph/AxisOps.cpp binds it). A row:
// X(cppName, GLSL_SUFFIX, "printable name", reduces, "ONNX op type", onnxForm, "description in glnet_info --ops"): `reduces` whether
// y drops the axes (y [outer, inner]) or keeps x's shape; the ONNX op type that imports as it with onnxForm `axis`
// (Softmax's form: one axis attribute, opset 13 on; before, the axes from axis on taken as one) or `axes` (the Reduce
// form: axes, keepdims, noop_with_empty_axes), or "" and `none` where an importer of its own builds it. The order is
// free: shaders and C++ compare kinds by name.
// Adding one: its row here, its branch in shaders/AxisReduce.glsl, its float64 reference in graph/AxisOps.cpp
// (AxisOp::referenceForward, a switch without default: -Wswitch names a missing case), a test row (tests/graph);
// with an ONNX op type and form, the importer's table and README's op table take it from the row.
#pragma once

#include "numbers/KindList.h"

#include <array>

namespace glnet {

// How an ONNX op type imports as an axis kind (see above).
enum class AxisOnnxForm { none, axis, axes };

// clang-format off
#define GLNET_AXIS_KINDS(X)                                                                                                                            \
  X(softmax, SOFTMAX, "softmax", false, "Softmax", axis, "softmax (opset 13 on: along one axis; before: over the axes from axis on)")                  \
  X(logSoftmax, LOG_SOFTMAX, "log-softmax", false, "LogSoftmax", axis, "log-softmax (opset 13 on: along one axis; before: over the axes from axis on)") \
  X(layerNormalization, LAYER_NORMALIZATION, "layer normalization", false, "", none, "(x − mean)/sqrt(var + epsilon)·gamma + beta")                    \
  X(rmsNormalization, RMS_NORMALIZATION, "rms normalization", false, "", none, "x/sqrt(mean(x²) + epsilon)·gamma")                                \
  X(mean, MEAN, "reduce mean", true, "ReduceMean", axes, "the mean over adjacent axes")                                                                \
  X(sum, SUM, "reduce sum", true, "ReduceSum", axes, "Σx over adjacent axes (axes as an input from opset 13)")                                         \
  X(max, MAX, "reduce max", true, "ReduceMax", axes, "the maximum over adjacent axes")                                                                 \
  X(min, MIN, "reduce min", true, "ReduceMin", axes, "the minimum over adjacent axes")                                                                 \
  /* LayerNormalization's InvStdDev */                                                                                                                 \
  X(inverseDeviation, INVERSE_DEVIATION, "inverse deviation", true, "", none, "1/sqrt(variance + epsilon)")                                            \
  X(l1, L1, "reduce l1", true, "ReduceL1", axes, "Σ|x| over adjacent axes")                                                                            \
  X(l2, L2, "reduce l2", true, "ReduceL2", axes, "sqrt(Σx²) over adjacent axes")                                                                       \
  X(sumSquare, SUM_SQUARE, "reduce sum of squares", true, "ReduceSumSquare", axes, "Σx² over adjacent axes")                                           \
  X(logSum, LOG_SUM, "reduce log-sum", true, "ReduceLogSum", axes, "log Σx over adjacent axes")                                                        \
  X(logSumExp, LOG_SUM_EXP, "reduce log-sum-exp", true, "ReduceLogSumExp", axes, "log Σ exp x over adjacent axes")                                     \
  X(product, PRODUCT, "reduce product", true, "ReduceProd", axes, "Πx over adjacent axes")                                                             \
  X(hardmax, HARDMAX, "hardmax", false, "Hardmax", axis, "1 at the first largest value, 0 elsewhere (opset 13 on: along one axis; before: over the axes from axis on)")
// clang-format on

GLNET_KIND_LIST(AxisKind, GLNET_AXIS_KINDS, "AXIS_OP");

// Whether the kind drops the axes it runs along.
inline bool axisKindReduces(AxisKind kind) {
#define GLNET_AXIS_REDUCES(cpp, glsl, name, reduces, ...) reduces,
  static constexpr bool reduces[] = {GLNET_AXIS_KINDS(GLNET_AXIS_REDUCES)};
#undef GLNET_AXIS_REDUCES
  return reduces[kindNumber(kind)];
}

// The row's ONNX op type, form and description, for the importer.
struct AxisOnnxOp {
  const char* type;
  AxisKind kind;
  AxisOnnxForm form;
  const char* description;
};
inline const std::array<AxisOnnxOp, kindCount<AxisKind>()>& axisOnnxOps() {
#define GLNET_AXIS_ONNX(cpp, glsl, name, reduces, onnx, form, description) AxisOnnxOp{onnx, AxisKind::cpp, AxisOnnxForm::form, description},
  static constexpr std::array<AxisOnnxOp, kindCount<AxisKind>()> ops{{GLNET_AXIS_KINDS(GLNET_AXIS_ONNX)}};
#undef GLNET_AXIS_ONNX
  return ops;
}

}  // namespace glnet
