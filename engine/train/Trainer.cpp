#include "train/Trainer.h"

#include "base/Stopwatch.h"
#include "base/check.h"
#include "ops/Optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

namespace glnet {

InputFormat standardization(const ImageSet& images) {
  const std::size_t channels = images.channels >= 2 && images.channels <= mostScaledChannels ? images.channels : 1;
  const std::size_t plane = images.pixelsPerImage() / channels;
  std::vector<double> sums(channels, 0.0), squares(channels, 0.0);
  for (std::size_t i = 0; i < images.pixels.size(); ++i) {
    const double x = images.pixels[i] / 255.0;
    const std::size_t channel = (i % images.pixelsPerImage()) / plane;
    sums[channel] += x;
    squares[channel] += x * x;
  }
  InputFormat format{{}, {}};
  const double count = static_cast<double>(images.pixels.size() / channels);
  for (std::size_t c = 0; c < channels; ++c) {
    const double mean = sums[c] / count;
    format.mean.push_back(static_cast<float>(mean));
    format.std.push_back(static_cast<float>(std::sqrt(std::max(squares[c] / count - mean * mean, 1e-12))));
  }
  return format;
}

std::string defaultCheckpointPath(const std::string& out) {
  const std::string suffix = ".safetensors";
  const bool hasSuffix = out.size() > suffix.size() && out.compare(out.size() - suffix.size(), suffix.size(), suffix) == 0;
  return (hasSuffix ? out.substr(0, out.size() - suffix.size()) : out) + ".checkpoint.safetensors";
}

std::string progressLine(const TrainingProgress& p) {
  const long eta = std::lround(p.etaSeconds);
  char text[160];
  std::snprintf(text, sizeof text, "epoch %d/%d  step %zu/%zu  loss %.4f  %.0f samples/s  ETA %ld:%02ld", p.epoch, p.epochs, p.step, p.steps,
                p.loss, p.samplesPerSecond, eta / 60, eta % 60);
  return text;
}

std::string epochLine(const EpochResult& e, int epochs, bool fullBatch) {
  char text[200];
  std::snprintf(text, sizeof text, "%s %d/%d: train loss %.4f, train accuracy %.2f%%, test accuracy %.2f%%, %.2f s (%.0f samples/s)",
                fullBatch ? "iteration" : "epoch", e.epoch, epochs, e.trainLoss, 100 * e.trainAccuracy, 100 * e.testAccuracy, e.seconds,
                e.samplesPerSecond);
  return text;
}

std::string filesWrittenLine(const std::string& out, const std::string& checkpoint, const std::string& onnx) {
  return "wrote " + out + " (checkpoint " + checkpoint + ")" + (onnx.empty() ? "" : " and " + onnx);
}

namespace {

Shard batchShareOf(std::size_t globalRows, const Communicator& ranks) {
  const Shard share = shardOf(globalRows, ranks.rank(), ranks.size());
  if (share.count == 0) {
    throw Error("a batch of " + std::to_string(globalRows) + " images cannot be shared by " + std::to_string(ranks.size()) +
                " ranks: use " + optionName("batch") + " of at least the number of ranks");
  }
  return share;
}

const std::string settingPrefix = "setting.";

const char* stateName(OptimizerKind kind, std::size_t index) {
  if (kind == OptimizerKind::momentum) return "velocity";
  return index == 0 ? "m" : "v";
}

}  // namespace

void Checkpoint::save(const std::string& path) const {
  TensorFile file = network.toTensors();
  for (std::size_t s = 0; s < optimizerState.size(); ++s) {
    for (std::size_t p = 0; p < network.parameterNames.size(); ++p) {
      const std::string& name = network.parameterNames[p];
      file.tensors["optimizer." + std::string(stateName(optimizer, s)) + "." + name] = {network.parameters.at(name).shape,
                                                                                       optimizerState[s][p]};
    }
  }
  for (const auto& [flag, value] : settings) file.metadata[settingPrefix + flag] = value;
  file.metadata["format"] = "glnet-checkpoint";
  file.metadata["optimizer"] = optimizerName(optimizer);
  file.metadata["epochs_done"] = std::to_string(epochsDone);
  file.metadata["steps_done"] = std::to_string(stepsDone);
  writeSafetensors(path, file);
}

std::map<std::string, std::string> Checkpoint::readSettings(const std::string& path) {
  const TensorFile file = readSafetensors(path);
  const auto format = file.metadata.find("format");
  if (format == file.metadata.end() || format->second != "glnet-checkpoint") {
    throw Error(path + ": not a glnet checkpoint (glnet_train writes them beside " + optionName("out") + ", as NAME.checkpoint.safetensors)");
  }
  std::map<std::string, std::string> settings;
  for (const auto& [key, value] : file.metadata) {
    if (key.rfind(settingPrefix, 0) == 0) settings[key.substr(settingPrefix.size())] = value;
  }
  return settings;
}

Checkpoint Checkpoint::load(const std::string& path, const std::string& architecture, OptimizerKind optimizer) {
  TensorFile file = readSafetensors(path);
  const auto meta = [&](const std::string& key) {
    const auto found = file.metadata.find(key);
    if (found == file.metadata.end()) throw Error(path + ": not a glnet checkpoint (no " + key + " in its metadata)");
    return found->second;
  };
  if (meta("format") != "glnet-checkpoint") throw Error(path + ": not a glnet checkpoint (format " + meta("format") + ")");
  if (meta("architecture") != architecture) {
    throw Error(path + ": the checkpoint is architecture " + meta("architecture") + ", not " + architecture +
                "; resume with " + optionSetting("arch", meta("architecture")));
  }
  if (meta("optimizer") != optimizerName(optimizer)) {
    throw Error(path + ": the checkpoint was trained with " + optionSetting("optimizer", meta("optimizer")) + ", not " + optimizerName(optimizer));
  }
  Checkpoint checkpoint;
  checkpoint.optimizer = optimizer;
  const auto count = [&](const std::string& key, std::uint64_t largest) {
    const std::string text = meta(key);
    const bool digits = !text.empty() && text.size() <= 19 && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits || std::stoull(text) > largest) throw Error(path + ": the checkpoint's " + key + " is not a count (" + text.substr(0, 20) + ")");
    return std::stoull(text);
  };
  checkpoint.epochsDone = static_cast<int>(count("epochs_done", 1000000));
  checkpoint.stepsDone = count("steps_done", std::uint64_t{1} << 62);
  TensorFile modelFile;
  std::map<std::string, HostTensor> state;
  for (auto& [key, value] : file.metadata) {
    (key.rfind(settingPrefix, 0) == 0 ? checkpoint.settings[key.substr(settingPrefix.size())] : modelFile.metadata[key]) = value;
  }
  for (auto& [name, tensor] : file.tensors) {
    (name.rfind("optimizer.", 0) == 0 ? state : modelFile.tensors)[name] = std::move(tensor);
  }
  checkpoint.network = Network::fromTensors(modelFile, path);
  // Every optimizer tensor must be the state of one parameter, shaped like it: the GPU buffers are sized
  // from the network, so anything else would write past them.
  checkpoint.optimizerState.resize(OptimizerOp::stateBuffers(optimizer));
  for (std::size_t s = 0; s < checkpoint.optimizerState.size(); ++s) {
    for (const std::string& parameter : checkpoint.network.parameterNames) {
      const std::string name = "optimizer." + std::string(stateName(optimizer, s)) + "." + parameter;
      const auto found = state.find(name);
      if (found == state.end()) throw Error(path + ": the checkpoint lacks " + name);
      if (found->second.shape != checkpoint.network.parameters.at(parameter).shape) {
        throw Error(path + ": tensor " + name + " is not shaped like " + parameter + "; the checkpoint is damaged");
      }
      checkpoint.optimizerState[s].push_back(std::move(found->second.values));
      state.erase(found);
    }
  }
  if (!state.empty()) {
    throw Error(path + ": unexpected tensor " + state.begin()->first + " in a checkpoint of " + checkpoint.network.architecture +
                " trained with " + optimizerName(optimizer));
  }
  return checkpoint;
}

Trainer::Trainer(const Context& context, const Network& initial, const LabelledImages& train, const LabelledImages& test,
                 const TrainingOptions& options, const Communicator& ranks)
    : context_(context),
      ranks_(ranks),
      shape_(initial),
      options_(options),
      trainCount_(train.images.count),
      stepsPerEpoch_(options.fullBatch ? 1 : train.images.count / (std::size_t{options.batch} * options.accumulate)),
      globalRows_(options.fullBatch ? static_cast<std::uint32_t>(train.images.count) : options.batch),
      batchShare_(batchShareOf(globalRows_, ranks)),
      testShare_(shardOf(test.images.count, ranks.rank(), ranks.size())),
      trainImages_(uploadImages(train.images)),
      testImages_(uploadImages(test.images, testShare_.first, testShare_.count)),
      trainLabels_(train.labels.size(), 1),
      indices_(train.images.count * sizeof(std::uint32_t)),
      augment_(options.augment.enabled() ? train.images.count * sizeof(std::uint32_t) : sizeof(std::uint32_t)),
      testLabels_(test.labels.begin() + static_cast<std::ptrdiff_t>(testShare_.first),
                  test.labels.begin() + static_cast<std::ptrdiff_t>(testShare_.first + testShare_.count)),
      nodes_(buildGraph(initial, static_cast<std::uint32_t>(batchShare_.count), true, options.labelSmoothing)),
      graph_(context, nodes_.graph, nodes_.loss, {nodes_.correct}, options.optimizer),
      plan_(context.limits()) {
  checkFits(initial, train, options);
  const std::uint32_t rows = graph_.rows();
  const auto pixels = static_cast<std::uint32_t>(initial.inputs());
  trainLabels_.upload(train.labels);
  const GatherOp gather(feedPrograms_);
  const CompiledGraph::Feed feed = [&](Plan& plan) {
    firstRowParameter_ = plan.addParameter(0);
    if (train.images.tokenIds()) {
      plan.record(gather.tokens(trainImages_.pixels, indices_, graph_.view(nodes_.images), rows, pixels, firstRowParameter_));
    } else if (options.augment.enabled()) {
      plan.record(gather.augmentedImages(trainImages_.pixels, indices_, augment_, graph_.view(nodes_.images), rows, pixels,
                                         static_cast<std::uint32_t>(train.images.rows), static_cast<std::uint32_t>(train.images.columns),
                                         firstRowParameter_, initial.input));
    } else {
      plan.record(gather.images(trainImages_.pixels, indices_, graph_.view(nodes_.images), rows, pixels, firstRowParameter_, initial.input));
    }
    plan.record(gather.labels(trainLabels_.pixels, indices_, graph_.view(nodes_.labels), rows, firstRowParameter_));
  };
  options_.schedule.peak = options.optimizer.learningRate;
  options_.schedule.totalSteps = std::max<std::uint64_t>(static_cast<std::uint64_t>(options.epochs) * stepsPerEpoch_, 1);
  options_.schedule.warmupSteps = static_cast<std::uint64_t>(std::llround(options.warmupEpochs * static_cast<double>(stepsPerEpoch_)));
  options_.schedule.stepSize = std::max<std::uint64_t>(static_cast<std::uint64_t>(std::llround(options.stepEpochs * static_cast<double>(stepsPerEpoch_))), 1);
  if (!ranks.distributed() && options.accumulate == 1) {
    plan_ = graph_.trainingPlan(feed);
  } else {
    graph_.averageOver(globalRows_ * options.accumulate);
    plan_ = graph_.gradientPlan(feed);
    updatePlan_.emplace(graph_.updatePlan());
    exchange_ = std::make_unique<GradientExchange>(context, graph_, plan_, feedPrograms_, options, ranks);
  }
  // Every program a step runs is compiled here, in the set-up, whose failures every rank shares (the graph's plans
  // come back compiled; the gradients' copies are the exchange's).
  feedPrograms_.finishAll();
}

void Trainer::checkFits(const Network& initial, const LabelledImages& train, const TrainingOptions& options) {
  if (train.images.tokenIds() && options.augment.enabled()) {
    throw UsageError(optionName(options.augment.shift ? "augment-shift" : "augment-flip") + " moves images' pixels; texts have none");
  }
  if (train.images.pixelsPerImage() != initial.inputs()) {
    throw Error("the model takes " + std::to_string(initial.inputs()) + " inputs but the training images have " +
                std::to_string(train.images.pixelsPerImage()) + " pixels");
  }
  if (!options.fullBatch && train.images.count < std::size_t{options.batch} * options.accumulate) {
    const std::string batch = optionSetting("batch", std::to_string(options.batch));
    throw Error((options.accumulate > 1 ? batch + " x " + optionSetting("accumulate", std::to_string(options.accumulate)) : batch) +
                " is larger than the " + std::to_string(train.images.count) + " training images");
  }
}

std::vector<std::pair<std::string, double>> Trainer::timeStep() const {
  std::vector<std::pair<std::string, double>> timed;
  for (const Plan* plan : {&plan_, updatePlan_ ? &*updatePlan_ : nullptr}) {
    if (!plan) continue;
    const std::vector<double> milliseconds = plan->runTimed();
    const std::vector<std::string> labels = plan->labels();
    for (std::size_t d = 0; d < labels.size(); ++d) timed.emplace_back(labels[d], milliseconds[d]);
  }
  return timed;
}

std::uint32_t Trainer::firstRow(std::size_t step, std::uint32_t batch) const {
  return static_cast<std::uint32_t>(((step - 1) * options_.accumulate + batch) * globalRows_ + batchShare_.first);
}

std::vector<double> Trainer::totalsOverRanks(int epoch, std::size_t fromStep, std::size_t toStep) const {
  std::vector<double> totals = graph_.readTotals();
  ranks_.sum(totals.data(), totals.size());
  if (!std::isfinite(totals[0])) {
    throw SharedError("the loss became " + std::string(std::isnan(totals[0]) ? "NaN" : "infinite") + " in epoch " +
                      std::to_string(epoch) + " between steps " + std::to_string(fromStep) + " and " + std::to_string(toStep) +
                      "; training stopped and the last checkpoint is intact (try a lower " + optionName("lr") + ")");
  }
  return totals;
}

double Trainer::testAccuracy() const {
  std::uint64_t correctAndCount[2] = {0, testImages_.count};
  if (testImages_.count) correctAndCount[0] = evaluate(context_, network(), testImages_, testLabels_, 1000).correct;
  ranks_.sum(correctAndCount, 2);
  return correctAndCount[1] ? static_cast<double>(correctAndCount[0]) / static_cast<double>(correctAndCount[1]) : 0.0;
}

// Each rank moved its running statistics by its own share of every batch; their mean over the ranks is, to first
// order, what one rank seeing the whole batches would hold (PyTorch's DistributedDataParallel broadcasts rank 0's).
void Trainer::averageStateOverRanks() {
  if (!ranks_.distributed()) return;
  const Graph& graph = graph_.graph();
  const std::vector<Tensor> parameters = graph.parameters();
  std::vector<std::vector<float>> values = graph_.readParameters();
  std::vector<float> state;
  for (std::size_t p = 0; p < parameters.size(); ++p) {
    if (!graph.tensor(parameters[p]).needsGradient) state.insert(state.end(), values[p].begin(), values[p].end());
  }
  if (state.empty()) return;
  ranks_.sum(state.data(), state.size());
  const float share = 1.0f / static_cast<float>(ranks_.size());
  std::size_t at = 0;
  for (std::size_t p = 0; p < parameters.size(); ++p) {
    if (graph.tensor(parameters[p]).needsGradient) continue;
    for (float& value : values[p]) value = state[at++] * share;
  }
  graph_.writeParameters(values);
}

void Trainer::restore(const Checkpoint& checkpoint) {
  graph_.writeParameters(checkpoint.network.parameterValues());
  graph_.writeOptimizerState(checkpoint.optimizerState);
  epochsDone_ = checkpoint.epochsDone;
  stepsDone_ = checkpoint.stepsDone;
}

std::vector<std::uint32_t> Trainer::epochOrder(int epoch) const {
  std::vector<std::uint32_t> order(trainCount_);
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::uint32_t>(i);
  if (options_.fullBatch) return order;
  // Fisher-Yates with mt19937 (not std::shuffle, whose algorithm varies by library): the same seed and
  // epoch give the same order everywhere.
  std::mt19937 random(options_.seed * 1000003u + static_cast<std::uint32_t>(epoch));
  for (std::size_t i = order.size() - 1; i > 0; --i) {
    const std::size_t j = random() % (i + 1);
    std::swap(order[i], order[j]);
  }
  return order;
}

std::vector<std::uint32_t> Trainer::epochAugmentation(int epoch) const {
  // Its own stream (not the shuffle's), drawn with plain modulo arithmetic so that every library gives the same.
  std::mt19937 random(options_.seed * 2654435761u + static_cast<std::uint32_t>(epoch) * 40503u + 12345u);
  const std::uint32_t span = 2 * options_.augment.shift + 1;
  std::vector<std::uint32_t> packed(trainCount_);
  for (std::uint32_t& value : packed) {
    const int dx = static_cast<int>(random() % span) - static_cast<int>(options_.augment.shift);
    const int dy = static_cast<int>(random() % span) - static_cast<int>(options_.augment.shift);
    const bool flip = options_.augment.flip && (random() & 1u) != 0;
    value = GatherOp::packAugmentation(dx, dy, flip);
  }
  return packed;
}

void Trainer::run(const std::function<void(const TrainingProgress&)>& progress,
                  const std::function<void(const EpochResult&)>& epochDone) {
  if (exchange_) exchange_->open();
  const Stopwatch runClock;
  const std::size_t totalSteps = static_cast<std::size_t>(options_.epochs - epochsDone_) * stepsPerEpoch_;
  std::size_t stepsThisRun = 0;
  for (int epoch = epochsDone_ + 1; epoch <= options_.epochs; ++epoch) {
    const Stopwatch epochClock;
    indices_.upload(epochOrder(epoch));
    if (options_.augment.enabled()) augment_.upload(epochAugmentation(epoch));
    graph_.resetTotals();
    double epochLoss = 0, epochCorrect = 0, previousLoss = 0;
    EpochResult result;
    std::size_t reportedStep = 0;
    Stopwatch sinceReport;
    for (std::size_t step = 1; step <= stepsPerEpoch_; ++step) {
      plan_.setParameter(CompiledGraph::stepParameter, static_cast<std::uint32_t>(++stepsDone_));
      CompiledGraph::setLearningRate(updatePlan_ ? *updatePlan_ : plan_, static_cast<float>(options_.schedule.at(stepsDone_)));
      if (updatePlan_) {
        StepTiming timing;
        timing.startMs = epochClock.milliseconds();
        const Stopwatch stepClock;
        const std::size_t sums = exchange_->run(
            plan_, [&](std::uint32_t batch) { plan_.setParameter(firstRowParameter_, firstRow(step, batch)); }, stepClock, timing);
        if (sums > 0) result.allReduceBuckets = sums;
        updatePlan_->setParameter(CompiledGraph::stepParameter, static_cast<std::uint32_t>(stepsDone_));
        updatePlan_->run();
        timing.stepMs = stepClock.milliseconds();
        result.timeline.push_back(timing);
      } else {
        plan_.setParameter(firstRowParameter_, firstRow(step, 0));
        plan_.run();
      }
      ++stepsThisRun;
      const bool last = step == stepsPerEpoch_;
      // A report on time costs a sync; on one rank only, since every rank must reach the sum over ranks together.
      const bool due = options_.reportSeconds > 0 && !ranks_.distributed() && sinceReport.seconds() >= options_.reportSeconds;
      if (!last && step % options_.logEvery != 0 && !due) continue;
      sinceReport.restart();
      const std::vector<double> totals = totalsOverRanks(epoch, reportedStep + 1, step);
      TrainingProgress report;
      report.epoch = epoch;
      report.epochs = options_.epochs;
      report.step = step;
      report.steps = stepsPerEpoch_;
      report.loss = (totals[0] - previousLoss) / static_cast<double>((step - reportedStep) * globalRows_ * options_.accumulate);
      const double elapsed = runClock.seconds();
      report.samplesPerSecond = static_cast<double>(stepsThisRun * globalRows_ * options_.accumulate) / elapsed;
      report.etaSeconds = elapsed / static_cast<double>(stepsThisRun) * static_cast<double>(totalSteps - stepsThisRun);
      previousLoss = totals[0];
      reportedStep = step;
      epochLoss = totals[0];
      epochCorrect = totals[1];
      if (progress) progress(report);
    }
    ++epochsDone_;
    result.epoch = epoch;
    result.seconds = epochClock.seconds();
    const double samples = static_cast<double>(stepsPerEpoch_ * globalRows_ * options_.accumulate);
    result.trainLoss = epochLoss / samples;
    result.trainAccuracy = epochCorrect / samples;
    result.samplesPerSecond = samples / result.seconds;
    if (updatePlan_) {
      const auto steps = static_cast<double>(stepsPerEpoch_);
      for (const StepTiming& timing : result.timeline) {
        result.gradientReadMsPerStep += timing.readMs / steps;
        result.allReduceMsPerStep += timing.allReduceMs / steps;
        result.gradientWriteMsPerStep += timing.writeMs / steps;
        result.exposedCommunicationMsPerStep += timing.exposedMs / steps;
        result.gpuMsPerStep += timing.gpuMs / steps;
      }
      result.computeMsPerStep = result.seconds * 1e3 / steps - result.exposedCommunicationMsPerStep;
      result.sharedMemorySum = exchange_->sumsThroughSharedMemory();
    }
    result.evaluated = epoch % options_.evaluateEvery == 0 || epoch == options_.epochs;
    averageStateOverRanks();
    if (result.evaluated) result.testAccuracy = testAccuracy();
    if (epochDone) epochDone(result);
  }
}

Network Trainer::network() const {
  Network trained = shape_;
  trained.setParameterValues(graph_.readParameters());
  return trained;
}

Checkpoint Trainer::checkpoint() const {
  return {network(), options_.optimizer.kind, graph_.readOptimizerState(), epochsDone_, stepsDone_, {}};
}

}  // namespace glnet
