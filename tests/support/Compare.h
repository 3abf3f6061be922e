// Element-wise comparison of GPU output against a float64 reference: pass when
// |gpu − ref| ≤ atol + rtol·|ref| or both the same infinity; NaN (an unwritten, poisoned element) always fails.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <sstream>
#include <vector>

namespace glnet::test {

constexpr std::uint32_t nanPoison = 0x7fc00000u;

inline std::vector<double> widen(const std::vector<float>& values) { return {values.begin(), values.end()}; }

template <class Gpu>
void checkClose(const std::vector<Gpu>& gpu, const std::vector<double>& reference, double atol, double rtol) {
  REQUIRE(gpu.size() == reference.size());
  std::size_t mismatches = 0, worst = 0;
  double worstExcess = -1;
  std::ostringstream first;
  for (std::size_t i = 0; i < gpu.size(); ++i) {
    const bool same = static_cast<double>(gpu[i]) == reference[i];  // infinities too, whose error and allowance are NaN
    const double error = same ? 0.0 : std::abs(static_cast<double>(gpu[i]) - reference[i]);
    const double allowed = same ? 0.0 : atol + rtol * std::abs(reference[i]);
    const bool bad = !(error <= allowed);
    const double excess = std::isnan(error) ? INFINITY : error - allowed;
    if (excess > worstExcess) {
      worstExcess = excess;
      worst = i;
    }
    if (bad && ++mismatches <= 5) first << "  [" << i << "] gpu " << gpu[i] << " ref " << reference[i] << "\n";
  }
  INFO("worst at [" << worst << "]: gpu " << gpu[worst] << " ref " << reference[worst] << "; atol " << atol << " rtol "
                    << rtol << "\nfirst mismatches:\n"
                    << first.str());
  CHECK(mismatches == 0u);
}

// For inputs holding NaN: the GPU gives NaN exactly where the reference does, which must be somewhere (a reference that
// dropped NaN as the GPU does would otherwise pass), and is close elsewhere.
template <class Gpu>
void checkNanPropagated(const std::vector<Gpu>& gpu, const std::vector<double>& reference, double atol, double rtol) {
  REQUIRE(gpu.size() == reference.size());
  std::vector<Gpu> gpuNumbers;
  std::vector<double> referenceNumbers;
  std::size_t nans = 0, dropped = 0;
  for (std::size_t i = 0; i < gpu.size(); ++i) {
    if (std::isnan(reference[i])) {
      ++nans;
      dropped += std::isnan(static_cast<double>(gpu[i])) ? 0 : 1;
    } else {
      gpuNumbers.push_back(gpu[i]);
      referenceNumbers.push_back(reference[i]);
    }
  }
  CHECK(nans > 0u);
  CHECK(dropped == 0u);
  checkClose(gpuNumbers, referenceNumbers, atol, rtol);
}

}  // namespace glnet::test
