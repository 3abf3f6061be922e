#include "numbers/Activation.h"

#include "base/check.h"

namespace glnet {

Activation parseActivation(const std::string& name) {
  if (name == "relu") return Activation::relu;
  if (name == "tanh") return Activation::tanh;
  if (name == "sigmoid") return Activation::sigmoid;
  if (name == "none") return Activation::none;
  throw UsageError("unknown activation '" + name + "' (relu, tanh, sigmoid or none)");
}

const char* activationName(Activation activation) { return kindName(activation); }

}  // namespace glnet
