// The gradients of one training step, made whole before its update: the step's batches summed on the GPU
// (--accumulate), then, on a data-parallel run, summed over the ranks on the host (in shared memory, distributed/HostSum,
// or by MPI_Allreduce), whole after the backward pass, in buckets while it runs, or packed as bfloat16 with error
// feedback. The Trainer runs the epochs; this is the part of its step between the backward pass and the update.
#pragma once

#include "distributed/Communicator.h"
#include "distributed/HostSum.h"
#include "distributed/TaskThread.h"
#include "base/Stopwatch.h"
#include "gl/Sync.h"
#include "graph/CompiledGraph.h"
#include "train/TrainingOptions.h"

#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace glnet {

// Bytes [offset, offset + bytes) of a gradient arena, complete once step readyAfterStep of the gradient plan ran.
struct GradientBucket {
  std::size_t offset, bytes, readyAfterStep;
};

class GradientExchange {
 public:
  // For `graph`'s gradient arena as `gradientPlan` (one batch's forward and backward passes) writes it; `programs`
  // compiles the copies and the packing.
  GradientExchange(const Context& context, CompiledGraph& graph, const Plan& gradientPlan, ProgramCache& programs,
                   const TrainingOptions& options, const Communicator& ranks);

  // Collective: opens the shared-memory window (HostSum) when the ranks sum through it. Called by every rank once
  // all of them were set up, since a rank may still fail before that.
  void open();
  // Runs `gradientPlan` for each of the step's batches (`selectBatch(b)` first points it at batch b), then leaves
  // the gradients' sum over the batches and the ranks in the arena. Fills `timing` and returns the sums over the
  // ranks it made (0 on one rank, 1 unbucketed).
  std::size_t run(const Plan& gradientPlan, const std::function<void(std::uint32_t batch)>& selectBatch, const Stopwatch& stepClock,
                  StepTiming& timing);
  // The sums go through distributed/HostSum rather than MPI_Allreduce (once open).
  bool sumsThroughSharedMemory() const { return hostSum_ != nullptr; }

 private:
  void sumGradients(const Stopwatch& stepClock, StepTiming& timing);
  void sumCompressedGradients(const Stopwatch& stepClock, StepTiming& timing);
  void sumGradientsInBuckets(const Plan& gradientPlan, const Stopwatch& stepClock, StepTiming& timing);
  // Replaces `buffer` (floats or bfloat16) with its sum over the ranks by `sum`, in pieces, so that the GPU reads the
  // next piece and writes the last one back while the host sums one; then runs `then` (when given) and waits for the
  // GPU. Sets the read, sum, write and exposed times of `timing`.
  void sumInPieces(Buffer& buffer, HostMirror& mirror, StepTiming& timing, const std::function<void(void* values, std::size_t bytes)>& sum,
                   const Plan* then = nullptr);
  // The step's forward and backward passes on the GPU's clock, once they are done (0 without timer queries).
  double gpuMilliseconds() const;
  // Across the ranks, by shared memory or MPI (TrainingOptions::allReduce).
  void sumOverRanks(float* values, std::size_t count) const;

  const Communicator& ranks_;
  CompiledGraph& graph_;
  std::uint32_t accumulate_;
  std::optional<HostMirror> gradientMirror_;  // the gradients on the host for the sum over ranks
  std::vector<GradientBucket> buckets_;       // in the order they are ready; empty: one sum after the backward pass
  std::unique_ptr<TaskThread> sumThread_;     // sums the buckets while the GL thread waits on the GPU
  bool sumsThroughSharedMemory_ = false;      // else MPI_Allreduce
  std::unique_ptr<HostSum> hostSum_;          // made by open()
  TimerQuery stepStarted_, backwardDone_;     // on the GPU's clock, where it has one
  // --accumulate: the sum of the step's earlier batches' gradients, beside the gradient arena.
  struct Accumulation {
    Buffer sum;
    Plan keep, add, restore;  // sum = gradients; sum += gradients; gradients += sum
  };
  std::optional<Accumulation> accumulation_;
  // compressGradients: the rounding errors kept for the next step, the packed gradients and their host copy.
  struct Compression {
    Buffer residuals, packed;
    HostMirror mirror;
    Plan compress, expand;
  };
  std::optional<Compression> compression_;
};

}  // namespace glnet
