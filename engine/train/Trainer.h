// Trains a classifier (any Network but an imported one) on a GPU-resident dataset: one training Plan (gather and
// augment, forward, loss, backward, update) replayed for every step, its learning rate a plan parameter; loss and accuracy read back only at log intervals and epoch ends.
#pragma once

#include "data/GpuImages.h"
#include "data/Idx.h"
#include "distributed/Communicator.h"
#include "graph/CompiledGraph.h"
#include "model/Classifier.h"
#include "model/Network.h"
#include "formats/Safetensors.h"
#include "train/GradientExchange.h"
#include "train/TrainingOptions.h"

#include <functional>
#include <memory>

namespace glnet {

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
class Trainer {
 public:
  // Uploads the training images and this rank's share of the test images once as uint8 and compiles the
  // training step.
  Trainer(const Context& context, const Network& initial, const LabelledImages& train, const LabelledImages& test,
          const TrainingOptions& options, const Communicator& ranks);
  // What the constructor refuses of its inputs (TrainingRun asks before a tuning): augmentation of texts, images of
  // another size than the network takes, a batch (times --accumulate) larger than the training set.
  static void checkFits(const Network& initial, const LabelledImages& train, const TrainingOptions& options);

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
  // One more step (its gradient plan and update), each dispatch timed: (label, GPU milliseconds) in order.
  std::vector<std::pair<std::string, double>> timeStep() const;

 private:
  std::vector<std::uint32_t> epochOrder(int epoch) const;
  std::vector<std::uint32_t> epochAugmentation(int epoch) const;
  // The first image of batch `batch` (from 0) of step `step` (from 1) that this rank takes.
  std::uint32_t firstRow(std::size_t step, std::uint32_t batch) const;
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
  // With --accumulate or ranks to sum over: what happens between the gradient plan and the update.
  std::unique_ptr<GradientExchange> exchange_;
  int firstRowParameter_ = -1;
  int epochsDone_ = 0;
  std::uint64_t stepsDone_ = 0;
};

}  // namespace glnet
