// Summaries of repeated timings, shared by the runners that report medians and the benchmarks.
#pragma once

#include <cstddef>
#include <vector>

namespace glnet {

struct Statistics {
  double median = 0, p10 = 0, p90 = 0;
  std::size_t runs = 0;
};
// Median (the mean of the middle two for an even count), 10th and 90th percentile (nearest rank) of `samples`.
Statistics summarize(std::vector<double> samples);

}  // namespace glnet
