#include "train/TrainingRun.h"

#include "base/AtomicFile.h"
#include "base/check.h"
#include "convert/OnnxExport.h"
#include "train/TrainingTuning.h"

#include <algorithm>
#include <sstream>
#include <map>
#include <climits>
#include <cstdarg>
#include <cstdint>
#include <cstdio>

namespace glnet {

namespace {

const TrainingFlag* findFlag(const std::string& name) {
  const std::vector<TrainingFlag>& flags = trainingFlags();
  const auto found = std::find_if(flags.begin(), flags.end(), [&](const TrainingFlag& flag) { return flag.name == name; });
  return found == flags.end() ? nullptr : &*found;
}

// A summary line, printf-style as glnet_train wrote them before the run had its own class.
std::string format(const char* pattern, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* pattern, ...) {
  va_list arguments;
  va_start(arguments, pattern);
  va_list again;
  va_copy(again, arguments);
  std::string text(static_cast<std::size_t>(std::vsnprintf(nullptr, 0, pattern, arguments)), '\0');
  va_end(arguments);
  std::vsnprintf(text.data(), text.size() + 1, pattern, again);
  va_end(again);
  return text;
}

// A report interval a run takes, in seconds: from a hundredth of a second to a day.
bool reportIntervalOk(double seconds) { return seconds >= 0.01 && seconds <= 86400; }

}  // namespace

std::string TrainingValues::text(const std::string& name) const {
  const auto found = given_.find(name);
  if (found != given_.end()) return found->second;
  const TrainingFlag* flag = findFlag(name);
  GLNET_ASSERT(flag, "training option --" + name + " was never declared");
  return flag->defaultValue;
}

const std::vector<TrainingFlag>& trainingFlags() {
  using V = const TrainingValues&;
  using S = TrainingSettings&;
  static const std::vector<TrainingFlag> flags = {
      {"out", "FILE", "where to write the trained model (safetensors)", "", false, [](V v, S s) { s.out = v.text("out"); }},
      {"arch", "ARCH",
       "cnn (conv5x5x32-pool-conv5x5x64-pool-fc512-fc10), lenet5 or resnet8 (built-in descriptions, with batch "
       "normalization and residuals: nets/ in the source), or MLP layer sizes joined by '-'",
       "784-128-10", true, [](V v, S s) { s.network.arch = v.text("arch"); }},
      {"net", "NET.json|MODEL.onnx",
       "train the network this description file gives (README: 'Your own network and data'), or fine-tune this ONNX "
       "model from its weights (exported from PyTorch, or by glnet); replaces --arch",
       "", true, [](V v, S s) { s.network.net = v.text("net"); }},
      {"export-onnx", "FILE", "also write the trained model as ONNX (opset 17) after every epoch, as the model file is", "", false,
       [](V v, S s) { s.exportOnnx = v.text("export-onnx"); }},
      {"init", "MODEL",
       "start from this model file's weights (a glnet or PyTorch safetensors file of the same network) instead of a random "
       "initialisation",
       "", true, [](V v, S s) { s.network.init = v.text("init"); }},
      {"num-classes", "N",
       "replace the network's last layer (dense or convolution) by a freshly initialised one for N classes, keeping every other "
       "weight: fine-tuning --init's or --net's model on a data set of other classes",
       "", true,
       [](V v, S s) {
         if (v.has("num-classes")) s.network.classes = static_cast<std::uint32_t>(v.integer("num-classes", 2, 256));
       }},
      {"activation", "NAME", "hidden activation: relu, tanh or sigmoid", "relu", true,
       [](V v, S s) {
         s.network.activation = parseActivation(v.text("activation"));
         if (s.network.activation == Activation::none) {
           throw UsageError(optionName("activation") + " none would make the MLP linear; use relu, tanh or sigmoid");
         }
       }},
      {"epochs", "N", "epochs (with --full-batch: iterations; tested and checkpointed every 100)", "5", true,
       [](V v, S s) { s.options.epochs = static_cast<int>(v.integer("epochs", 1, 1000000)); }},
      {"batch", "N", "images per step (under mpirun: across all ranks)", "64", true,
       [](V v, S s) {
         if (v.has("batch-per-rank") && v.has("batch")) {
           throw UsageError(optionName("batch") + " and " + optionName("batch-per-rank") + " exclude each other");
         }
         if (!v.has("batch-per-rank")) s.options.batch = static_cast<std::uint32_t>(v.integer("batch", 1, 1 << 20));
       }},
      {"batch-per-rank", "N",
       "under mpirun, instead of --batch: N images per step on each rank, so that the global batch grows with the ranks (weak "
       "scaling). --lr is not scaled: it applies to the mean gradient of the global batch, as with --batch; Goyal et al.'s "
       "linear rule multiplies it by the ranks",
       "", true,
       [](V v, S s) {
         if (!v.has("batch-per-rank")) return;
         s.options.batch = static_cast<std::uint32_t>(v.integer("batch-per-rank", 1, (1 << 20) / v.ranks()) * v.ranks());
       }},
      {"accumulate", "N",
       "sum the gradients of N batches before each update (under mpirun, before the one sum over ranks of each step): the "
       "update takes the mean gradient of N x --batch images, in the memory of one batch; --lr applies to that mean, as for "
       "one batch N times as large",
       "1", true, [](V v, S s) { s.options.accumulate = static_cast<std::uint32_t>(v.integer("accumulate", 1, 65536)); }},
      {"lr", "RATE", "learning rate", "0.1", true,
       [](V v, S s) { s.options.optimizer.learningRate = static_cast<float>(v.number("lr")); }},
      {"optimizer", "NAME", "sgd, momentum (0.9), adam or adamw (decoupled weight decay)", "sgd", true,
       [](V v, S s) { s.options.optimizer.kind = parseOptimizer(v.text("optimizer")); }},
      {"weight-decay", "L",
       "weight decay of the weights (not of biases and batch normalization): L2 for sgd, momentum and adam, decoupled for adamw",
       "0", true, [](V v, S s) { s.options.optimizer.weightDecay = static_cast<float>(v.number("weight-decay")); }},
      {"nesterov", "", "Nesterov momentum (with --optimizer momentum)", "", true,
       [](V v, S s) { s.options.optimizer.nesterov = v.has("nesterov"); }},
      {"clip-norm", "N", "scale the gradients so that their global L2 norm is at most N (0: no clipping)", "0", true,
       [](V v, S s) { s.options.optimizer.clipNorm = static_cast<float>(v.number("clip-norm")); }},
      {"schedule", "NAME",
       "learning rate schedule: constant, cosine (to 0 at the end), step (times --step-gamma every --step-epochs) or onecycle "
       "(PyTorch's OneCycleLR with --lr as its peak)",
       "constant", true, [](V v, S s) { s.options.schedule.kind = parseSchedule(v.text("schedule")); }},
      {"warmup-epochs", "E", "first raise the learning rate linearly over E epochs (may be fractional; not with onecycle)", "0", true,
       [](V v, S s) { s.options.warmupEpochs = v.number("warmup-epochs"); }},
      {"step-epochs", "N", "the step schedule's interval in epochs", "30", true,
       [](V v, S s) { s.options.stepEpochs = v.number("step-epochs"); }},
      {"step-gamma", "G", "the step schedule's factor", "0.1", true, [](V v, S s) { s.options.schedule.gamma = v.number("step-gamma"); }},
      {"augment-shift", "N",
       "augment on the GPU: shift each training image by up to N pixels each way, zeros uncovered (torchvision's RandomCrop "
       "with padding N)",
       "0", true, [](V v, S s) { s.options.augment.shift = static_cast<std::uint32_t>(v.integer("augment-shift", 0, 64)); }},
      {"augment-flip", "", "augment on the GPU: flip each training image horizontally with probability 1/2", "", true,
       [](V v, S s) { s.options.augment.flip = v.has("augment-flip"); }},
      {"label-smoothing", "E",
       "train towards (1 - E) on the label and E/classes on every class (the train loss reported includes it)", "0", true,
       [](V v, S s) { s.options.labelSmoothing = static_cast<float>(v.number("label-smoothing")); }},
      {"dataset", "NAME",
       "mnist or fashion (IDX files: [N, H, W] or [N, C, H, W] images), cifar10 (its binary version: data_batch_N.bin, "
       "test_batch.bin), folder (one sub-folder of images per class, under train/ and test/ or split by --val-fraction), text "
       "(DIR/train.jsonl and test.jsonl, lines of {\"text\": ..., \"label\": ...}, tokenized with --tokenizer) or ids "
       "(DIR/train-ids.npy [count, length] token ids and train-labels.npy [count], and test-...): for networks whose "
       "embedding layer reads token ids",
       "mnist", true,
       // With --data, --size and --val-fraction, which dataChoice reads; --seed draws a folder's held-out images.
       [](V v, S s) { s.data = dataChoice(v, static_cast<std::uint32_t>(v.integer("seed", 0, UINT32_MAX))); }},
      {"data", "DIR", "the data set's directory (default: data/mnist, or /usr/share/datasets/fashion-mnist)", "", true, nullptr},
      {"tokenizer", "FILE", "--dataset text: the tokenizer.json that makes the texts token ids (default: DIR/tokenizer.json)", "", true, nullptr},
      {"pad-id", "N", "--dataset text: the id that fills short texts (default: the pad of the network's mask layers, else 0)", "", true, nullptr},
      {"size", "N", "--dataset folder: resize images to N x N (default: the network's input size)", "", true, nullptr},
      {"val-fraction", "F", "--dataset folder without train/ and test/: hold out this fraction of each class for testing", "", true, nullptr},
      {"train-limit", "N", "train on the first N training images only", "", true,
       [](V v, S s) {
         if (v.has("train-limit")) s.data.trainLimit = static_cast<std::size_t>(v.integer("train-limit", 1, 1L << 40));
       }},
      {"test-limit", "N", "measure test accuracy on the first N test images only", "", true,
       [](V v, S s) {
         if (v.has("test-limit")) s.data.testLimit = static_cast<std::size_t>(v.integer("test-limit", 1, 1L << 40));
       }},
      {"full-batch", "", "full-batch gradient descent: every step uses all training images in order", "", true,
       [](V v, S s) {
         s.options.fullBatch = v.has("full-batch");
         // Full-batch iterations are single steps: test, checkpoint and report every 100 of them.
         s.options.evaluateEvery = s.options.fullBatch ? 100 : 1;
       }},
      {"no-standardize", "", "feed x/255 as the reference notebook does, instead of standardizing with the training set's mean and std",
       "", true, [](V v, S s) { s.standardize = !v.has("no-standardize"); }},
      {"seed", "N", "seed of the initial weights and the shuffling", "0", true,
       [](V v, S s) { s.options.seed = s.network.seed = static_cast<std::uint32_t>(v.integer("seed", 0, UINT32_MAX)); }},
      {"resume", "FILE", "continue from a checkpoint written by glnet_train", "", false, [](V v, S s) { s.resume = v.text("resume"); }},
      {"checkpoint", "FILE", "where to write checkpoints (default: OUT with .checkpoint.safetensors)", "", false,
       [](V v, S s) { s.checkpoint = v.has("checkpoint") ? v.text("checkpoint") : defaultCheckpointPath(s.out); }},
      {"save-every", "N",
       "write the model and the checkpoint after every N-th epoch and the last (a large model's files take long to write, and "
       "the GPU idles meanwhile)",
       "1", false, [](V v, S s) { s.saveEvery = static_cast<int>(v.integer("save-every", 1, 1 << 30)); }},
      {"profile", "", "after the last epoch, time one more step dispatch by dispatch (its update is not saved) and report the GPU time by kind of dispatch", "", false,
       [](V v, S s) { s.profile = v.has("profile"); }},
      {"tune", "",
       "first time each GEMM shape of the training step under every configuration this device runs and keep the fastest in "
       "its tuning cache, as glnet_bench --tune does (once per device and driver: later runs read it; about 2 minutes for "
       "resnet14-wide on an H100)",
       "", false, [](V v, S s) { s.tune = v.has("tune"); }},
      {"log-every", "N", "steps between loss read-backs", "100", true,
       [](V v, S s) { s.options.logEvery = static_cast<std::size_t>(v.integer("log-every", 1, 1L << 30)); }},
      {"progress-every", "SECONDS", "without a terminal (a log file, CI): a progress line at least this often",
       std::to_string(static_cast<int>(progressLineSeconds)), false,
       [](V v, S s) {
         s.progressSeconds = v.number("progress-every");
         if (!reportIntervalOk(s.progressSeconds)) {
           throw UsageError(optionName("progress-every") + " must be from 0.01 to 86400 seconds");
         }
         // The trainer reports at least twice per interval, so that a line is never much later than promised.
         s.options.reportSeconds = s.progressSeconds / 4;
       }},
      {"grad-compression", "KIND",
       "under mpirun: none, or bf16: the gradients leave the GPU as bfloat16 (half the bytes to read, sum over ranks and write "
       "back), each step's rounding error added to the next step's gradients (error feedback); one sum per step after the "
       "backward pass, not buckets",
       "none", true,
       [](V v, S s) {
         const std::string kind = v.text("grad-compression");
         if (kind != "none" && kind != "bf16") throw UsageError(optionName("grad-compression") + " takes none or bf16, not '" + kind + "'");
         s.options.compressGradients = kind == "bf16";
       }},
      {"bucket-mb", "MB",
       "under mpirun: gradients are summed across ranks in buckets of about MB megabytes, each as soon as the backward pass has "
       "written it; 0: one sum after the backward pass",
       "25", true,
       [](V v, S s) {
         const double megabytes = v.number("bucket-mb");
         if (!(megabytes >= 0 && megabytes <= 1e6)) throw UsageError(optionName("bucket-mb") + " must be a number of megabytes from 0 to 1000000");
         s.options.allReduceBucketBytes = static_cast<std::size_t>(megabytes * 1e6);
       }},
      {"all-reduce", "HOW",
       "under mpirun, how the host sums the ranks' gradients: shared-memory (ranks of one host add slices of each other's "
       "gradients in memory they share, on several threads), mpi (MPI_Allreduce), or auto: shared-memory when every rank is "
       "on one host",
       "auto", true,
       [](V v, S s) {
         const std::string how = v.text("all-reduce");
         if (how != "auto" && how != "mpi" && how != "shared-memory") {
           throw UsageError(optionName("all-reduce") + " takes auto, mpi or shared-memory, not '" + how + "'");
         }
         s.options.allReduce = how == "mpi"             ? TrainingOptions::AllReduce::mpi
                               : how == "shared-memory" ? TrainingOptions::AllReduce::sharedMemory
                                                        : TrainingOptions::AllReduce::automatic;
       }},
  };
  return flags;
}

std::string resumeHint(const std::string& checkpoint, const std::string& out) {
  if (optionSpelling() == OptionSpelling::flags) return "continue with " + optionSetting("resume", checkpoint);
  return "continue with glnet_train --resume " + checkpoint + " --out " + out;
}

TrainingRun::TrainingRun(std::map<std::string, std::string> given, const Communicator& ranks)
    : ranks_(ranks), values_(std::move(given), ranks.size()) {
  for (const auto& [name, value] : values_.given_) {
    if (!findFlag(name)) throw UsageError("unknown option " + optionName(name));
  }
  if (!values_.has("out")) throw UsageError(optionName("out") + " is required");
  // A checkpoint carries its run's settings: options not given now take the checkpoint's values, and one given
  // with another value is used, with a note.
  if (values_.has("resume")) {
    for (const auto& [name, value] : Checkpoint::readSettings(values_.text("resume"))) {
      const TrainingFlag* flag = findFlag(name);
      if (!flag || !flag->recorded) continue;
      if (!values_.given_.emplace(name, value).second && values_.text(name) != value) {
        resumeNotes_.push_back(optionName(name) + " " + values_.text(name) + " differs from the checkpoint's " + value + "; using " +
                               values_.text(name));
      }
    }
  }
  for (const TrainingFlag& flag : trainingFlags()) {
    if (flag.apply) flag.apply(values_, settings_);
    if (flag.recorded && !values_.text(flag.name).empty()) recorded_[flag.name] = values_.text(flag.name);
  }
  // The global batch follows from the ranks: a resume on other ranks keeps the batch per rank.
  if (values_.has("batch-per-rank")) recorded_.erase("batch");
  checkTrainingOptions(settings_.options);
  if (settings_.tune) {
    if (const std::string refusal = gemmTuningRefusal(optionName("tune")); !refusal.empty()) throw UsageError(refusal);
    if (ranks.size() > 1) {
      throw UsageError(optionName("tune") + " under mpirun: tune once without it (the tuning is kept per device and driver, "
                       "and every rank reads it)");
    }
  }
  checkWritable(settings_.out);
  checkWritable(settings_.checkpoint);
  if (!settings_.exportOnnx.empty()) checkWritable(settings_.exportOnnx);
}

TrainingRun::~TrainingRun() = default;

void TrainingRun::reportEvery(double seconds) {
  if (!reportIntervalOk(seconds)) throw UsageError("progress_seconds is from 0.01 to 86400");
  settings_.options.reportSeconds = seconds;
}

void TrainingRun::load() {
  const StartingNetwork start = startingNetwork(settings_.network);
  initial_ = start.network;
  sets_ = loadDataSets(settings_.data, initial_);
  trainCount_ = sets_->train.images.count;
  // An ONNX model that records its input's normalization (glnet's exports) keeps it: its weights expect it.
  if (start.recordedInput && settings_.standardize) {
    initial_.input = *start.recordedInput;
  } else if (settings_.standardize && !sets_->train.images.tokenIds()) {  // token ids go in as they are
    initial_.input = standardization(sets_->train.images);
  }
  if (settings_.resume.empty()) return;
  const std::string& path = settings_.resume;
  resume_ = Checkpoint::load(path, initial_.architecture, settings_.options.optimizer.kind);
  const Activation activation = settings_.network.activation;
  if (resume_->network.activation != activation) {
    throw Error(path + ": the checkpoint uses activation " + activationName(resume_->network.activation) + ", not " +
                activationName(activation));
  }
  const int epochs = settings_.options.epochs;
  if (resume_->epochsDone >= epochs) {
    throw Error(path + ": the run is complete (" + std::to_string(resume_->epochsDone) + " of " + std::to_string(epochs) +
                " epochs done); to train on, give " + optionName("epochs") + " more than " + std::to_string(resume_->epochsDone));
  }
  initial_ = resume_->network;
}

void TrainingRun::start(const Context& context, const std::function<void(const std::string&)>& tuning) {
  GLNET_ASSERT(sets_, "TrainingRun::start before load");
  if (settings_.tune) {
    Trainer::checkFits(initial_, sets_->train, settings_.options);
    checkCurrentGemmTuningWritable();
    const TrainingOptions& o = settings_.options;
    const auto batch = static_cast<std::uint32_t>(o.fullBatch ? trainCount_ : o.batch);
    tuning_ = tuneTrainingGemms(context, initial_, {batch, 2, 8, o.seed}, tuning);
  }
  trainer_ = std::make_unique<Trainer>(context, initial_, sets_->train, sets_->test, settings_.options, ranks_);
  if (resume_) trainer_->restore(*resume_);
  sets_.reset();  // on the GPU now
}

std::vector<std::pair<std::string, double>> TrainingRun::profileStep() const {
  GLNET_ASSERT(trainer_, "TrainingRun::profileStep after start");
  std::map<std::string, double> byKind;
  for (const auto& [label, ms] : trainer_->timeStep()) {
    std::string kind;
    std::istringstream words(label);
    for (std::string word; words >> word && std::none_of(word.begin(), word.end(), [](char c) { return c >= '0' && c <= '9'; });) {
      kind += (kind.empty() ? "" : " ") + word;
    }
    byKind[kind.empty() ? label : kind] += ms;
  }
  std::vector<std::pair<std::string, double>> sorted(byKind.begin(), byKind.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return sorted;
}

std::vector<std::string> TrainingRun::summary() const {
  const TrainingOptions& o = settings_.options;
  std::vector<std::string> lines;
  const std::size_t steps = trainer_->stepsPerEpoch();
  // Token-id data sets hold texts, the others images.
  const char* samples = settings_.data.dataset == "text" || settings_.data.dataset == "ids" ? "texts" : "images";
  lines.push_back(format("training %s (%s) on %zu %s %s, %s, %zu step%s per %s, %s lr %g (%s), seed %u; compile %.0f ms",
                         initial_.architecture.c_str(), activationName(settings_.network.activation), trainCount_,
                         settings_.data.dataset.c_str(), samples, o.fullBatch ? "full batch" : ("batch " + std::to_string(o.batch)).c_str(), steps,
                         steps == 1 ? "" : "s", o.fullBatch ? "iteration" : "epoch", optimizerName(o.optimizer.kind),
                         static_cast<double>(o.optimizer.learningRate), scheduleName(o.schedule.kind), o.seed,
                         trainer_->compileMilliseconds()));
  if (tuning_) lines.push_back("GEMM tuning of the training step: " + describeTuning(*tuning_));
  const std::size_t imagesPerStep = std::size_t{o.batch} * o.accumulate;
  if (o.accumulate > 1) {
    lines.push_back(format("each step sums the gradients of %u batches of %u before its update: %zu images per step", o.accumulate,
                           o.batch, imagesPerStep));
  }
  if (const std::size_t left = o.fullBatch ? 0 : trainCount_ - steps * imagesPerStep; left > 0) {
    lines.push_back(format("note: %zu is not a multiple of the %zu %s of a step: each epoch trains on %zu of its new shuffle "
                           "and leaves %zu out (other ones every epoch)",
                           trainCount_, imagesPerStep, samples, steps * imagesPerStep, left));
  }
  if (o.compressGradients && !ranks_.distributed()) {
    lines.push_back("note: " + optionName("grad-compression") + " compresses the sum over ranks; one rank has none");
  }
  if (ranks_.distributed()) {
    const std::size_t rows = o.fullBatch ? trainCount_ : o.batch;
    lines.push_back(format("data parallel over %d ranks: each step's %zu images shared %zu to %zu per rank, gradients summed%s",
                           ranks_.size(), rows, shardOf(rows, ranks_.size() - 1, ranks_.size()).count, shardOf(rows, 0, ranks_.size()).count,
                           o.compressGradients ? " as bfloat16 with error feedback" : ""));
  }
  for (const std::string& note : resumeNotes_) lines.push_back("note: " + note);
  if (resume_) lines.push_back("resumed from " + settings_.resume + " after epoch " + std::to_string(resume_->epochsDone));
  return lines;
}

void TrainingRun::run(const std::function<void(const TrainingProgress&)>& progress,
                      const std::function<void(const EpochResult&)>& epochDone) {
  const int resumedAfter = resume_ ? resume_->epochsDone : 0;
  int checkpointedEpoch = resumedAfter;
  try {
    trainer_->run(progress, [&](const EpochResult& e) {
      if (e.evaluated && ranks_.rank() == 0 && (e.epoch % settings_.saveEvery == 0 || e.epoch == settings_.options.epochs)) {
        Checkpoint checkpoint = trainer_->checkpoint();
        checkpoint.settings = recorded_;
        checkpoint.save(settings_.checkpoint);
        const Network trained = trainer_->network();
        trained.save(settings_.out);
        if (!settings_.exportOnnx.empty()) writeOnnx(trained, settings_.exportOnnx);
        checkpointedEpoch = e.epoch;
      }
      if (epochDone) epochDone(e);
    });
  } catch (const GpuFailure& failure) {
    // What was written stays; say where to pick up.
    const std::string from = checkpointedEpoch > resumedAfter ? settings_.checkpoint : settings_.resume;
    throw GpuFailure(std::string(failure.what()) +
                     (from.empty() ? "; no checkpoint was written yet, so start again"
                                   : "; the checkpoint after epoch " + std::to_string(checkpointedEpoch) + " is intact: " +
                                         resumeHint(from, settings_.out)));
  }
}

void TrainingRun::stop() { trainer_.reset(); }

std::string TrainingRun::filesWritten() const { return filesWrittenLine(settings_.out, settings_.checkpoint, settings_.exportOnnx); }

}  // namespace glnet
