// A training run's options, described once (trainingFlags): read and checked before anything is loaded, named as the
// front end takes them, and restored from the settings a checkpoint records.
#include "base/check.h"
#include "train/TrainingRun.h"

#include "support/TempDir.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <set>

using namespace glnet;

namespace {

std::string usageError(const std::map<std::string, std::string>& given) {
  const Communicator one;
  try {
    TrainingRun run(given, one);
  } catch (const UsageError& error) {
    return error.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a training run's options are one list: each named once, a switch without a default, every flag's value read") {
  std::set<std::string> names;
  for (const TrainingFlag& flag : trainingFlags()) {
    CHECK_MESSAGE(names.insert(flag.name).second, flag.name);
    CHECK_MESSAGE(!flag.help.empty(), flag.name);
    if (flag.value.empty()) CHECK_MESSAGE(flag.defaultValue.empty(), flag.name);
  }
  // What glnet_train --help lists first and last; the recorded ones are what --resume restores.
  CHECK(trainingFlags().front().name == "out");
  CHECK(trainingFlags().back().name == "all-reduce");
  for (const char* name : {"out", "resume", "checkpoint", "export-onnx", "save-every", "progress-every"}) {
    CHECK_FALSE_MESSAGE(std::find_if(trainingFlags().begin(), trainingFlags().end(),
                                     [&](const TrainingFlag& flag) { return flag.name == name; })->recorded,
                        name);
  }
}

TEST_CASE("a training run refuses bad options before it reads anything, naming them as the front end takes them") {
  const test::TempDir dir;
  const std::string out = dir.file("m.safetensors");
  CHECK(usageError({}) == "--out is required");
  CHECK(usageError({{"out", out}, {"dataset", "cifar"}}) == "--dataset is mnist, fashion, cifar10, folder, text or ids, not 'cifar'");
  CHECK(usageError({{"out", out}, {"batch", "8"}, {"batch-per-rank", "4"}}) == "--batch and --batch-per-rank exclude each other");
  CHECK(usageError({{"out", out}, {"epochs", "0"}}) == "--epochs must be an integer from 1 to 1000000, not '0'");
  CHECK(usageError({{"out", out}, {"weights", "x"}}) == "unknown option --weights");
  setOptionSpelling(OptionSpelling::keywords);
  const std::string keywords = usageError({{"out", out}, {"label-smoothing", "1.5"}});
  const std::string dataset = usageError({{"out", out}, {"dataset", "imagenet"}});
  setOptionSpelling(OptionSpelling::flags);
  CHECK(keywords == "label_smoothing must be from 0 to below 1");
  CHECK(dataset == "the dataset is mnist, fashion, cifar10, folder, text or ids, not 'imagenet'");
}

TEST_CASE("a training run takes a report interval from 0.01 to 86400 seconds, not 0, a negative one or NaN") {
  const test::TempDir dir;
  const Communicator one;
  TrainingRun run({{"out", dir.file("m.safetensors")}}, one);
  for (const double seconds : {0.0, -1.0, 0.009, 86401.0, std::nan("")}) {
    CHECK_THROWS_WITH_AS(run.reportEvery(seconds), "progress_seconds is from 0.01 to 86400", UsageError);
  }
  run.reportEvery(0.01);
  CHECK(run.settings().options.reportSeconds == 0.01);
  run.reportEvery(86400);
  CHECK(run.settings().options.reportSeconds == 86400);
}

TEST_CASE("a run stopped by the GPU says how to continue from its checkpoint as the front end can") {
  CHECK(resumeHint("m.checkpoint.safetensors", "m.safetensors") == "continue with --resume m.checkpoint.safetensors");
  setOptionSpelling(OptionSpelling::keywords);  // glnet.train has no resume: the command does it
  const std::string python = resumeHint("m.checkpoint.safetensors", "m.safetensors");
  setOptionSpelling(OptionSpelling::flags);
  CHECK(python == "continue with glnet_train --resume m.checkpoint.safetensors --out m.safetensors");
}

TEST_CASE("a training run resumed from a checkpoint takes the settings it records unless given, and records its own") {
  const test::TempDir dir;
  Checkpoint checkpoint;
  checkpoint.network = Network::create("784-16-10", Activation::relu, 0);
  checkpoint.epochsDone = 1;
  checkpoint.settings = {{"lr", "0.05"}, {"epochs", "2"}, {"seed", "7"}, {"out", "elsewhere.safetensors"}, {"unknown", "1"}};
  const std::string path = dir.file("m.checkpoint.safetensors");
  checkpoint.save(path);
  const Communicator one;
  const TrainingRun run({{"out", dir.file("n.safetensors")}, {"resume", path}, {"seed", "3"}}, one);
  const TrainingSettings& settings = run.settings();
  CHECK(settings.options.optimizer.learningRate == doctest::Approx(0.05));
  CHECK(settings.options.epochs == 2);
  CHECK(settings.options.seed == 3);  // given: the checkpoint's 7 gives way, with a note
  CHECK(settings.network.seed == 3);
  CHECK(settings.out == dir.file("n.safetensors"));  // not a setting of the run
  CHECK(settings.checkpoint == dir.file("n.checkpoint.safetensors"));
  CHECK(settings.resume == path);
}
