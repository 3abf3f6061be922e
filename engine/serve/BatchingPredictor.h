// Dynamic batching for a server: callers on any thread queue images; one worker thread owns the GL
// context and a WarmClassifier and runs whatever is queued as one GPU batch. Requests that arrive while the
// GPU is busy, or within `maxDelay` of the oldest queued one, share a batch of up to `maxBatch` images.
#pragma once

#include "gl/Context.h"
#include "base/check.h"
#include "model/Classifier.h"
#include "model/Network.h"
#include "serve/Unavailable.h"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <mutex>
#include <thread>

namespace glnet {

struct BatchingOptions {
  std::size_t maxBatch = 64;                  // images per GPU batch
  std::chrono::microseconds maxDelay{500};    // how long the oldest request may wait for company
  std::size_t maxQueuedImages = 4096;         // beyond this, submit() refuses (Unavailable)
  bool batching = true;                       // false: every request runs alone, in arrival order
};

struct BatchingStats {
  std::uint64_t batches = 0;
  std::uint64_t images = 0;
  std::vector<std::size_t> batchSizeBounds;       // upper bounds of the batch-size histogram's buckets
  std::vector<std::uint64_t> batchSizeCounts;     // batches per bucket (not cumulative)
  std::size_t queuedImages = 0;
  std::size_t queuedRequests = 0;
};

class BatchingPredictor {
 public:
  // Starts the worker, which creates the context and compiles every plan; throws what that throws. A maxBatch larger
  // than the device takes for this network is lowered to the largest batch that fits (maxBatch() says which).
  BatchingPredictor(const ContextOptions& contextOptions, Network network, const BatchingOptions& options);
  // Drains the queue, then stops the worker.
  ~BatchingPredictor();
  BatchingPredictor(const BatchingPredictor&) = delete;
  BatchingPredictor& operator=(const BatchingPredictor&) = delete;

  // Queues `count` images (count × inputs() bytes); the future holds their predictions in order, or the
  // error that their batch met. Throws Unavailable when the queue is full or draining has begun.
  std::future<std::vector<Prediction>> submit(std::vector<std::uint8_t> pixels, std::size_t count);
  // Refuses new work, runs what is queued at once (no waiting for company) and returns once all is answered.
  void drain();

  std::size_t inputs() const { return inputs_; }
  std::size_t maxBatch() const { return options_.maxBatch; }
  const std::string& deviceName() const { return deviceName_; }
  BatchingStats stats() const;

 private:
  struct Request {
    std::vector<std::uint8_t> pixels;
    std::size_t count = 0;
    std::size_t taken = 0;  // images already put into a batch
    bool answered = false;
    std::vector<Prediction> predictions;
    std::promise<std::vector<Prediction>> promise;
    std::chrono::steady_clock::time_point arrival;
  };
  struct Slice {
    Request* request;
    std::size_t first, count;
  };
  void work(const ContextOptions& contextOptions, const Network& network, std::promise<void>& ready);
  std::vector<Slice> takeBatch(std::unique_lock<std::mutex>& lock);
  void countBatch(std::size_t batchImages);  // into the batch statistics; the lock is held

  BatchingOptions options_;
  std::size_t inputs_;
  std::string deviceName_;
  mutable std::mutex mutex_;
  std::condition_variable queued_, drained_;
  std::deque<Request> requests_;  // a deque keeps the requests of a running batch in place as others arrive
  std::size_t queuedImages_ = 0;
  bool stopping_ = false;
  std::uint64_t batches_ = 0, images_ = 0;
  std::vector<std::size_t> bounds_;
  std::vector<std::uint64_t> counts_;
  std::thread worker_;
};

}  // namespace glnet
