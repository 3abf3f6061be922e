// Sums across the ranks of one host through memory they share (MPI_Win_allocate_shared) instead of
// MPI_Allreduce. Open MPI 4.1's MPI_Allreduce between two processes of one host copies through small shared-memory
// fragments on one thread: 0.85 GB/s at 80 MB on the two-H100 host (bench/allreduce_methods.py). Here each rank
// copies the slices that the others sum into its own segment of the window, adds their copies of its own slice to
// it, and copies the other slices' sums back, each pass on several threads. Collective: every rank constructs it and
// calls the sums with the same counts in the same order.
#pragma once

#include "distributed/Communicator.h"
#include "base/ParallelCopy.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace glnet {

class HostSum {
 public:
  // Sums of up to `maxBytes` bytes, each pass on `threads` threads. Throws glnet::Error when the ranks are not
  // all on this host or the window cannot be allocated.
  HostSum(const Communicator& ranks, std::size_t maxBytes, unsigned threads);
  ~HostSum();
  HostSum(const HostSum&) = delete;
  HostSum& operator=(const HostSum&) = delete;

  // The threads each rank of this host gets when they share its cores, at most 8.
  static unsigned threadsPerRank(const Communicator& ranks);

  // In place; every rank gets the same values, summed in the same order for every element of a slice.
  void sum(float* values, std::size_t count);
  // bfloat16 values (base/Bfloat16.h), added in float as Communicator::sumBfloat16 adds them.
  void sumBfloat16(std::uint16_t* values, std::size_t count);

 private:
  using Add = void (*)(const void* addends, void* sums, std::size_t bytes);
  void sumBytes(void* values, std::size_t bytes, Add add);
  void synchronise() const;
  struct Slice {
    std::size_t begin, end;
  };
  Slice sliceOf(int rank, std::size_t bytes) const;

  MPI_Comm ranks_ = MPI_COMM_NULL;
  MPI_Win window_ = MPI_WIN_NULL;
  int rank_ = 0;
  std::size_t maxBytes_ = 0;
  std::vector<std::uint8_t*> segments_;
  ParallelCopy threads_;
};

}  // namespace glnet
