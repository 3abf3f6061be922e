// A device self-check: y = a·x + y on the GPU, verified element by element against the CPU.
#pragma once

#include "gl/Context.h"

#include <cstddef>
#include <cstdint>

namespace glnet {

struct SelfCheckResult {
  std::size_t elements = 0;
  std::size_t mismatches = 0;
  double maxAbsoluteError = 0;
  double compileMilliseconds = 0;
  double uploadMilliseconds = 0;       // host time to copy x and y to the device
  double dispatchGpuMilliseconds = 0;  // GPU time of the dispatch, from timestamp queries
  double readbackMilliseconds = 0;     // host time to wait for and copy y back
  bool passed() const { return mismatches == 0; }
};

// Inputs are uniform in [-1, 1) from `seed`; a result passes when
// |gpu − ref| ≤ 1e-6 + 1e-6·|ref| (one fp32 multiply-add, fused or not, against a double reference).
SelfCheckResult runSelfCheck(const Context& context, std::size_t elements, std::uint32_t seed = 1);

}  // namespace glnet
