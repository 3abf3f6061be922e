#include "plan/Statistics.h"

#include <algorithm>
#include <cmath>

namespace glnet {

Statistics summarize(std::vector<double> samples) {
  Statistics statistics;
  statistics.runs = samples.size();
  if (samples.empty()) return statistics;
  std::sort(samples.begin(), samples.end());
  const auto rank = [&](double q) {
    return samples[std::min(samples.size() - 1, static_cast<std::size_t>(std::ceil(q * static_cast<double>(samples.size()))) - (q > 0 ? 1 : 0))];
  };
  statistics.median = samples.size() % 2 ? samples[samples.size() / 2]
                                         : (samples[samples.size() / 2 - 1] + samples[samples.size() / 2]) / 2;
  statistics.p10 = rank(0.1);
  statistics.p90 = rank(0.9);
  return statistics;
}

}  // namespace glnet
