// glnet_eval: accuracy of a model on a test set (MNIST, Fashion-MNIST, CIFAR-10 or an image folder), the data resident
// on the GPU.
#include "common/Cli.h"
#include "gl/Sync.h"
#include "data/Idx.h"
#include "base/check.h"
#include "model/Classifier.h"
#include "formats/Safetensors.h"
#include "train/TrainingInputs.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <optional>

using namespace glnet;

int main(int argc, char** argv) {
  return cli::runRanks("glnet_eval", [&](const Communicator& ranks) {
    cli::Parser parser("glnet_eval",
                       "Evaluates a model file (safetensors or ONNX) on a test set, MNIST by default or what --dataset names\n"
                       "as glnet_train takes it: the images are uploaded once as uint8, batches run through one recorded\n"
                       "plan, and the predictions are read back once at the end. Under mpirun each rank evaluates its share\n"
                       "of the images on its own GPU and rank 0 prints the totals.",
                       "--model MODEL.safetensors [options]");
    parser.modelOptions("model file (safetensors, or ONNX)")
        .option("dataset", "NAME", "mnist or fashion (IDX files), cifar10 (its binary version), folder (one sub-folder of images "
                "per class, under train/ and test/ or split by --val-fraction and --seed as glnet_train split them), text or ids "
                "(token ids for a transformer, as glnet_train takes them)", "mnist")
        .option("data", "DIR", "the data set's directory (default: data/mnist, or /usr/share/datasets/fashion-mnist)")
        .option("size", "N", "--dataset folder: resize images to N x N (default: the model's input size)")
        .option("tokenizer", "FILE", "--dataset text: the tokenizer.json that makes the texts token ids (default: DIR/tokenizer.json)")
        .option("pad-id", "N", "--dataset text: the id that fills short texts (default: the pad of the model's mask layers, else 0)")
        .option("val-fraction", "F", "--dataset folder without train/ and test/: the fraction of each class held out for testing")
        .option("seed", "N", "--dataset folder with --val-fraction: the seed the held-out images were drawn with", "0")
        .option("split", "test|train", "which split to evaluate", "test")
        .option("batch", "N", "images per batch", "1000")
        .option("limit", "N", "evaluate only the first N images")
        .option("predictions", "FILE", "also write the predicted class of every image, one per line")
        .option("repeat", "N", "replay the plans N times and report the fastest run (the first also commits the buffers)", "1")
        .common(true);
    parser.parse(argc, argv);
    if (!parser.has("model")) throw UsageError("--model is required");
    const std::string splitName = parser.text("split");
    if (splitName != "test" && splitName != "train") throw UsageError("--split is test or train, not '" + splitName + "'");
    DataChoice choice = dataChoice(parser, static_cast<std::uint32_t>(parser.integer("seed", 0, UINT32_MAX)));
    const std::size_t limit = parser.has("limit") ? static_cast<std::size_t>(parser.integer("limit", 1, 1L << 40)) : 0;
    (splitName == "test" ? choice.testLimit : choice.trainLimit) = limit;
    const auto batch = static_cast<std::size_t>(parser.integer("batch", 1, 1 << 20));
    if (parser.has("predictions")) checkWritable(parser.text("predictions"));
    const ContextOptions contextOptions = parser.contextOptions(ranks);

    std::optional<Network> model;
    std::optional<Context> context;
    std::optional<Evaluation> evaluation;
    std::size_t imageCount = 0;
    cli::setUpTogether(ranks, [&] {
      model.emplace(cli::loadModel(parser));
      LabelledImages data = loadDataSplit(choice, *model, splitName == "test" ? Split::test : Split::train);
      imageCount = data.images.count;
      const Shard share = shardOf(imageCount, ranks.rank(), ranks.size());
      keepRange(data, share.first, share.count);
      context.emplace(contextOptions);
      if (share.count) evaluation = evaluate(*context, *model, data, batch, static_cast<int>(parser.integer("repeat", 1, 1000)));
    });

    // Totals over the ranks: counts summed, predictions gathered in image order on rank 0.
    Evaluation result = evaluation ? std::move(*evaluation) : Evaluation{};
    const std::size_t classCount = model->classes();
    std::vector<std::uint64_t> counts(1 + classCount * classCount, 0);
    counts[0] = result.correct;
    for (std::size_t r = 0; r < result.confusion.size(); ++r) {
      for (std::size_t c = 0; c < classCount; ++c) counts[1 + r * classCount + c] = result.confusion[r][c];
    }
    ranks.sum(counts.data(), counts.size());
    result.predictions = ranks.gather(result.predictions);
    if (ranks.rank() != 0) return 0;
    result.correct = counts[0];
    result.confusion.assign(classCount, std::vector<std::size_t>(classCount, 0));
    for (std::size_t r = 0; r < classCount; ++r) {
      for (std::size_t c = 0; c < classCount; ++c) result.confusion[r][c] = counts[1 + r * classCount + c];
    }
    result.accuracy = imageCount ? static_cast<double>(result.correct) / static_cast<double>(imageCount) : 0.0;
    const bool json = parser.has("json");
    if (!json) {
      std::printf("device %d: %s%s\n", context->device().index, context->device().renderer.c_str(),
                  ranks.distributed() ? (" (rank 0 of " + std::to_string(ranks.size()) + "; times are rank 0's share)").c_str() : "");
    }
    if (parser.has("predictions")) {
      std::string lines;
      for (const std::uint32_t prediction : result.predictions) lines += std::to_string(prediction) + "\n";
      writeFileAtomically(parser.text("predictions"), lines);
    }
    const InferenceTimes& t = result.times;
    if (json) {
      const nlohmann::json output = {
          {"device", context->device().renderer}, {"model", model->architecture}, {"images", imageCount},
          {"ranks", ranks.size()}, {"batch", std::min(batch, imageCount)}, {"correct", result.correct}, {"accuracy", result.accuracy},
          {"confusion", result.confusion}, {"class_names", model->classNames}, {"images_per_second", result.imagesPerSecond},
          {"times", {{"compile_ms", t.compileMs}, {"upload_ms", t.uploadMs}, {"issue_ms", t.issueMs},
                     {"first_issue_ms", t.firstIssueMs}, {"gpu_ms", t.gpuMs}, {"readback_ms", t.readbackMs}}},
          {"gpu_clock", TimerQuery::measuresGpu() ? "timer queries" : "wall"}};
      std::cout << output.dump(2) << "\n";
      return 0;
    }
    std::printf("model %s on %zu %s images, batch %zu\n", model->architecture.c_str(), imageCount, splitName.c_str(),
                std::min(batch, imageCount));
    std::printf("accuracy: %.2f%% (%zu of %zu)\n", 100.0 * result.accuracy, result.correct, imageCount);
    // Classes by name where the model file records them (a column as wide as its name), else by number.
    const auto name = [&](std::size_t c) { return model->classNames.empty() ? std::to_string(c) : model->classNames[c]; };
    std::size_t rowWidth = 2;
    std::vector<int> widths;
    for (std::size_t c = 0; c < result.confusion.size(); ++c) {
      rowWidth = std::max(rowWidth, name(c).size());
      widths.push_back(static_cast<int>(std::max<std::size_t>(5, name(c).size())) + 1);
    }
    std::printf("confusion (rows: true label, columns: predicted):\n  %*s ", static_cast<int>(rowWidth), "");
    for (std::size_t c = 0; c < result.confusion.size(); ++c) std::printf("%*s", widths[c], name(c).c_str());
    std::printf("\n");
    for (std::size_t r = 0; r < result.confusion.size(); ++r) {
      std::printf("  %*s ", static_cast<int>(rowWidth), name(r).c_str());
      for (std::size_t c = 0; c < result.confusion[r].size(); ++c) std::printf("%*zu", widths[c], result.confusion[r][c]);
      std::printf("\n");
    }
    std::printf("%.0f images/s\n", result.imagesPerSecond);
    // Each figure says what it measures; the first replay's issue time only when it differs from the later ones'.
    char firstRun[96] = "";
    if (std::abs(t.firstIssueMs - t.issueMs) > 0.01 * std::max(t.issueMs, 1e-3)) {
      std::snprintf(firstRun, sizeof firstRun, "; %.3f on the first run, while the driver commits fresh buffers", t.firstIssueMs);
    }
    std::printf("times in ms: compile %.2f (building the GPU programs), upload %.3f (images to the GPU), issue %.3f (CPU time "
                "to submit the dispatches%s), %s %.3f (%s), readback %.3f (predictions to the host)\n",
                t.compileMs, t.uploadMs, t.issueMs, firstRun, TimerQuery::clockName(), t.gpuMs,
                TimerQuery::measuresGpu() ? "the GPU running them, by timer queries" : "until they finished", t.readbackMs);
    return 0;
  });
}
