// The binary functions of shaders/Broadcast.glsl (its BINARY_OP define; graph/BroadcastOps.cpp binds it). A row:
// X(cppName, GLSL_SUFFIX, "printable name").
// Adding one: its row here, its case in shaders/Broadcast.glsl's combine(), its float64 reference in
// graph/BroadcastOps.cpp (combine, a switch without default: -Wswitch names a missing case), a test row.
#pragma once

#include "numbers/KindList.h"

namespace glnet {

#define GLNET_BINARY_KINDS(X)                           \
  X(add, ADD, "add")                                    \
  X(subtract, SUBTRACT, "subtract")                     \
  X(multiply, MULTIPLY, "multiply")                     \
  X(divide, DIVIDE, "divide")                           \
  X(power, POWER, "power")                              \
  X(maximum, MAXIMUM, "maximum")                        \
  X(minimum, MINIMUM, "minimum")                        \
  /* a where a ≥ 0, else a·b (PRelu's slope b) */       \
  X(prelu, PRELU, "prelu")

GLNET_KIND_LIST(BinaryKind, GLNET_BINARY_KINDS, "BINARY_OP");

}  // namespace glnet
