// One training run as glnet_train and the Python package's glnet.train set it up: its options described once
// (trainingFlags: glnet_train's flags and --help, the settings a checkpoint records for --resume, glnet.train's keyword
// arguments), read and checked before any file is, then the network and data, the Trainer, and after each tested
// epoch the model, checkpoint and ONNX files. The front ends parse, open the device, and print.
#pragma once

#include "base/OptionValues.h"
#include "distributed/Communicator.h"
#include "gl/Context.h"
#include "ops/GemmTuning.h"
#include "train/Trainer.h"
#include "train/TrainingInputs.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace glnet {

// What a run is set to do, as its options set it.
struct TrainingSettings {
  TrainingOptions options;
  NetworkChoice network;
  DataChoice data;
  bool standardize = true;  // else x/255, as the reference notebook feeds it
  std::string out, checkpoint, exportOnnx, resume;  // exportOnnx, resume: empty when not asked for
  int saveEvery = 1;
  bool profile = false;  // after the last epoch, one more step timed dispatch by dispatch (TrainingRun::profileStep)
  bool tune = false;     // before training, the GEMM tuning of the training step (train/TrainingTuning.h)
  double progressSeconds = progressLineSeconds;  // without a terminal, a progress line at least this often
};

// The options of a run by their flag names: given, else restored from --resume's checkpoint, else the default.
class TrainingValues : public OptionValues {
 public:
  TrainingValues(std::map<std::string, std::string> given, int ranks) : given_(std::move(given)), ranks_(ranks) {}
  bool has(const std::string& name) const override { return given_.count(name) != 0; }
  std::string text(const std::string& name) const override;
  // The ranks that share the run (--batch-per-rank multiplies by them).
  int ranks() const { return ranks_; }

 private:
  friend class TrainingRun;
  std::map<std::string, std::string> given_;
  int ranks_;
};

// One option of a run. Its Python keyword is its name with '_' for '-'.
struct TrainingFlag {
  std::string name;          // without dashes
  std::string value;         // what its value is called in --help ("N", "FILE"); empty for a switch, given as "1"
  std::string help;
  std::string defaultValue;  // empty: none
  bool recorded;             // a setting of the run that checkpoints record and --resume restores
  // Reads the option (with the others it depends on) into the settings; throws UsageError on a bad value.
  std::function<void(const TrainingValues&, TrainingSettings&)> apply;
};

// Every option of a run, in the order of glnet_train --help.
const std::vector<TrainingFlag>& trainingFlags();

// How to continue a run that stopped (a GPU failure) from its checkpoint, which writes the model to `out`: glnet_train
// "continue with --resume CHECKPOINT"; glnet.train cannot resume (init= takes the weights alone, not the optimizer's
// state and the epochs done), so Python is pointed at the command.
std::string resumeHint(const std::string& checkpoint, const std::string& out);

class TrainingRun {
 public:
  // Reads the options given (by flag name; a switch as "1") and checks them and the output files; with resume, the
  // settings its checkpoint records fill in those not given. Throws UsageError on a bad option, before any file is read
  // but the checkpoint's settings.
  TrainingRun(std::map<std::string, std::string> given, const Communicator& ranks);
  ~TrainingRun();

  const TrainingSettings& settings() const { return settings_; }
  // The front end's own report cadence (glnet.train's progress_seconds) instead of a fraction of progressSeconds;
  // throws UsageError outside 0.01 to 86400 seconds (NaN too).
  void reportEvery(double seconds);

  // Builds the starting network and reads the data sets and the checkpoint to resume (no GL work).
  void load();
  // Uploads the data and compiles the training step on `context`, the thread that owns it calling. With --tune, first
  // tunes the step's GEMMs on this device (minutes on a large network), `tuning` naming each candidate as it is timed.
  void start(const Context& context, const std::function<void(const std::string&)>& tuning = {});
  // What the run is about to do, one line each ("training 784-128-10 (relu) on ..." and its notes), for rank 0 to print.
  std::vector<std::string> summary() const;
  // Trains the remaining epochs: `progress` at log intervals, `epochDone` after each epoch, once the files of a tested
  // epoch are written (rank 0 writes them). A GPU failure says which checkpoint to resume from.
  void run(const std::function<void(const TrainingProgress&)>& progress, const std::function<void(const EpochResult&)>& epochDone);
  // Frees the GPU resources, on the thread that owns the context.
  void stop();

  // One more training step, timed dispatch by dispatch, after the files are written (its update is never saved): the
  // GPU milliseconds of each kind of dispatch (a label up to its first word with a digit: "dense dW 64x64" is "dense
  // dW"), largest first, for this rank.
  std::vector<std::pair<std::string, double>> profileStep() const;

  // "wrote M.safetensors (checkpoint M.checkpoint.safetensors)": the files the run leaves.
  std::string filesWritten() const;
  const std::string& architecture() const { return initial_.architecture; }
  // What --tune did, when it was given.
  const std::optional<GemmTuningReport>& tuning() const { return tuning_; }

 private:
  const Communicator& ranks_;
  TrainingValues values_;
  TrainingSettings settings_;
  std::map<std::string, std::string> recorded_;  // the settings its checkpoints record
  std::vector<std::string> resumeNotes_;         // options given with another value than the checkpoint's
  Network initial_;
  std::optional<DataSets> sets_;  // from load() until start() has uploaded them
  std::size_t trainCount_ = 0;
  std::optional<Checkpoint> resume_;
  std::optional<GemmTuningReport> tuning_;  // what --tune did
  std::unique_ptr<Trainer> trainer_;
};

}  // namespace glnet
