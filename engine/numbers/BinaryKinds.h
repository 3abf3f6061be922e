// The binary functions of shaders/Broadcast.glsl (its BINARY_OP define; graph/BroadcastOps.cpp binds it). A row:
// X(cppName, GLSL_SUFFIX, "printable name").
// Adding one: its row here, its case in shaders/Broadcast.glsl's combine(), its float64 reference in
// ref/Reference.cpp (ref::combine, a switch without default: -Wswitch names a missing case; the importer folds
// constants with it too), a test row.
// Comparisons and the logical kinds write exactly 0 or 1 (ONNX's booleans, held as floats); the logical kinds take any
// nonzero value, NaN included, as true (as NumPy's bool(nan)); a comparison with a NaN is false (IEEE, NumPy).
#pragma once

#include "numbers/KindList.h"

namespace glnet {

#define GLNET_BINARY_KINDS(X)                           \
  X(add, ADD, "add")                                    \
  X(subtract, SUBTRACT, "subtract")                     \
  X(multiply, MULTIPLY, "multiply")                     \
  X(divide, DIVIDE, "divide")                           \
  /* the quotient of integers truncated toward zero (ONNX's Div of integer tensors), exact up to 2^24 */ \
  X(integerDivide, INTEGER_DIVIDE, "integer divide")    \
  X(power, POWER, "power")                              \
  X(maximum, MAXIMUM, "maximum")                        \
  X(minimum, MINIMUM, "minimum")                        \
  /* a where a ≥ 0, else a·b (PRelu's slope b) */       \
  X(prelu, PRELU, "prelu")                              \
  X(equal, EQUAL, "equal")                              \
  X(less, LESS, "less")                                 \
  X(lessOrEqual, LESS_OR_EQUAL, "less or equal")        \
  X(greater, GREATER, "greater")                        \
  X(greaterOrEqual, GREATER_OR_EQUAL, "greater or equal") \
  X(logicalAnd, AND, "and")                             \
  X(logicalOr, OR, "or")                                \
  X(logicalXor, XOR, "xor")                             \
  /* the remainder with the divisor's sign (Python's %, ONNX Mod's fmod = 0) */ \
  X(mod, MOD, "mod")                                    \
  /* the remainder with the dividend's sign (C's fmod, ONNX Mod's fmod = 1) */ \
  X(fmod, FMOD, "fmod")

GLNET_KIND_LIST(BinaryKind, GLNET_BINARY_KINDS, "BINARY_OP");

}  // namespace glnet
