// The parameter updates of shaders/Optimizer.glsl (its OPTIMIZER define; ops/Optimizer.cpp binds it). A row:
// X(cppName, GLSL_SUFFIX, "name", as --optimizer takes it).
#pragma once

#include "numbers/KindList.h"

namespace glnet {

#define GLNET_OPTIMIZER_KINDS(X)     \
  X(sgd, SGD, "sgd")                 \
  X(momentum, MOMENTUM, "momentum")  \
  X(adam, ADAM, "adam")              \
  X(adamw, ADAMW, "adamw")

GLNET_KIND_LIST(OptimizerKind, GLNET_OPTIMIZER_KINDS, "OPTIMIZER");

}  // namespace glnet
