// The activations the shaders fuse (ACTIVATION define, see shaders/common.glsl).
#pragma once

#include <string>

namespace glnet {

enum class Activation { none = 0, relu = 1, tanh = 2, sigmoid = 3 };
Activation parseActivation(const std::string& name);  // throws UsageError
const char* activationName(Activation activation);

}  // namespace glnet
