// glnet_train: trains an MLP classifier on MNIST or Fashion-MNIST on the GPU, data resident, one recorded
// training step replayed per batch. The run itself is train/TrainingRun, which glnet.train shares; this parses its
// flags, opens the device and prints.
#include "common/Cli.h"
#include "common/Tuning.h"
#include "base/Stopwatch.h"
#include "base/check.h"
#include "train/TrainingRun.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>
#include <optional>

#include <unistd.h>

using namespace glnet;

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
    for (const TrainingFlag& flag : trainingFlags()) {
      if (flag.value.empty()) {
        parser.flag(flag.name, flag.help);
      } else {
        parser.option(flag.name, flag.value, flag.help, flag.defaultValue);
      }
    }
    parser.common(true);
    parser.parse(argc, argv);
    std::map<std::string, std::string> given;
    for (const TrainingFlag& flag : trainingFlags()) {
      if (parser.has(flag.name)) given[flag.name] = parser.text(flag.name);
    }
    std::optional<Context> context;  // outlives the run, whose GPU resources go first
    TrainingRun run(given, ranks);
    const TrainingSettings& settings = run.settings();
    const TrainingOptions& options = settings.options;
    const bool json = parser.has("json");
    const ContextOptions contextOptions = parser.contextOptions(ranks);

    const bool leader = ranks.rank() == 0;
    std::FILE* info = json ? stderr : stdout;
    cli::setUpTogether(ranks, [&] {
      run.load();
      context.emplace(contextOptions);
      if (ranks.distributed()) {
        std::fprintf(info, "rank %d of %d (host rank %d): device %d: %s\n", ranks.rank(), ranks.size(), ranks.localRank(),
                     context->device().index, context->device().renderer.c_str());
      } else {
        std::fprintf(info, "device %d: %s\n", context->device().index, context->device().renderer.c_str());
      }
      std::fflush(info);
      run.start(*context, [&](const std::string& candidate) {
        if (leader) std::fprintf(stderr, "glnet_train: GEMM tuning of the training step: %s\n", candidate.c_str());
      });
    });
    if (leader) {
      for (const std::string& line : run.summary()) std::fprintf(info, "%s\n", line.c_str());
      std::fflush(info);
    }

    const bool terminal = leader && isatty(STDERR_FILENO) != 0;
    // Without a terminal (a log file, CI), a plain progress line about every progressSeconds.
    Stopwatch sinceProgressLine;
    nlohmann::json epochs = nlohmann::json::array();
    run.run(
        [&](const TrainingProgress& p) {
          if (!leader) return;
          if (!terminal) {
            if (sinceProgressLine.seconds() < settings.progressSeconds * 0.75) return;
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
    if (!leader) return 0;
    std::fprintf(info, "%s\n", run.filesWritten().c_str());
    nlohmann::json profile = nlohmann::json::object();
    if (settings.profile) {
      double total = 0;
      const std::vector<std::pair<std::string, double>> kinds = run.profileStep();
      for (const auto& [kind, ms] : kinds) total += ms;
      std::fprintf(info, "one more step, each dispatch timed (not saved): %.3f ms of GPU time\n", total);
      for (const auto& [kind, ms] : kinds) {
        std::fprintf(info, "  %9.3f ms  %5.1f %%  %s\n", ms, 100 * ms / std::max(total, 1e-9), kind.c_str());
        profile[kind] = ms;
      }
    }
    if (json) {
      nlohmann::json report{{"device", context->device().renderer}, {"architecture", run.architecture()}, {"ranks", ranks.size()},
                            {"model", settings.out}, {"checkpoint", settings.checkpoint}, {"epochs", epochs}};
      if (!settings.exportOnnx.empty()) report["onnx"] = settings.exportOnnx;
      if (settings.profile) report["step_profile_ms"] = profile;
      if (run.tuning()) report["gemm_tuning"] = cli::gemmTuningJson(*run.tuning());
      std::cout << report.dump(2) << "\n";
    }
    return 0;
  });
}
