// The functions of shaders/Elementwise.glsl (its ELEMENTWISE_OP define; ops/Elementwise.cpp binds it). A row:
// X(cppName, GLSL_SUFFIX, "printable name").
#pragma once

#include "numbers/KindList.h"

namespace glnet {

#define GLNET_ELEMENTWISE_KINDS(X)                                         \
  X(activation, ACTIVATION, "activation")                                  \
  X(activationGradient, ACTIVATION_GRADIENT, "activation gradient")        \
  X(add, ADD, "add")                                                       \
  X(multiply, MULTIPLY, "multiply")                                        \
  X(biasAdd, BIAS_ADD, "bias add")                                         \
  X(copy, COPY, "copy")                                                    \
  X(scale, SCALE, "scale")                                                 \
  X(scaleMultiplyActivate, SCALE_MULTIPLY_ACTIVATE, "scale-weigh-activate")

GLNET_KIND_LIST(ElementwiseKind, GLNET_ELEMENTWISE_KINDS, "ELEMENTWISE_OP");

}  // namespace glnet
