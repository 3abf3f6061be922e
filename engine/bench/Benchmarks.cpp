#include "bench/Benchmarks.h"

#include "base/Stopwatch.h"
#include "gl/Sync.h"
#include "graph/CompiledGraph.h"
#include "graph/ReferenceGraph.h"
#include "model/Classifier.h"
#include "ops/Elementwise.h"
#include "ref/Reference.h"
#include "serve/WarmClassifier.h"
#include "train/TrainingTuning.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <random>

namespace glnet {
namespace {

constexpr std::size_t warmCallLargestBatch = 1024;


// Samples per stage name, in first-seen order.
class Recorder {
 public:
  void add(const std::string& stage, double ms) {
    if (!samples_.count(stage)) order_.push_back(stage);
    samples_[stage].push_back(ms);
  }
  void flush(BenchReport& report, const std::string& section, std::size_t batch) {
    for (const std::string& stage : order_) report.rows.push_back({section, batch, stage, summarize(samples_[stage])});
    samples_.clear();
    order_.clear();
  }

 private:
  std::map<std::string, std::vector<double>> samples_;
  std::vector<std::string> order_;
};

void benchInference(const Context& context, const Network& network, std::size_t batch, const BenchSettings& settings,
                    BenchReport& report) {
  std::mt19937 random(settings.seed + static_cast<std::uint32_t>(batch));
  const std::size_t pixelsPerImage = network.inputs();
  std::vector<std::uint8_t> pixels(batch * pixelsPerImage);
  for (auto& pixel : pixels) pixel = static_cast<std::uint8_t>(random() >> 24);
  Classifier classifier(context, network, batch);
  GpuImages images(batch, pixelsPerImage);
  // The same upload without the staging ring, and the host's own copy rate, to show what bounds the ring.
  std::optional<GpuImages> plainImages;
  if (images.staging) plainImages.emplace(batch, pixelsPerImage, UploadPath::plain);
  std::vector<std::uint8_t> hostCopy(pixels.size());
  Buffer classes(batch * sizeof(std::uint32_t));
  const Plan plan = classifier.plan(images, classes, nullptr);
  std::optional<PersistentReadback> persistent;
  if (report.persistentMaps) persistent.emplace(classes.bytes());

  std::vector<std::uint32_t> chained(batch), naive(batch), mapped(batch), coherent(batch);
  Recorder recorder;
  std::vector<std::vector<double>> perDispatch(plan.dispatchCount());
  for (int run = -settings.warmup; run < settings.runs; ++run) {
    const bool keep = run >= 0;
    Stopwatch start;
    images.upload(pixels);
    Fence().wait();
    const double upload = start.milliseconds();
    double plainUpload = 0.0;
    if (plainImages) {
      start.restart();
      plainImages->upload(pixels);
      Fence().wait();
      plainUpload = start.milliseconds();
    }
    start.restart();
    std::memcpy(hostCopy.data(), pixels.data(), pixels.size());
    const double memcpyMs = start.milliseconds();
    TimerQuery gpuStart, gpuEnd;
    start.restart();
    gpuStart.record();
    plan.run();
    gpuEnd.record();
    const double issue = start.milliseconds();
    start.restart();
    Fence().wait();
    const double wait = start.milliseconds();
    start.restart();
    plan.read(classes, chained.data(), classes.bytes());
    const double get = start.milliseconds();
    const double gpu = gpuMilliseconds(gpuStart, gpuEnd);

    // The same run chained, timed end to end with each readback kind (after the upload).
    const auto chainedWith = [&](const std::function<void()>& read) {
      const Stopwatch begin;
      plan.run();
      read();
      return begin.milliseconds();
    };
    const double chainedGet = chainedWith([&] { plan.read(classes, chained.data(), classes.bytes()); });
    const double chainedMap = chainedWith([&] { classes.downloadMapped(mapped.data(), classes.bytes()); });
    const double chainedPersistent =
        persistent ? chainedWith([&] { persistent->read(classes, coherent.data(), classes.bytes()); }) : 0.0;
    start.restart();
    images.upload(pixels);
    plan.run();
    plan.read(classes, chained.data(), classes.bytes());
    const double roundTrip = start.milliseconds();
    start.restart();
    plan.runReadingEveryStep();
    plan.read(classes, naive.data(), classes.bytes());
    const double naiveTotal = start.milliseconds();
    const std::vector<double> dispatches = plan.runTimed();
    if (!keep) continue;
    recorder.add("upload", upload);
    if (plainImages) recorder.add("upload by glBufferSubData", plainUpload);
    recorder.add("host memcpy of the same bytes", memcpyMs);
    recorder.add("issue", issue);
    recorder.add("gpu", gpu);
    recorder.add("fence wait", wait);
    recorder.add("readback getBufferSubData", get);
    recorder.add("chained, read by getBufferSubData", chainedGet);
    recorder.add("chained, read by mapBufferRange", chainedMap);
    if (persistent) recorder.add("chained, read by persistent map", chainedPersistent);
    recorder.add("naive: sync and read every dispatch", naiveTotal);
    recorder.add("round trip: upload, run, read", roundTrip);
    for (std::size_t d = 0; d < dispatches.size(); ++d) perDispatch[d].push_back(dispatches[d]);
  }
  // The serving path (glnet_serve): a warm classifier, whose pixels and answers stay in host-visible buffers
  // where the device has buffer storage. Only for the batch sizes a server runs.
  std::vector<Prediction> warmAnswers;
  if (batch <= warmCallLargestBatch) {
    WarmClassifier warm(context, network, batch);
    // NVIDIA runs a new program slower for its first few dozen dispatches (bench/NOTES-gemm.md, row 9).
    constexpr int warmCallWarmup = 100;
    for (int run = -std::max(settings.warmup, warmCallWarmup); run < settings.runs; ++run) {
      const Stopwatch start;
      warmAnswers = warm.classify(pixels.data(), batch);
      if (run >= 0) recorder.add("warm call: upload, run, read (serving path)", start.milliseconds());
    }
  }
  recorder.flush(report, "inference", batch);
  const std::vector<std::string> labels = plan.labels();
  for (std::size_t d = 0; d < labels.size(); ++d) {
    report.rows.push_back({"inference dispatch", batch, std::to_string(d + 1) + " " + labels[d], summarize(perDispatch[d])});
  }

  // The float64 reference of the same network on the same normalized pixels.
  const NetworkGraph reference = buildGraph(network, static_cast<std::uint32_t>(batch), false);
  const std::vector<double> inputs = ref::normalize(pixels, 0, pixels.size(), network.input, network.inputs());
  const std::vector<double> logits =
      referenceValues(reference.graph, {{reference.images.id, inputs}})[static_cast<std::size_t>(reference.logits.id)];
  const std::size_t outputs = network.classes();
  for (std::size_t i = 0; i < batch; ++i) {
    const std::uint32_t expected = ref::argmax({logits.begin() + static_cast<std::ptrdiff_t>(i * outputs),
                                                logits.begin() + static_cast<std::ptrdiff_t>((i + 1) * outputs)}, 1, outputs)[0];
    std::vector<double> row(logits.begin() + static_cast<std::ptrdiff_t>(i * outputs), logits.begin() + static_cast<std::ptrdiff_t>((i + 1) * outputs));
    std::sort(row.rbegin(), row.rend());
    const bool nearTie = outputs > 1 && row[0] - row[1] < 1e-4 * std::max(1.0, std::abs(row[0]));
    const bool readsAgree = chained[i] == naive[i] && chained[i] == mapped[i] && (!persistent || chained[i] == coherent[i]) &&
                            (warmAnswers.empty() || chained[i] == warmAnswers[i].label);
    if (!readsAgree || (chained[i] != expected && !nearTie)) {
      report.failures.push_back("inference batch " + std::to_string(batch) + ": image " + std::to_string(i) + " classified " +
                                std::to_string(chained[i]) + ", float64 reference says " + std::to_string(expected));
      return;
    }
  }
}


void benchTraining(const Context& context, const Network& network, const BenchSettings& settings, BenchReport& report) {
  const std::uint32_t batch = settings.trainingBatch;
  RandomTrainingStep step(context, network, settings.trainingBatch, settings.seed);
  CompiledGraph& compiled = step.compiled;
  Plan plan = compiled.trainingPlan([](Plan&) {});
  report.trainingDispatches = plan.dispatchCount();
  report.trainingBarriers = plan.barrierCount();
  Recorder recorder;
  std::vector<std::vector<double>> perDispatch(plan.dispatchCount());
  const int steps = settings.trainingSteps;
  for (int run = -settings.warmup; run < std::max(1, settings.runs / 4); ++run) {
    TimerQuery gpuStart, gpuEnd;
    gpuStart.record();
    plan.run();
    gpuEnd.record();
    compiled.readTotals();
    const double gpu = gpuMilliseconds(gpuStart, gpuEnd);
    Stopwatch start;
    for (int step = 0; step < steps; ++step) {
      plan.run();
      if (!std::isfinite(compiled.readTotals()[0])) report.failures.push_back("training step: the loss is not finite");
    }
    const double everyStep = start.milliseconds() / steps;
    start.restart();
    for (int step = 0; step < steps; ++step) plan.run();
    compiled.readTotals();
    const double everyN = start.milliseconds() / steps;
    const std::vector<double> dispatches = plan.runTimed();
    if (run < 0) continue;
    for (std::size_t d = 0; d < dispatches.size(); ++d) perDispatch[d].push_back(dispatches[d]);
    recorder.add("step gpu", gpu);
    recorder.add("step, loss read every step", everyStep);
    recorder.add("step, loss read every " + std::to_string(steps) + " steps", everyN);
  }
  recorder.flush(report, "training", batch);
  const std::vector<std::string> names = plan.labels();
  for (std::size_t d = 0; d < names.size(); ++d) {
    report.rows.push_back({"training dispatch", batch, std::to_string(d + 1) + " " + names[d], summarize(perDispatch[d])});
  }
}

void benchElementwise(const Context& context, const BenchSettings& settings, BenchReport& report) {
  const std::size_t n = settings.elementwiseCount;
  std::mt19937 random(settings.seed);
  std::uniform_real_distribution<float> grey(0.0f, 255.0f);
  std::normal_distribution<float> weight(0.5f, 0.1f);
  std::vector<float> greyscales(n), weights(n);
  for (std::size_t i = 0; i < n; ++i) {
    greyscales[i] = std::floor(grey(random));
    weights[i] = weight(random);
  }
  ProgramCache programs;
  Buffer greyBuffer(n * 4), weightBuffer(n * 4), normalized(n * 4), weighted(n * 4), activated(n * 4);
  const auto count = static_cast<std::uint32_t>(n);
  Plan three(context.limits()), fused(context.limits());
  three.record(ElementwiseOp(programs, ElementwiseKind::scale)(greyBuffer, greyBuffer, normalized, count, false, 1, 1.0f / 255));
  three.record(ElementwiseOp(programs, ElementwiseKind::multiply)(normalized, weightBuffer, weighted, count, false));
  three.record(ElementwiseOp(programs, ElementwiseKind::activation, Activation::tanh)(weighted, weighted, activated, count, false));
  fused.record(ElementwiseOp(programs, ElementwiseKind::scaleMultiplyActivate, Activation::tanh)(
      greyBuffer, weightBuffer, activated, count, false, 1, 1.0f / 255));

  Recorder recorder;
  std::vector<float> result(n);
  std::vector<double> cpuResult(n);
  for (int run = -settings.warmup; run < settings.runs; ++run) {
    Stopwatch start;
    for (std::size_t i = 0; i < n; ++i) cpuResult[i] = std::tanh(greyscales[i] / 255.0 * weights[i]);
    const double cpu = start.milliseconds();
    for (const auto& [name, plan] : {std::pair<const char*, const Plan*>{"3 dispatches", &three}, {"fused", &fused}}) {
      start.restart();
      greyBuffer.upload(greyscales);
      weightBuffer.upload(weights);
      TimerQuery gpuStart, gpuEnd;
      gpuStart.record();
      plan->run();
      gpuEnd.record();
      plan->read(activated, result.data(), n * 4);
      const double roundTrip = start.milliseconds();
      for (std::size_t i = 0; i < n; ++i) {
        if (!(std::abs(result[i] - cpuResult[i]) <= 2e-6)) {
          report.failures.push_back(std::string("elementwise ") + name + ": element " + std::to_string(i) + " is " +
                                    std::to_string(result[i]) + ", the CPU computes " + std::to_string(cpuResult[i]));
          return;
        }
      }
      if (run < 0) continue;
      recorder.add(std::string(name) + " gpu", gpuMilliseconds(gpuStart, gpuEnd));
      recorder.add(std::string(name) + " round trip (upload, run, read)", roundTrip);
    }
    if (run >= 0) recorder.add("cpu (C++, one core)", cpu);
  }
  recorder.flush(report, "elementwise", n);
}

// The fixed cost of a dispatch, from chains of 100 one-element dispatches: each reading what the previous one
// wrote (a barrier before each), the same alternating between two programs (as a network's layers do), and
// independent ones (no barrier between them).
void benchDispatch(const Context& context, const BenchSettings& settings, BenchReport& report) {
  constexpr int chain = 100;
  ProgramCache programs;
  const ElementwiseOp add(programs, ElementwiseKind::add), multiply(programs, ElementwiseKind::multiply);
  Buffer a = Buffer::of(std::vector<float>{1.0f}), b = Buffer::of(std::vector<float>{0.0f});
  std::vector<Buffer> outputs;
  for (int i = 0; i < chain; ++i) outputs.push_back(Buffer::of(std::vector<float>{0.0f}));
  Plan dependent(context.limits()), alternating(context.limits()), independent(context.limits());
  for (int i = 0; i < chain; ++i) {
    dependent.record(add(i % 2 ? b : a, a, i % 2 ? a : b, 1, false));
    alternating.record((i % 2 ? multiply : add)(i % 2 ? b : a, a, i % 2 ? a : b, 1, false));
    independent.record(add(a, a, outputs[static_cast<std::size_t>(i)], 1, false));
  }
  Recorder recorder;
  for (int run = -settings.warmup; run < settings.runs; ++run) {
    for (const auto& [stage, plan] : {std::pair<const char*, const Plan*>{"gpu per dependent dispatch", &dependent},
                                      {"gpu per dependent dispatch, two programs alternating", &alternating},
                                      {"gpu per independent dispatch (no barriers)", &independent}}) {
      TimerQuery gpuStart, gpuEnd;
      const Stopwatch start;
      gpuStart.record();
      plan->run();
      gpuEnd.record();
      const double issue = start.milliseconds();
      Fence().wait();
      if (run < 0) continue;
      recorder.add(stage, gpuMilliseconds(gpuStart, gpuEnd) / chain);
      if (plan == &dependent) recorder.add("cpu issue per dispatch", issue / chain);
    }
  }
  recorder.flush(report, "dispatch", chain);
}

}  // namespace



const BenchRow* BenchReport::find(const std::string& section, std::size_t batch, const std::string& stage) const {
  for (const BenchRow& row : rows) {
    if (row.section == section && row.batch == batch && row.stage == stage) return &row;
  }
  return nullptr;
}

BenchReport runBenchmarks(const Context& context, const Network& network, const BenchSettings& settings,
                          const std::function<void(const std::string&)>& progress) {
  BenchReport report;
  report.persistentMaps = Buffer::hostVisibleAvailable();
  report.coldStart.emplace_back("context creation", context.creationMilliseconds());
  // Imported models run inference only: their cold start is the inference graph's, and no training step is measured.
  const bool trains = !network.imported;
  {
    // A training graph compiles every kind of program inference and training use (the driver's own shader
    // cache may still shorten a second start).
    const NetworkGraph nodes = buildGraph(network, settings.trainingBatch, trains);
    std::optional<CompiledGraph> compiled;
    if (trains) {
      compiled.emplace(context, nodes.graph, nodes.loss, std::vector<Tensor>{nodes.correct}, OptimizerSettings{OptimizerKind::sgd, 0.01f});
      compiled->trainingPlan([](Plan&) {});
    } else {
      compiled.emplace(context, nodes.graph);
      compiled->forwardPlan([](Plan&) {});
    }
    for (const auto& [key, ms] : compiled->compileTimes()) report.coldStart.emplace_back("compile " + key, ms);
  }
  if (progress) progress("dependent dispatches");
  benchDispatch(context, settings, report);
  // The inference stages feed uint8 pixels through every upload path and the serving path; a network reading token ids
  // is measured by its training step alone.
  for (const std::size_t batch : network.readsTokenIds() ? std::vector<std::size_t>{} : settings.batches) {
    if (progress) progress("inference, batch " + std::to_string(batch));
    benchInference(context, network, batch, settings, report);
  }
  if (trains) {
    if (progress) progress("training step");
    benchTraining(context, network, settings, report);
  }
  if (progress) progress("elementwise workload");
  benchElementwise(context, settings, report);
  return report;
}

}  // namespace glnet
