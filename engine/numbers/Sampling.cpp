#include "numbers/Sampling.h"

#include "base/check.h"

#include <cmath>

namespace glnet {

#define GLNET_TEXT(x) #x
#define GLNET_EXPANDED_TEXT(x) GLNET_TEXT(x)

std::string drawBitsGlsl() { return GLNET_EXPANDED_TEXT(GLNET_DRAW_BITS); }

void SamplingSettings::check() const {
  if (!(temperature >= 0) || std::isinf(temperature))
    throw UsageError(optionName("temperature") + " must be a finite number ≥ 0 (0: greedy), not " + std::to_string(temperature));
  if (!(topP > 0 && topP <= 1))
    throw UsageError(optionName("top-p") + " must be in (0, 1] (1: off), not " + std::to_string(topP));
}

}  // namespace glnet
