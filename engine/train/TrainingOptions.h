// What a training run is asked to do (TrainingOptions) and what it reports while it runs (TrainingProgress,
// StepTiming, EpochResult): shared by the Trainer, its GradientExchange and the front ends that set them up.
#pragma once

#include "model/Schedule.h"
#include "ops/Optimizer.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace glnet {

// Augmentation of the training images on the GPU, drawn for each image of each epoch from the seed.
struct Augmentation {
  std::uint32_t shift = 0;  // a random translation by up to this many pixels each way, zeros uncovered (RandomCrop's padding)
  bool flip = false;        // a horizontal flip with probability 1/2
  bool enabled() const { return shift > 0 || flip; }
};

struct TrainingOptions {
  std::uint32_t batch = 64;
  // Batches whose gradients each step sums before its update (and before the sum over ranks, once per step): the
  // update sees the mean gradient of accumulate × batch images, as one batch that large would give it, in the
  // memory of one batch (PyTorch DDP's no_sync).
  std::uint32_t accumulate = 1;
  // Data-parallel runs: the gradients leave the GPU as bfloat16 (half the bytes to read, sum and write back), each
  // step's rounding error added to the next step's gradients before they are rounded (error feedback).
  bool compressGradients = false;
  int epochs = 5;  // with fullBatch: iterations of full-batch gradient descent
  bool fullBatch = false;
  OptimizerSettings optimizer;
  // Its peak is optimizer.learningRate; the trainer fills in its steps from the run's and these epochs.
  LearningRateSchedule schedule;
  double warmupEpochs = 0;
  double stepEpochs = 30;
  Augmentation augment;
  float labelSmoothing = 0.0f;  // the loss's target: (1 − ε)·onehot + ε/classes
  std::uint32_t seed = 0;
  std::size_t logEvery = 100;  // steps between loss read-backs
  // Also read the loss back when this many seconds passed since the last report (0: only every logEvery
  // steps), so that slow steps still show progress; single-rank runs only.
  double reportSeconds = 0;
  int evaluateEvery = 1;       // epochs between test evaluations (and the last epoch)
  // Data-parallel runs: gradients are summed across ranks in buckets of about this many bytes, each started
  // as soon as the backward pass has written it (while the GPU computes the rest); 0: one sum of every
  // gradient after the backward pass.
  std::size_t allReduceBucketBytes = std::size_t{25} << 20;
  // Data-parallel runs: how the host sums the ranks' gradients. automatic: through shared memory (distributed/HostSum)
  // when every rank is on one host, else MPI_Allreduce.
  enum class AllReduce { automatic, mpi, sharedMemory };
  AllReduce allReduce = AllReduce::automatic;
};

struct TrainingProgress {
  int epoch = 0;  // from 1
  int epochs = 0;
  std::size_t step = 0;  // within the epoch, from 1
  std::size_t steps = 0;
  double loss = 0;        // mean over the steps since the last report
  double samplesPerSecond = 0;
  double etaSeconds = 0;  // for the whole run
};

// One step of a data-parallel run (or one with --accumulate) as the host and the GPU saw it, in milliseconds.
struct StepTiming {
  double startMs = 0;         // since the epoch began
  double gpuMs = 0;           // the GPU's own time for the step's forward and backward passes (0: no timer queries)
  double backwardDoneMs = 0;  // host: from the step's start until it saw the backward pass end
  double readMs = 0, allReduceMs = 0, writeMs = 0;
  double exposedMs = 0;       // waiting for communication after the backward pass
  double stepMs = 0;          // host: the whole step, its update queued
};

struct EpochResult {
  int epoch = 0;
  double trainLoss = 0;
  double trainAccuracy = 0;
  bool evaluated = false;  // the test accuracy was measured after this epoch
  double testAccuracy = 0;
  double seconds = 0;
  double samplesPerSecond = 0;
  // Data-parallel runs, per step: GPU work (forward, backward, update), and the gradients' trip out of the
  // GPU, across the ranks and back, all of it on the step's critical path (not overlapped with GPU work).
  double computeMsPerStep = 0;
  double gradientReadMsPerStep = 0;   // GPU → host (in buckets: the copies run between backward dispatches, not counted)
  double allReduceMsPerStep = 0;      // MPI_Allreduce (in buckets: from the first sum's start to the last one's end)
  double gradientWriteMsPerStep = 0;  // host → GPU
  double communicationMsPerStep() const { return gradientReadMsPerStep + allReduceMsPerStep + gradientWriteMsPerStep; }
  // The part of the step spent waiting for communication after the backward pass was done.
  double exposedCommunicationMsPerStep = 0;
  std::size_t allReduceBuckets = 0;  // sums per step; 1 when unbucketed
  double gpuMsPerStep = 0;           // StepTiming::gpuMs on average
  bool sharedMemorySum = false;      // the sums went through distributed/HostSum rather than MPI_Allreduce
  std::vector<StepTiming> timeline;  // every step, in order
};

}  // namespace glnet
