#include "serve/ServeMetrics.h"

#include <algorithm>
#include <sstream>

namespace glnet {

const std::vector<double>& ServeMetrics::latencyBounds() {
  static const std::vector<double> bounds{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
  return bounds;
}

void ServeMetrics::count(const std::string& path, int status) {
  const std::lock_guard<std::mutex> lock(mutex_);
  ++requests_[{path, status}];
}

void ServeMetrics::observePrediction(int status, double seconds, std::size_t images) {
  const std::lock_guard<std::mutex> lock(mutex_);
  ++requests_[{"/v1/predict", status}];
  images_ += images;
  const std::vector<double>& bounds = latencyBounds();
  ++latencyCounts_[static_cast<std::size_t>(std::lower_bound(bounds.begin(), bounds.end(), seconds) - bounds.begin())];
  latencySum_ += seconds;
  ++latencyCount_;
}

void ServeMetrics::requests(std::ostream& out) const {
  out << "# HELP glnet_requests_total HTTP requests answered, by path and status.\n"
         "# TYPE glnet_requests_total counter\n";
  for (const auto& [key, count] : requests_) {
    out << "glnet_requests_total{path=\"" << key.first << "\",code=\"" << key.second << "\"} " << count << "\n";
  }
  std::uint64_t errors = 0;
  for (const auto& [key, count] : requests_) errors += key.second >= 400 ? count : 0;
  out << "# HELP glnet_request_errors_total HTTP requests answered with a 4xx or 5xx status.\n"
         "# TYPE glnet_request_errors_total counter\nglnet_request_errors_total "
      << errors << "\n";
}

std::string ServeMetrics::prometheus(const BatchingStats& batching) const {
  const std::lock_guard<std::mutex> lock(mutex_);
  std::ostringstream out;
  requests(out);
  out << "# HELP glnet_images_total Images classified.\n# TYPE glnet_images_total counter\nglnet_images_total " << images_ << "\n";

  out << "# HELP glnet_request_duration_seconds Time in the /v1/predict handler, from the parsed request to its answer.\n"
         "# TYPE glnet_request_duration_seconds histogram\n";
  std::uint64_t cumulative = 0;
  const std::vector<double>& bounds = latencyBounds();
  for (std::size_t i = 0; i < bounds.size(); ++i) {
    cumulative += latencyCounts_[i];
    out << "glnet_request_duration_seconds_bucket{le=\"" << bounds[i] << "\"} " << cumulative << "\n";
  }
  out << "glnet_request_duration_seconds_bucket{le=\"+Inf\"} " << latencyCount_ << "\n"
      << "glnet_request_duration_seconds_sum " << latencySum_ << "\n"
      << "glnet_request_duration_seconds_count " << latencyCount_ << "\n";

  out << "# HELP glnet_batch_size Images per GPU batch.\n# TYPE glnet_batch_size histogram\n";
  cumulative = 0;
  for (std::size_t i = 0; i < batching.batchSizeBounds.size(); ++i) {
    cumulative += batching.batchSizeCounts[i];
    out << "glnet_batch_size_bucket{le=\"" << batching.batchSizeBounds[i] << "\"} " << cumulative << "\n";
  }
  out << "glnet_batch_size_bucket{le=\"+Inf\"} " << batching.batches << "\n"
      << "glnet_batch_size_sum " << batching.images << "\n"
      << "glnet_batch_size_count " << batching.batches << "\n";
  out << "# HELP glnet_queue_images Images waiting for a GPU batch.\n# TYPE glnet_queue_images gauge\nglnet_queue_images "
      << batching.queuedImages << "\n";
  out << "# HELP glnet_queue_requests Requests waiting for their answer.\n# TYPE glnet_queue_requests gauge\nglnet_queue_requests "
      << batching.queuedRequests << "\n";
  return out.str();
}

std::string ServeMetrics::prometheus(const CompletionStats& completions) const {
  const std::lock_guard<std::mutex> lock(mutex_);
  std::ostringstream out;
  requests(out);
  out << "# HELP glnet_completions_total Completions by how they ended: completed, failed, cancelled (the client left), or "
         "refused (the queue was full).\n# TYPE glnet_completions_total counter\n";
  const std::pair<const char*, std::uint64_t> outcomes[] = {
      {"completed", completions.completed}, {"failed", completions.failed}, {"cancelled", completions.cancelled}, {"refused", completions.refused}};
  for (const auto& [outcome, count] : outcomes) out << "glnet_completions_total{outcome=\"" << outcome << "\"} " << count << "\n";
  out << "# HELP glnet_prompt_tokens_total Prompt tokens of the completions started.\n# TYPE glnet_prompt_tokens_total counter\n"
         "glnet_prompt_tokens_total "
      << completions.promptTokens << "\n";
  out << "# HELP glnet_generated_tokens_total Tokens generated.\n# TYPE glnet_generated_tokens_total counter\nglnet_generated_tokens_total "
      << completions.generatedTokens << "\n";
  out << "# HELP glnet_decode_steps_total GPU decode steps, each advancing every running completion by a token.\n"
         "# TYPE glnet_decode_steps_total counter\nglnet_decode_steps_total "
      << completions.decodeSteps << "\n";
  out << "# HELP glnet_queue_requests Completions waiting to start.\n# TYPE glnet_queue_requests gauge\nglnet_queue_requests "
      << completions.waiting << "\n";
  out << "# HELP glnet_running_completions Completions being generated.\n# TYPE glnet_running_completions gauge\nglnet_running_completions "
      << completions.running << "\n";
  return out.str();
}

}  // namespace glnet
