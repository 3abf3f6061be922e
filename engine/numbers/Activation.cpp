#include "numbers/Activation.h"

#include "base/check.h"

namespace glnet {

Activation parseActivation(const std::string& name) { return parseKind<Activation>(name, "activation"); }

const char* activationName(Activation activation) { return kindName(activation); }

}  // namespace glnet
