// The activations the shaders fuse (their ACTIVATION define, see shaders/common.glsl). A row:
// X(cppName, GLSL_SUFFIX, "name", as --activation and model files write it).
#pragma once

#include "numbers/KindList.h"

#include <string>

namespace glnet {

#define GLNET_ACTIVATIONS(X)       \
  X(none, NONE, "none")            \
  X(relu, RELU, "relu")            \
  X(tanh, TANH, "tanh")            \
  X(sigmoid, SIGMOID, "sigmoid")

GLNET_KIND_LIST(Activation, GLNET_ACTIVATIONS, "ACTIVATION");

Activation parseActivation(const std::string& name);  // throws UsageError
const char* activationName(Activation activation);

}  // namespace glnet
