#include "train/TrainingTuning.h"

#include "plan/Statistics.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <random>
#include <vector>

namespace glnet {

RandomTrainingStep::RandomTrainingStep(const Context& context, const Network& network, std::uint32_t batch, std::uint32_t seed)
    : nodes(buildGraph(network, batch)), compiled(context, nodes.graph, nodes.loss, {nodes.correct}, {OptimizerKind::sgd, 0.01f}) {
  std::mt19937 random(seed);
  std::vector<float> images(static_cast<std::size_t>(batch) * network.inputs());
  const std::optional<std::uint32_t> vocabulary = network.description ? tokenVocabulary(*network.description) : std::nullopt;
  for (float& value : images) value = vocabulary ? static_cast<float>(random() % *vocabulary) : static_cast<float>(random() % 256) / 255.0f;
  std::vector<std::uint32_t> labels(batch);
  for (auto& label : labels) label = random() % network.classes();
  compiled.upload(nodes.images, images.data(), images.size() * 4);
  compiled.upload(nodes.labels, labels.data(), labels.size() * 4);
}

namespace {

// The training step's GEMMs, planned afresh under the choices in force: warmed up (warmUpForTiming, at least `warmup`
// steps), then `runs` (at least one) timed dispatch by dispatch.
GemmPlanTimes trainingGemmTimes(const Context& context, const Network& network, const TrainingTimings& timings) {
  RandomTrainingStep step(context, network, timings.batch, timings.seed);
  Plan plan = step.compiled.trainingPlan([](Plan&) {});
  // Timed runs wait for the GPU; plain ones would queue a quarter of a second's issue of steps.
  warmUpForTiming([&] { plan.runTimed(); }, timings.warmup);
  std::vector<std::vector<double>> perDispatch(plan.dispatchCount());
  std::vector<double> totals;
  for (int run = 0; run < std::max(1, timings.runs); ++run) {
    const std::vector<double> times = plan.runTimed();
    double total = 0;
    for (std::size_t d = 0; d < times.size() && d < perDispatch.size(); ++d) {
      perDispatch[d].push_back(times[d]);
      total += times[d];
    }
    totals.push_back(total);
  }
  GemmPlanTimes result;
  const std::vector<std::string> keys = plan.tuningKeys();
  for (std::size_t d = 0; d < keys.size() && d < perDispatch.size(); ++d) {
    if (!keys[d].empty()) result.gemmMs[keys[d]] += summarize(perDispatch[d]).median;
  }
  result.totalMs = summarize(totals).median;
  return result;
}

}  // namespace

GemmTuningReport tuneTrainingGemms(const Context& context, const Network& network, const TrainingTimings& timings,
                                   const std::function<void(const std::string&)>& progress) {
  return tuneGemms([&] { return trainingGemmTimes(context, network, timings); }, progress);
}

std::string describeTuning(const GemmTuningReport& t) {
  char line[320];
  std::snprintf(line, sizeof line, "%zu GEMM shapes under %zu candidates in %.1f s, %zu %s: the step's GPU time %.3f -> %.3f ms%s", t.shapes,
                t.candidates, t.seconds, t.reverted ? std::size_t{0} : t.changed, t.reverted ? "kept (not 1 % faster as a whole)" : "kept",
                t.ruleTotalMs, t.tunedTotalMs, t.path.empty() ? " (kept for this process only: GLNET_CACHE=0)" : "");
  return line;
}

}  // namespace glnet
