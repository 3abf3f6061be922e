#include "base/ParallelCopy.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace glnet {

ParallelCopy::ParallelCopy(unsigned threads) {
  for (unsigned stripe = 1; stripe < std::max(threads, 1u); ++stripe) workers_.emplace_back([this, stripe] { work(stripe); });
}

ParallelCopy::~ParallelCopy() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  started_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

void ParallelCopy::runStripe(unsigned stripe) const {
  constexpr std::size_t line = 64;
  const std::size_t lines = (bytes_ + line - 1) / line;
  const std::size_t perStripe = (lines + threads() - 1) / threads() * line;
  const std::size_t begin = std::min(bytes_, stripe * perStripe);
  const std::size_t end = std::min(bytes_, begin + perStripe);
  if (begin < end) (*work_)(begin, end);
}

void ParallelCopy::copy(void* to, const void* from, std::size_t bytes) {
  if (bytes == 0) return;  // `from` may be null then, which memcpy does not allow
  auto* target = static_cast<std::uint8_t*>(to);
  const auto* source = static_cast<const std::uint8_t*>(from);
  if (workers_.empty()) {
    std::memcpy(target, source, bytes);
    return;
  }
  forEachStripe(bytes, [&](std::size_t begin, std::size_t end) { std::memcpy(target + begin, source + begin, end - begin); });
}

void ParallelCopy::forEachStripe(std::size_t bytes, const std::function<void(std::size_t begin, std::size_t end)>& work) {
  if (bytes == 0) return;
  if (workers_.empty()) return work(0, bytes);
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    work_ = &work;
    bytes_ = bytes;
    pending_ = static_cast<unsigned>(workers_.size());
    ++generation_;
  }
  started_.notify_all();
  runStripe(0);
  std::unique_lock<std::mutex> lock(mutex_);
  finished_.wait(lock, [this] { return pending_ == 0; });
}

void ParallelCopy::work(unsigned stripe) {
  std::size_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      started_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
    }
    runStripe(stripe);
    bool last = false;
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      last = --pending_ == 0;
    }
    if (last) finished_.notify_one();
  }
}

}  // namespace glnet
