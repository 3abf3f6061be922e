// A host memcpy spread over several threads. One thread copies about 10 GB/s on the H100 machine's CPU,
// below what PCIe 5 carries, so a staging ring filled by one thread bounds uploads at that rate. Other passes
// over a byte range (the sums of distributed/HostSum) share the threads through forEachStripe.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace glnet {

class ParallelCopy {
 public:
  // `threads` copy at once, the caller included; 1 copies on the caller alone.
  explicit ParallelCopy(unsigned threads);
  ~ParallelCopy();
  ParallelCopy(const ParallelCopy&) = delete;
  ParallelCopy& operator=(const ParallelCopy&) = delete;

  // Returns when all `bytes` are copied; `to` and `from` must not overlap.
  void copy(void* to, const void* from, std::size_t bytes);
  // Calls `work(begin, end)` once per thread on disjoint stripes of [0, bytes) that cover it, each a whole number
  // of 64-byte lines apart from the last (so that no two threads write one cache line of an aligned range), and
  // returns when all are done.
  void forEachStripe(std::size_t bytes, const std::function<void(std::size_t begin, std::size_t end)>& work);
  unsigned threads() const { return static_cast<unsigned>(workers_.size()) + 1; }

 private:
  void work(unsigned stripe);
  void runStripe(unsigned stripe) const;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable started_, finished_;
  std::size_t generation_ = 0;
  unsigned pending_ = 0;
  bool stopping_ = false;
  const std::function<void(std::size_t, std::size_t)>* work_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace glnet
