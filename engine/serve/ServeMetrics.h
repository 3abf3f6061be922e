// What glnet_serve counts, rendered in Prometheus' text format for GET /metrics.
#pragma once

#include "serve/BatchingPredictor.h"
#include "serve/CompletionQueue.h"

#include <map>
#include <mutex>
#include <ostream>
#include <string>
#include <utility>

namespace glnet {

class ServeMetrics {
 public:
  // Latency bucket bounds in seconds (the histogram of /v1/predict).
  static const std::vector<double>& latencyBounds();

  // One answered request: its path and HTTP status.
  void count(const std::string& path, int status);
  // One request answered by the /v1/predict handler: its status, seconds in the handler, images classified.
  void observePrediction(int status, double seconds, std::size_t images);
  std::string prometheus(const BatchingStats& batching) const;
  // A language model's server: the requests, and the completions and tokens of `completions`.
  std::string prometheus(const CompletionStats& completions) const;

 private:
  void requests(std::ostream& out) const;  // the lock is held
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, std::uint64_t> requests_;
  std::vector<std::uint64_t> latencyCounts_ = std::vector<std::uint64_t>(latencyBounds().size() + 1, 0);
  double latencySum_ = 0;
  std::uint64_t latencyCount_ = 0;
  std::uint64_t images_ = 0;
};

}  // namespace glnet
