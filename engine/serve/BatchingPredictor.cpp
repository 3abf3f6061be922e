#include "serve/BatchingPredictor.h"

#include "base/log.h"
#include "serve/WarmClassifier.h"

#include <algorithm>

namespace glnet {

BatchingPredictor::BatchingPredictor(const ContextOptions& contextOptions, Network network, const BatchingOptions& options)
    : options_(options), inputs_(network.inputs()) {
  if (options_.maxBatch == 0) throw Error("the largest batch must hold at least one image");
  // The worker owns the promise: the constructor may return (and its frame go) while set_value finishes.
  std::promise<void> ready;
  std::future<void> started = ready.get_future();
  worker_ = std::thread([this, contextOptions, network = std::move(network), ready = std::move(ready)]() mutable {
    work(contextOptions, network, ready);
  });
  try {
    started.get();
  } catch (...) {
    worker_.join();
    throw;
  }
}

BatchingPredictor::~BatchingPredictor() {
  drain();
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  queued_.notify_all();
  worker_.join();
}

std::future<std::vector<Prediction>> BatchingPredictor::submit(std::vector<std::uint8_t> pixels, std::size_t count) {
  if (count == 0 || pixels.size() != count * inputs_) {
    throw Error("a request holds whole images of " + std::to_string(inputs_) + " pixels");
  }
  std::future<std::vector<Prediction>> answer;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) throw Unavailable("the server is shutting down");
    if (queuedImages_ > 0 && queuedImages_ + count > options_.maxQueuedImages) {
      throw Unavailable("the queue holds " + std::to_string(queuedImages_) + " images, its limit is " +
                      std::to_string(options_.maxQueuedImages));
    }
    Request& request = requests_.emplace_back();
    request.pixels = std::move(pixels);
    request.count = count;
    request.arrival = std::chrono::steady_clock::now();
    answer = request.promise.get_future();
    queuedImages_ += count;
  }
  queued_.notify_one();
  return answer;
}

void BatchingPredictor::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  stopping_ = true;
  queued_.notify_all();  // a worker waiting for company runs what it has now
  drained_.wait(lock, [&] { return requests_.empty(); });
}

BatchingStats BatchingPredictor::stats() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return {batches_, images_, bounds_, counts_, queuedImages_, requests_.size()};
}

void BatchingPredictor::countBatch(std::size_t batchImages) {
  ++batches_;
  images_ += batchImages;
  const auto bucket = std::lower_bound(bounds_.begin(), bounds_.end(), batchImages) - bounds_.begin();
  ++counts_[static_cast<std::size_t>(bucket)];
}

// Waits for work, lets the oldest request wait up to maxDelay for others, and takes up to maxBatch images
// from the front of the queue (a request larger than that spans several batches). Without batching it takes
// the front request's images only.
std::vector<BatchingPredictor::Slice> BatchingPredictor::takeBatch(std::unique_lock<std::mutex>& lock) {
  queued_.wait(lock, [&] { return !requests_.empty() || stopping_; });
  if (requests_.empty()) return {};
  if (options_.batching) {
    const auto deadline = requests_.front().arrival + options_.maxDelay;
    queued_.wait_until(lock, deadline, [&] { return stopping_ || queuedImages_ >= options_.maxBatch; });
  }
  std::vector<Slice> batch;
  std::size_t images = 0;
  for (Request& request : requests_) {
    if (images == options_.maxBatch) break;
    if (request.taken == request.count) continue;  // wholly in an earlier batch
    const std::size_t count = std::min(request.count - request.taken, options_.maxBatch - images);
    batch.push_back({&request, request.taken, count});
    request.taken += count;
    images += count;
    if (!options_.batching) break;
  }
  return batch;
}

void BatchingPredictor::work(const ContextOptions& contextOptions, const Network& network, std::promise<void>& ready) {
  std::unique_ptr<Context> context;
  std::unique_ptr<WarmClassifier> classifier;
  try {
    context = std::make_unique<Context>(contextOptions);
    deviceName_ = context->device().renderer;
    classifier = std::make_unique<WarmClassifier>(*context, network, options_.maxBatch);
    // Set before any request can arrive (the constructor has not returned), so the lock is not needed.
    options_.maxBatch = classifier->capacity();
    for (std::size_t bound = 1; bound < options_.maxBatch; bound *= 2) bounds_.push_back(bound);
    bounds_.push_back(options_.maxBatch);
    counts_.assign(bounds_.size(), 0);
    ready.set_value();
  } catch (...) {
    ready.set_exception(std::current_exception());
    return;
  }

  std::vector<std::uint8_t> pixels;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    const std::vector<Slice> batch = takeBatch(lock);
    if (batch.empty()) break;
    std::size_t images = 0;
    for (const Slice& slice : batch) images += slice.count;
    pixels.resize(images * inputs_);
    lock.unlock();

    std::size_t at = 0;
    for (const Slice& slice : batch) {
      std::copy_n(slice.request->pixels.begin() + static_cast<std::ptrdiff_t>(slice.first * inputs_), slice.count * inputs_,
                  pixels.begin() + static_cast<std::ptrdiff_t>(at * inputs_));
      at += slice.count;
    }
    std::exception_ptr failure;
    std::vector<Prediction> predictions;
    try {
      predictions = classifier->classify(pixels.data(), images);
    } catch (...) {
      failure = std::current_exception();
      log::error("a batch of " + std::to_string(images) + " images failed");
    }

    lock.lock();
    countBatch(images);
    at = 0;
    for (const Slice& slice : batch) {
      Request& request = *slice.request;
      if (!failure) {
        request.predictions.insert(request.predictions.end(), predictions.begin() + static_cast<std::ptrdiff_t>(at),
                                   predictions.begin() + static_cast<std::ptrdiff_t>(at + slice.count));
      }
      at += slice.count;
      queuedImages_ -= slice.count;
      if (failure) {
        // The rest of a failed request is not run: its images still queued leave with it.
        queuedImages_ -= request.count - request.taken;
        request.taken = request.count;
        request.answered = true;
        request.promise.set_exception(failure);
      } else if (request.predictions.size() == request.count) {
        request.answered = true;
        request.promise.set_value(std::move(request.predictions));
      }
    }
    // Batches take requests in arrival order, so answered ones leave from the front.
    while (!requests_.empty() && requests_.front().answered) requests_.pop_front();
    if (requests_.empty()) drained_.notify_all();
  }
}

}  // namespace glnet
