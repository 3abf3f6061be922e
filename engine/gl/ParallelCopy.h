// A host memcpy spread over several threads. One thread copies about 10 GB/s on the H100 machine's CPU,
// below what PCIe 5 carries, so a staging ring filled by one thread bounds uploads at that rate.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
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
  unsigned threads() const { return static_cast<unsigned>(workers_.size()) + 1; }

 private:
  void work(unsigned stripe);
  void copyStripe(unsigned stripe) const;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable started_, finished_;
  std::size_t generation_ = 0;
  unsigned pending_ = 0;
  bool stopping_ = false;
  std::uint8_t* to_ = nullptr;
  const std::uint8_t* from_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace glnet
