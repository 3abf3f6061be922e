#include "gl/ParallelCopy.h"

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

void ParallelCopy::copyStripe(unsigned stripe) const {
  // Stripes of whole cache lines, so that no two threads write one line.
  constexpr std::size_t line = 64;
  const std::size_t lines = (bytes_ + line - 1) / line;
  const std::size_t perStripe = (lines + threads() - 1) / threads() * line;
  const std::size_t begin = std::min(bytes_, stripe * perStripe);
  const std::size_t end = std::min(bytes_, begin + perStripe);
  if (begin < end) std::memcpy(to_ + begin, from_ + begin, end - begin);
}

void ParallelCopy::copy(void* to, const void* from, std::size_t bytes) {
  if (bytes == 0) return;  // `from` may be null then, which memcpy does not allow
  if (workers_.empty()) {
    std::memcpy(to, from, bytes);
    return;
  }
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    to_ = static_cast<std::uint8_t*>(to);
    from_ = static_cast<const std::uint8_t*>(from);
    bytes_ = bytes;
    pending_ = static_cast<unsigned>(workers_.size());
    ++generation_;
  }
  started_.notify_all();
  copyStripe(0);
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
    copyStripe(stripe);
    bool last = false;
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      last = --pending_ == 0;
    }
    if (last) finished_.notify_one();
  }
}

}  // namespace glnet
