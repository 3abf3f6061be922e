// Trains a classifier (any Network but an imported one) on a GPU-resident dataset: one training Plan (gather and
// augment, forward, loss, backward, update) replayed for every step, its learning rate a plan parameter; loss and accuracy read back only at log intervals and epoch ends.
#pragma once

#include "data/GpuImages.h"
#include "data/Idx.h"
#include "distributed/Communicator.h"
#include "distributed/HostSum.h"
#include "distributed/TaskThread.h"
#include "base/Stopwatch.h"
#include "gl/Sync.h"
#include "graph/CompiledGraph.h"
#include "model/Classifier.h"
#include "model/Network.h"
#include "formats/Safetensors.h"
#include "model/Schedule.h"

#include <functional>

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

// Everything needed to resume: the model, the optimizer's state, and how far training got.
struct Checkpoint {
  Network network;
  OptimizerKind optimizer = OptimizerKind::sgd;
  std::vector<std::vector<std::vector<float>>> optimizerState;
  int epochsDone = 0;
  std::uint64_t stepsDone = 0;
  // The settings of the run (glnet_train's flags by name, without dashes), so that a resumed run is the same run.
  std::map<std::string, std::string> settings;

  void save(const std::string& path) const;
  // Checks that the file holds `architecture` trained with `optimizer`, with every optimizer tensor shaped like
  // its parameter, and says why not.
  static Checkpoint load(const std::string& path, const std::string& architecture, OptimizerKind optimizer);
  // The settings alone, to restore a run's flags before the network is built; empty for checkpoints written
  // before they were recorded.
  static std::map<std::string, std::string> readSettings(const std::string& path);
};

// The mean and standard deviation of the training pixels on the x/255 scale, recorded in the model file: per channel
// for images of 2 to 4 channels (RGB), one for all values otherwise.
InputFormat standardization(const ImageSet& images);

// Where a run writing the model `out` keeps its checkpoint: M.safetensors → M.checkpoint.safetensors.
std::string defaultCheckpointPath(const std::string& out);

// What glnet_train and glnet.train show of a run, alike: "epoch 2/5  step 300/937  loss 0.2412  10523 samples/s  ETA 1:05"
std::string progressLine(const TrainingProgress& progress);
// "epoch 2/5: train loss 0.2412, train accuracy 93.10%, test accuracy 94.02%, 6.61 s (9075 samples/s)"; a full-batch
// run counts iterations.
std::string epochLine(const EpochResult& epoch, int epochs, bool fullBatch);
// "wrote M.safetensors (checkpoint M.checkpoint.safetensors) and M.onnx": the files a run leaves (`onnx` may be empty).
std::string filesWrittenLine(const std::string& out, const std::string& checkpoint, const std::string& onnx);
// Without a terminal (a log file, CI, a notebook), a progress line about this often.
constexpr double progressLineSeconds = 8;

// Data-parallel over the ranks of `ranks`: each rank takes its share of every global batch (options.batch)
// and of the test set, gradients are summed across ranks every step (each rank's loss is scaled by the
// global batch), so that N ranks follow one rank's trajectory up to the order of floating-point sums.
// Bytes [offset, offset + bytes) of a gradient arena, complete once step readyAfterStep of the gradient plan ran.
struct GradientBucket {
  std::size_t offset, bytes, readyAfterStep;
};

class Trainer {
 public:
  // Uploads the training images and this rank's share of the test images once as uint8 and compiles the
  // training step.
  Trainer(const Context& context, const Network& initial, const LabelledImages& train, const LabelledImages& test,
          const TrainingOptions& options, const Communicator& ranks);

  void restore(const Checkpoint& checkpoint);
  // Runs the remaining epochs. `progress` is called at log intervals, `epochDone` after each epoch (with
  // the test accuracy when measured); a non-finite loss throws glnet::Error naming the epoch and steps.
  void run(const std::function<void(const TrainingProgress&)>& progress,
           const std::function<void(const EpochResult&)>& epochDone);

  Network network() const;
  Checkpoint checkpoint() const;
  std::size_t stepsPerEpoch() const { return stepsPerEpoch_; }
  // The images of each global batch that this rank trains on.
  Shard batchShare() const { return batchShare_; }
  double compileMilliseconds() const { return graph_.compileMilliseconds(); }
  const Plan& plan() const { return plan_; }

 private:
  std::vector<std::uint32_t> epochOrder(int epoch) const;
  std::vector<std::uint32_t> epochAugmentation(int epoch) const;
  // Runs the gradient plan, then replaces the gradients with their sum over the ranks, in one piece after the
  // backward pass or in buckets while it runs; adds the milliseconds of each part to `result`.
  // With --accumulate, the step's batches one after the other, their gradients summed on the GPU first.
  void runAndSumGradients(std::size_t step, const Stopwatch& stepClock, StepTiming& timing, EpochResult& result);
  // The first image of batch `batch` (from 0) of step `step` (from 1) that this rank takes.
  std::uint32_t firstRow(std::size_t step, std::uint32_t batch) const;
  void sumGradients(const Stopwatch& stepClock, StepTiming& timing);
  void sumCompressedGradients(const Stopwatch& stepClock, StepTiming& timing);
  void sumGradientsInBuckets(const Stopwatch& stepClock, StepTiming& timing, EpochResult& result);
  // Replaces `buffer` (floats or bfloat16) with its sum over the ranks by `sum`, in pieces, so that the GPU reads the
  // next piece and writes the last one back while the host sums one; then runs `then` (when given) and waits for the
  // GPU. Sets the read, sum, write and exposed times of `timing`.
  void sumInPieces(Buffer& buffer, HostMirror& mirror, StepTiming& timing, const std::function<void(void* values, std::size_t bytes)>& sum,
                   Plan* then = nullptr);
  // The step's forward and backward passes on the GPU's clock, once they are done (0 without timer queries).
  double gpuMilliseconds() const;
  // Across the ranks, by shared memory or MPI (TrainingOptions::allReduce).
  void sumOverRanks(float* values, std::size_t count) const;
  // Sums over the ranks; a non-finite value throws the same SharedError on every rank.
  std::vector<double> totalsOverRanks(int epoch, std::size_t fromStep, std::size_t toStep) const;
  double testAccuracy() const;
  // Data-parallel runs: every rank's running statistics (batch normalization's state) become their mean over the
  // ranks, so that the ranks evaluate and save one model.
  void averageStateOverRanks();

  const Context& context_;
  const Communicator& ranks_;
  Network shape_;
  TrainingOptions options_;
  std::size_t trainCount_;
  std::size_t stepsPerEpoch_;
  std::uint32_t globalRows_;
  Shard batchShare_;
  Shard testShare_;  // the test images this rank evaluates
  GpuImages trainImages_, testImages_;
  GpuImages trainLabels_;  // one byte per image, packed like pixels
  Buffer indices_;
  Buffer augment_;  // per position of the epoch's order: GatherOp::packAugmentation; unused without augmentation
  std::vector<std::uint8_t> testLabels_;
  NetworkGraph nodes_;
  CompiledGraph graph_;
  ProgramCache feedPrograms_;
  Plan plan_;                        // the whole step, or its gradient part when the ranks sum gradients
  std::optional<Plan> updatePlan_;   // the update, after the sum
  std::optional<HostMirror> gradientMirror_;  // the gradients on the host for the sum over ranks
  std::vector<GradientBucket> buckets_;  // in the order they are ready; empty: one sum after the backward pass
  std::unique_ptr<TaskThread> sumThread_;  // sums the buckets while the GL thread waits on the GPU
  bool sumsThroughSharedMemory_ = false;   // else MPI_Allreduce
  std::unique_ptr<HostSum> hostSum_;       // made when run() starts
  TimerQuery stepStarted_, backwardDone_;   // on the GPU's clock, where it has one
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
  int firstRowParameter_ = -1;
  int epochsDone_ = 0;
  std::uint64_t stepsDone_ = 0;
};

}  // namespace glnet
