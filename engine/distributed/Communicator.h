// The processes of a data-parallel job, over MPI. Started by mpirun (or another launcher that sets Open
// MPI's or PMI's rank variables) it initialises MPI and finalises it when destroyed; started alone it is
// rank 0 of 1 and makes no MPI call, so that a plain run behaves exactly as before.
#pragma once

#include "base/check.h"

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

namespace glnet {

// An error that every rank raises at the same point of the same step (a NaN in the summed loss, a
// problem found by Communicator::firstProblem): the ranks stop together, and only rank 0 reports it.
class SharedError : public Error {
 public:
  using Error::Error;
};

// Throws glnet::Error naming `what` and MPI's own words when `status` is not MPI_SUCCESS.
void checkMpi(int status, const char* what);

class Communicator {
 public:
  Communicator();
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  static bool launchedByMpirun();
  int rank() const { return rank_; }
  int size() const { return size_; }
  // This process's place among the ranks of its host (picks the GPU).
  int localRank() const { return localRank_; }
  // Whether every rank of the job runs on this host (so that they can share memory: distributed/HostSum).
  bool allOnOneHost() const { return hostSize_ == size_; }
  // The ranks of this host, ordered as in the job; MPI_COMM_NULL when started alone.
  MPI_Comm hostCommunicator() const { return host_; }
  bool distributed() const { return size_ > 1; }

  // Element-wise sums across ranks, in place; every rank gets the same values.
  void sum(float* values, std::size_t count) const;
  void sum(double* values, std::size_t count) const;
  void sum(std::uint64_t* values, std::size_t count) const;
  // bfloat16 values (base/Bfloat16.h), added in float: half the bytes of a sum of floats.
  void sumBfloat16(std::uint16_t* values, std::size_t count) const;
  // Whether one thread may call these while another does (MPI_THREAD_MULTIPLE), as the sums of gradient
  // buckets do while the GL thread waits on the GPU.
  bool callableFromSeveralThreads() const { return !initialised_ || threadLevel_ == MPI_THREAD_MULTIPLE; }

  // Collective: empty when no rank has a problem, else the problem of the lowest-numbered rank that has one,
  // after "rank R of N: " when the job has several ranks.
  std::string firstProblem(const std::string& problem) const;
  // Rank 0 gets every rank's values one after another, in rank order; the others get nothing.
  std::vector<std::uint32_t> gather(const std::vector<std::uint32_t>& values) const;
  // Ends every rank of the job at once (a rank that failed alone must not leave the others waiting).
  [[noreturn]] void abortAll(int code) const;

 private:
  void sumInPlace(void* values, std::size_t count, MPI_Datatype type) const;
  bool initialised_ = false;
  int threadLevel_ = MPI_THREAD_SINGLE;
  int rank_ = 0;
  int size_ = 1;
  int localRank_ = 0;
  int hostSize_ = 1;
  MPI_Comm host_ = MPI_COMM_NULL;
  MPI_Op bfloat16Sum_ = MPI_OP_NULL;
};

// The share of `total` items that rank `rank` of `size` takes: contiguous, the first total % size ranks one more.
struct Shard {
  std::size_t first = 0;
  std::size_t count = 0;
};
Shard shardOf(std::size_t total, int rank, int size);

}  // namespace glnet
