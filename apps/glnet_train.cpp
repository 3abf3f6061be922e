// glnet_train: trains an MLP classifier on MNIST or Fashion-MNIST on the GPU, data resident, one recorded
// training step replayed per batch.
#include "common/Cli.h"
#include "data/Idx.h"
#include "data/ImageFolder.h"
#include "convert/OnnxExport.h"
#include "base/Stopwatch.h"
#include "base/check.h"
#include "train/Trainer.h"
#include "train/TrainingInputs.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>
#include <optional>
#include <set>

#include <unistd.h>

using namespace glnet;

namespace {

// The flags that define a run, recorded in its checkpoints.
const std::set<std::string> trainingFlags = {"arch", "net", "init", "activation", "epochs", "batch", "batch-per-rank", "accumulate", "grad-compression", "lr", "optimizer", "dataset", "data", "size", "val-fraction",
                                             "train-limit", "test-limit", "num-classes", "full-batch", "no-standardize", "seed", "log-every",
                                             "bucket-mb", "all-reduce", "weight-decay", "nesterov", "clip-norm", "schedule", "warmup-epochs",
                                             "step-epochs", "step-gamma", "augment-shift", "augment-flip", "label-smoothing"};

}  // namespace

int main(int argc, char** argv) {
  return cli::runRanks("glnet_train", [&](const Communicator& ranks) {
    cli::Parser parser("glnet_train",
                       "Trains an MLP, the MNIST CNN or a described network (--net, --arch lenet5 or resnet8) on the GPU: the\n"
                       "dataset is uploaded once as uint8, each step (gather, augment, normalize, forward, loss, backward,\n"
                       "update) is one recorded plan replayed with no host round trip,\n"
                       "and the loss is read back only at log intervals. A checkpoint is written after every epoch.\n"
                       "Under mpirun (mpirun -np N glnet_train ...) the N ranks train one model data-parallel: --batch stays\n"
                       "the global batch, each rank takes its share of every batch on its own GPU (the host's rank modulo\n"
                       "its GPUs, unless --device says otherwise), gradients are summed every step, and rank 0 alone\n"
                       "prints and writes the model and checkpoints.",
                       "--out MODEL.safetensors [options]");
    parser.option("out", "FILE", "where to write the trained model (safetensors)")
        .option("arch", "ARCH",
                "cnn (conv5x5x32-pool-conv5x5x64-pool-fc512-fc10), lenet5 or resnet8 (built-in descriptions, with batch "
                "normalization and residuals: nets/ in the source), or MLP layer sizes joined by '-'",
                "784-128-10")
        .option("net", "NET.json|MODEL.onnx",
                "train the network this description file gives (README: 'Your own network and data'), or fine-tune this ONNX "
                "model from its weights (exported from PyTorch, or by glnet); replaces --arch")
        .option("export-onnx", "FILE", "also write the trained model as ONNX (opset 17) after every epoch, as the model file is")
        .option("init", "MODEL", "start from this model file's weights (a glnet or PyTorch safetensors file of the same network) "
                "instead of a random initialisation")
        .option("num-classes", "N", "replace the network's last layer (dense or convolution) by a freshly initialised one for N "
                "classes, keeping every other weight: fine-tuning --init's or --net's model on a data set of other classes")
        .option("activation", "NAME", "hidden activation: relu, tanh or sigmoid", "relu")
        .option("epochs", "N", "epochs (with --full-batch: iterations; tested and checkpointed every 100)", "5")
        .option("batch", "N", "images per step (under mpirun: across all ranks)", "64")
        .option("batch-per-rank", "N", "under mpirun, instead of --batch: N images per step on each rank, so that the global batch "
                "grows with the ranks (weak scaling). --lr is not scaled: it applies to the mean gradient of the global batch, as "
                "with --batch; Goyal et al.'s linear rule multiplies it by the ranks")
        .option("accumulate", "N", "sum the gradients of N batches before each update (under mpirun, before the one sum over "
                "ranks of each step): the update takes the mean gradient of N x --batch images, in the memory of one batch; --lr "
                "applies to that mean, as for one batch N times as large", "1")
        .option("lr", "RATE", "learning rate", "0.1")
        .option("optimizer", "NAME", "sgd, momentum (0.9), adam or adamw (decoupled weight decay)", "sgd")
        .option("weight-decay", "L", "weight decay of the weights (not of biases and batch normalization): L2 for sgd, momentum "
                "and adam, decoupled for adamw", "0")
        .flag("nesterov", "Nesterov momentum (with --optimizer momentum)")
        .option("clip-norm", "N", "scale the gradients so that their global L2 norm is at most N (0: no clipping)", "0")
        .option("schedule", "NAME", "learning rate schedule: constant, cosine (to 0 at the end), step (times --step-gamma every "
                "--step-epochs) or onecycle (PyTorch's OneCycleLR with --lr as its peak)", "constant")
        .option("warmup-epochs", "E", "first raise the learning rate linearly over E epochs (may be fractional; not with onecycle)", "0")
        .option("step-epochs", "N", "the step schedule's interval in epochs", "30")
        .option("step-gamma", "G", "the step schedule's factor", "0.1")
        .option("augment-shift", "N", "augment on the GPU: shift each training image by up to N pixels each way, zeros "
                "uncovered (torchvision's RandomCrop with padding N)", "0")
        .flag("augment-flip", "augment on the GPU: flip each training image horizontally with probability 1/2")
        .option("label-smoothing", "E", "train towards (1 - E) on the label and E/classes on every class (the train loss "
                "reported includes it)", "0")
        .option("dataset", "NAME",
                "mnist or fashion (IDX files: [N, H, W] or [N, C, H, W] images), cifar10 (its binary version: data_batch_N.bin, "
                "test_batch.bin) or folder (one sub-folder of images per class, under train/ and test/ or split by --val-fraction)",
                "mnist")
        .option("data", "DIR", "the data set's directory (default: data/mnist, or /usr/share/datasets/fashion-mnist)")
        .option("size", "N", "--dataset folder: resize images to N x N (default: the network's input size)")
        .option("val-fraction", "F", "--dataset folder without train/ and test/: hold out this fraction of each class for testing")
        .option("train-limit", "N", "train on the first N training images only")
        .option("test-limit", "N", "measure test accuracy on the first N test images only")
        .flag("full-batch", "full-batch gradient descent: every step uses all training images in order")
        .flag("no-standardize", "feed x/255 as the reference notebook does, instead of standardizing with the training set's mean and std")
        .option("seed", "N", "seed of the initial weights and the shuffling", "0")
        .option("resume", "FILE", "continue from a checkpoint written by glnet_train")
        .option("checkpoint", "FILE", "where to write checkpoints (default: OUT with .checkpoint.safetensors)")
        .option("save-every", "N", "write the model and the checkpoint after every N-th epoch and the last (a large model's files "
                "take long to write, and the GPU idles meanwhile)", "1")
        .option("log-every", "N", "steps between loss read-backs", "100")
        .option("progress-every", "SECONDS", "without a terminal (a log file, CI): a progress line at least this often",
                std::to_string(static_cast<int>(progressLineSeconds)))
        .option("grad-compression", "KIND",
                "under mpirun: none, or bf16: the gradients leave the GPU as bfloat16 (half the bytes to read, sum over ranks and "
                "write back), each step's rounding error added to the next step's gradients (error feedback); one sum per "
                "step after the backward pass, not buckets",
                "none")
        .option("bucket-mb", "MB",
                "under mpirun: gradients are summed across ranks in buckets of about MB megabytes, each as soon as "
                "the backward pass has written it; 0: one sum after the backward pass",
                "25")
        .option("all-reduce", "HOW",
                "under mpirun, how the host sums the ranks' gradients: shared-memory (ranks of one host add slices of each "
                "other's gradients in memory they share, on several threads), mpi (MPI_Allreduce), or auto: shared-memory when "
                "every rank is on one host",
                "auto")
        .common(true);
    parser.parse(argc, argv);
    if (!parser.has("out")) throw UsageError("--out is required");
    // A checkpoint carries its run's settings: flags not given now take the checkpoint's values, and one given
    // with another value is used, with a note.
    std::optional<Checkpoint> resume;
    std::map<std::string, std::string> settings;
    std::vector<std::string> resumeNotes;  // printed once the checkpoint has loaded, so that a failure stays one line
    if (parser.has("resume")) {
      const std::map<std::string, std::string> stored = Checkpoint::readSettings(parser.text("resume"));
      for (const auto& [flag, value] : stored) {
        if (!trainingFlags.count(flag)) continue;
        if (!parser.preset(flag, value) && parser.text(flag) != value) {
          resumeNotes.push_back("--" + flag + " " + parser.text(flag) + " differs from the checkpoint's " + value + "; using " + parser.text(flag));
        }
      }
    }
    for (const std::string& flag : trainingFlags) {
      if (!parser.text(flag).empty()) settings[flag] = parser.text(flag);
    }
    // The global batch follows from the ranks: a resume on other ranks keeps the batch per rank.
    if (parser.has("batch-per-rank")) settings.erase("batch");
    const Activation activation = parseActivation(parser.text("activation"));
    if (activation == Activation::none) throw UsageError("--activation none would make the MLP linear; use relu, tanh or sigmoid");
    TrainingOptions options;
    options.epochs = static_cast<int>(parser.integer("epochs", 1, 1000000));
    if (parser.has("batch-per-rank") && parser.has("batch")) throw UsageError("--batch and --batch-per-rank exclude each other");
    options.batch = parser.has("batch-per-rank")
                        ? static_cast<std::uint32_t>(parser.integer("batch-per-rank", 1, (1 << 20) / ranks.size()) * ranks.size())
                        : static_cast<std::uint32_t>(parser.integer("batch", 1, 1 << 20));
    options.accumulate = static_cast<std::uint32_t>(parser.integer("accumulate", 1, 65536));
    if (parser.text("grad-compression") != "none" && parser.text("grad-compression") != "bf16") {
      throw UsageError("--grad-compression takes none or bf16, not '" + parser.text("grad-compression") + "'");
    }
    options.compressGradients = parser.text("grad-compression") == "bf16";
    const std::string allReduce = parser.text("all-reduce");
    if (allReduce != "auto" && allReduce != "mpi" && allReduce != "shared-memory") {
      throw UsageError("--all-reduce takes auto, mpi or shared-memory, not '" + allReduce + "'");
    }
    options.allReduce = allReduce == "mpi"             ? TrainingOptions::AllReduce::mpi
                        : allReduce == "shared-memory" ? TrainingOptions::AllReduce::sharedMemory
                                                       : TrainingOptions::AllReduce::automatic;
    options.fullBatch = parser.has("full-batch");
    options.optimizer.kind = parseOptimizer(parser.text("optimizer"));
    options.optimizer.learningRate = static_cast<float>(parser.number("lr"));
    options.optimizer.weightDecay = static_cast<float>(parser.number("weight-decay"));
    options.optimizer.nesterov = parser.has("nesterov");
    options.optimizer.clipNorm = static_cast<float>(parser.number("clip-norm"));
    options.schedule.kind = parseSchedule(parser.text("schedule"));
    options.schedule.gamma = parser.number("step-gamma");
    options.warmupEpochs = parser.number("warmup-epochs");
    options.stepEpochs = parser.number("step-epochs");
    options.augment.shift = static_cast<std::uint32_t>(parser.integer("augment-shift", 0, 64));
    options.augment.flip = parser.has("augment-flip");
    options.labelSmoothing = static_cast<float>(parser.number("label-smoothing"));
    checkTrainingOptions(options);
    options.seed = static_cast<std::uint32_t>(parser.integer("seed", 0, UINT32_MAX));
    DataChoice dataChoice = cli::dataChoice(parser, options.seed);
    options.logEvery = static_cast<std::size_t>(parser.integer("log-every", 1, 1L << 30));
    const double progressSeconds = parser.number("progress-every");
    if (!(progressSeconds >= 0.01 && progressSeconds <= 86400)) throw UsageError("--progress-every must be from 0.01 to 86400 seconds");
    // The trainer reports at least twice per interval, so that a line is never much later than promised.
    options.reportSeconds = progressSeconds / 4;
    const double bucketMegabytes = parser.number("bucket-mb");
    if (!(bucketMegabytes >= 0 && bucketMegabytes <= 1e6)) throw UsageError("--bucket-mb must be a number of megabytes from 0 to 1000000");
    options.allReduceBucketBytes = static_cast<std::size_t>(bucketMegabytes * 1e6);
    // Full-batch iterations are single steps: test, checkpoint and report every 100 of them.
    options.evaluateEvery = options.fullBatch ? 100 : 1;
    const auto saveEvery = static_cast<int>(parser.integer("save-every", 1, 1 << 30));
    const std::string out = parser.text("out");
    const std::string checkpointPath = parser.has("checkpoint") ? parser.text("checkpoint") : defaultCheckpointPath(out);
    const bool json = parser.has("json");
    checkWritable(out);
    checkWritable(checkpointPath);
    if (parser.has("export-onnx")) checkWritable(parser.text("export-onnx"));
    const ContextOptions contextOptions = parser.contextOptions(ranks);

    const bool leader = ranks.rank() == 0;
    std::FILE* info = json ? stderr : stdout;
    std::optional<Context> context;
    std::optional<Trainer> trainer;
    Network initial;
    std::size_t trainCount = 0;
    cli::setUpTogether(ranks, [&] {
      NetworkChoice networkChoice;
      networkChoice.arch = parser.text("arch");
      networkChoice.net = parser.text("net");
      networkChoice.init = parser.text("init");
      networkChoice.activation = activation;
      networkChoice.seed = options.seed;
      if (parser.has("num-classes")) networkChoice.classes = static_cast<std::uint32_t>(parser.integer("num-classes", 2, 256));
      StartingNetwork start = startingNetwork(networkChoice);
      dataChoice.trainLimit = parser.has("train-limit") ? static_cast<std::size_t>(parser.integer("train-limit", 1, 1L << 40)) : 0;
      dataChoice.testLimit = parser.has("test-limit") ? static_cast<std::size_t>(parser.integer("test-limit", 1, 1L << 40)) : 0;
      DataSets sets = loadDataSets(dataChoice, start.network);
      LabelledImages& train = sets.train;
      LabelledImages& test = sets.test;
      trainCount = train.images.count;
      initial = start.network;
      // An ONNX model that records its input's normalization (glnet's exports) keeps it: its weights expect it.
      if (start.recordedInput && !parser.has("no-standardize")) {
        initial.input = *start.recordedInput;
      } else if (!parser.has("no-standardize")) {
        initial.input = standardization(train.images);
      }
      if (parser.has("resume")) {
        resume = Checkpoint::load(parser.text("resume"), initial.architecture, options.optimizer.kind);
        if (resume->network.activation != activation) {
          throw Error(parser.text("resume") + ": the checkpoint uses activation " + activationName(resume->network.activation) +
                      ", not " + activationName(activation));
        }
        if (resume->epochsDone >= options.epochs) {
          throw Error(parser.text("resume") + ": the run is complete (" + std::to_string(resume->epochsDone) + " of " +
                      std::to_string(options.epochs) + " epochs done); to train on, give --epochs more than " +
                      std::to_string(resume->epochsDone));
        }
        initial = resume->network;
      }
      context.emplace(contextOptions);
      if (ranks.distributed()) {
        std::fprintf(info, "rank %d of %d (host rank %d): device %d: %s\n", ranks.rank(), ranks.size(), ranks.localRank(),
                     context->device().index, context->device().renderer.c_str());
      } else {
        std::fprintf(info, "device %d: %s\n", context->device().index, context->device().renderer.c_str());
      }
      std::fflush(info);
      trainer.emplace(*context, initial, train, test, options, ranks);
      if (resume) trainer->restore(*resume);
    });
    if (leader) {
      const std::size_t steps = trainer->stepsPerEpoch();
      std::fprintf(info, "training %s (%s) on %zu %s images, %s, %zu step%s per %s, %s lr %g (%s), seed %u; compile %.0f ms\n",
                   initial.architecture.c_str(), activationName(activation), trainCount, dataChoice.dataset.c_str(),
                   options.fullBatch ? "full batch" : ("batch " + std::to_string(options.batch)).c_str(), steps, steps == 1 ? "" : "s",
                   options.fullBatch ? "iteration" : "epoch", optimizerName(options.optimizer.kind),
                   static_cast<double>(options.optimizer.learningRate), scheduleName(options.schedule.kind), options.seed,
                   trainer->compileMilliseconds());
      const std::size_t imagesPerStep = std::size_t{options.batch} * options.accumulate;
      if (options.accumulate > 1) {
        std::fprintf(info, "each step sums the gradients of %u batches of %u before its update: %zu images per step\n", options.accumulate,
                     options.batch, imagesPerStep);
      }
      if (const std::size_t left = options.fullBatch ? 0 : trainCount - steps * imagesPerStep; left > 0) {
        std::fprintf(info, "note: %zu is not a multiple of the %zu images of a step: each epoch trains on %zu images of its new shuffle and "
                           "leaves %zu out (other ones every epoch)\n",
                     trainCount, imagesPerStep, steps * imagesPerStep, left);
      }
      if (options.compressGradients && !ranks.distributed()) {
        std::fprintf(info, "note: --grad-compression compresses the sum over ranks; one rank has none\n");
      }
      if (ranks.distributed()) {
        std::fprintf(info, "data parallel over %d ranks: each step's %u images shared %zu to %zu per rank, gradients summed%s\n",
                     ranks.size(), options.fullBatch ? static_cast<unsigned>(trainCount) : options.batch,
                     shardOf(options.fullBatch ? trainCount : options.batch, ranks.size() - 1, ranks.size()).count,
                     shardOf(options.fullBatch ? trainCount : options.batch, 0, ranks.size()).count,
                     options.compressGradients ? " as bfloat16 with error feedback" : "");
      }
      for (const std::string& note : resumeNotes) std::fprintf(info, "note: %s\n", note.c_str());
      if (resume) std::fprintf(info, "resumed from %s after epoch %d\n", parser.text("resume").c_str(), resume->epochsDone);
      std::fflush(info);
    }

    const bool terminal = leader && isatty(STDERR_FILENO) != 0;
    // Without a terminal (a log file, CI), a plain progress line about every progressSeconds.
    Stopwatch sinceProgressLine;
    nlohmann::json epochs = nlohmann::json::array();
    int checkpointedEpoch = resume ? resume->epochsDone : 0;
    try {
      trainer->run(
          [&](const TrainingProgress& p) {
            if (!leader) return;
            if (!terminal) {
              if (sinceProgressLine.seconds() < progressSeconds * 0.75) return;
              sinceProgressLine.restart();
              std::fprintf(stderr, "%s\n", progressLine(p).c_str());
              return;
            }
            std::fprintf(stderr, "\r\033[K%s", progressLine(p).c_str());
            std::fflush(stderr);
          },
          [&](const EpochResult& e) {
            if (!e.evaluated || !leader) return;
            if (terminal) std::fprintf(stderr, "\r\033[K");
            if (e.epoch % saveEvery == 0 || e.epoch == options.epochs) {
              Checkpoint checkpoint = trainer->checkpoint();
              checkpoint.settings = settings;
              checkpoint.save(checkpointPath);
              trainer->network().save(out);
              if (parser.has("export-onnx")) writeOnnx(trainer->network(), parser.text("export-onnx"));
              checkpointedEpoch = e.epoch;
            }
            nlohmann::json epoch = {{"epoch", e.epoch}, {"train_loss", e.trainLoss}, {"train_accuracy", e.trainAccuracy},
                                    {"test_accuracy", e.testAccuracy}, {"seconds", e.seconds}, {"samples_per_second", e.samplesPerSecond}};
            std::fprintf(info, "%s", epochLine(e, options.epochs, options.fullBatch).c_str());
            if (ranks.distributed()) {
              epoch["compute_ms_per_step"] = e.computeMsPerStep;
              epoch["communication_ms_per_step"] = e.communicationMsPerStep();
              epoch["exposed_communication_ms_per_step"] = e.exposedCommunicationMsPerStep;
              epoch["gradient_read_ms_per_step"] = e.gradientReadMsPerStep;
              epoch["all_reduce_ms_per_step"] = e.allReduceMsPerStep;
              epoch["gradient_write_ms_per_step"] = e.gradientWriteMsPerStep;
              epoch["all_reduce_buckets"] = e.allReduceBuckets;
              epoch["all_reduce"] = e.sharedMemorySum ? "shared-memory" : "mpi";
              epoch["gpu_ms_per_step"] = e.gpuMsPerStep;
              nlohmann::json timeline = nlohmann::json::array();
              for (const StepTiming& t : e.timeline) {
                timeline.push_back({{"start_ms", t.startMs}, {"gpu_ms", t.gpuMs}, {"backward_done_ms", t.backwardDoneMs},
                                    {"read_ms", t.readMs}, {"all_reduce_ms", t.allReduceMs}, {"write_ms", t.writeMs},
                                    {"exposed_ms", t.exposedMs}, {"step_ms", t.stepMs}});
              }
              epoch["timeline"] = std::move(timeline);
              if (e.allReduceBuckets > 1) {
                std::fprintf(info, "; per step %.3f ms compute, %.3f ms communication in %zu buckets, %.3f ms of it exposed (all-reduce %.3f from the first bucket, write %.3f)",
                             e.computeMsPerStep, e.communicationMsPerStep(), e.allReduceBuckets, e.exposedCommunicationMsPerStep,
                             e.allReduceMsPerStep, e.gradientWriteMsPerStep);
              } else {
                std::fprintf(info, "; per step %.3f ms compute, %.3f ms communication, all exposed (read %.3f, %s %.3f, write %.3f)",
                             e.computeMsPerStep, e.communicationMsPerStep(), e.gradientReadMsPerStep,
                             e.sharedMemorySum ? "shared-memory sum" : "all-reduce", e.allReduceMsPerStep, e.gradientWriteMsPerStep);
              }
            }
            std::fprintf(info, "\n");
            epochs.push_back(epoch);
            std::fflush(info);
          });
    } catch (const GpuFailure& failure) {
      // What was written stays; say where to pick up.
      const bool wroteOne = checkpointedEpoch > (resume ? resume->epochsDone : 0);
      const std::string from = wroteOne ? checkpointPath : resume ? parser.text("resume") : std::string();
      throw Error(std::string(failure.what()) +
                  (from.empty() ? "; no checkpoint was written yet, so start again"
                                : "; the checkpoint after epoch " + std::to_string(checkpointedEpoch) + " is intact: continue with --resume " + from));
    }
    if (!leader) return 0;
    std::fprintf(info, "%s\n", filesWrittenLine(out, checkpointPath, parser.has("export-onnx") ? parser.text("export-onnx") : "").c_str());
    if (json) {
      nlohmann::json report{{"device", context->device().renderer}, {"architecture", initial.architecture}, {"ranks", ranks.size()},
                            {"model", out}, {"checkpoint", checkpointPath}, {"epochs", epochs}};
      if (parser.has("export-onnx")) report["onnx"] = parser.text("export-onnx");
      std::cout << report.dump(2) << "\n";
    }
    return 0;
  });
}
