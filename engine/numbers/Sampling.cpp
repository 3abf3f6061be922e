#include "numbers/Sampling.h"

#include "base/check.h"

#include <cmath>
#include <limits>
#include <sstream>

namespace glnet {

#define GLNET_TEXT(x) #x
#define GLNET_EXPANDED_TEXT(x) GLNET_TEXT(x)

std::string drawBitsGlsl() { return GLNET_EXPANDED_TEXT(GLNET_DRAW_BITS); }

namespace {
std::string text(float value) {
  std::ostringstream out;
  out << value;
  return out.str();
}
}  // namespace

void SamplingSettings::check() const {
  if (!(temperature >= 0) || std::isinf(temperature))
    throw UsageError(optionName("temperature") + " must be a finite number ≥ 0 (0: greedy), not " + text(temperature));
  // A denormal one is 0 where the GPU flushes denormals, and (z − M)/0 is NaN for the largest logit.
  if (temperature > 0 && temperature < std::numeric_limits<float>::min())
    throw UsageError(optionName("temperature") + " " + text(temperature) + " is too small to divide by on a GPU: give 0 for greedy");
  if (!(topP > 0 && topP <= 1)) throw UsageError(optionName("top-p") + " must be in (0, 1] (1: off), not " + text(topP));
}

}  // namespace glnet
