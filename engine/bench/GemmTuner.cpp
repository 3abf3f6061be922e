#include "bench/GemmTuner.h"

#include "base/Stopwatch.h"
#include "base/log.h"
#include "ops/GemmTuning.h"
#include "plan/Statistics.h"

#include <algorithm>
#include <map>
#include <optional>

namespace glnet {
namespace {

constexpr double requiredGain = 0.97;
constexpr double requiredTotalGain = 0.99;

// The plan of `shapes` planned afresh under whatever choice is in force, warmed up, then timed dispatch by dispatch.
GemmPlanTimes planTimes(OnnxRunner& runner, const InputShapes& shapes, const std::vector<const float*>& feeds, int runs) {
  runner.forgetPlans();
  for (int r = 0; r < runs; ++r) runner.run(feeds, shapes);
  OnnxRunner::Profile profile = runner.profile(shapes, runs);
  return {std::move(profile.gemmMs), summarize(profile.runMs).median};
}

}  // namespace

GemmTuningReport tuneGemms(OnnxRunner& runner, const InputShapes& shapes, const std::vector<const float*>& feeds, int runs,
                           const std::function<void(const std::string&)>& progress) {
  GemmTuningReport report = tuneGemms([&] { return planTimes(runner, shapes, feeds, runs); }, progress);
  runner.forgetPlans();
  return report;
}

GemmTuningReport tuneGemms(const std::function<GemmPlanTimes()>& timePlan, const std::function<void(const std::string&)>& progress) {
  Stopwatch clock;
  GemmTuningReport report;
  GemmPlanTimes rule;
  std::map<std::string, std::pair<GemmCandidate, double>> fastest;
  {
    IgnoredGemmTuning ruleAndCandidatesOnly;
    if (progress) progress("the rule's choices");
    rule = timePlan();
    for (const GemmCandidate& candidate : gemmCandidates(currentLimits())) {
      if (progress) progress(candidate.name());
      ForcedGemmConfig forced(*candidate.config, candidate.split, candidate.splits);
      std::map<std::string, double> times;
      try {
        times = timePlan().gemmMs;
      } catch (const GpuFailure&) {
        throw;
      } catch (const Error& error) {
        // A configuration some GEMM of this model cannot take (its groups past the device's counts, say).
        log::info("GEMM tuning: " + candidate.name() + " does not run this model (" + error.what() + ")");
        continue;
      }
      ++report.candidates;
      for (const auto& [key, ms] : times) {
        const auto found = fastest.find(key);
        if (found == fastest.end() || ms < found->second.second) fastest.insert_or_assign(key, std::make_pair(candidate, ms));
      }
    }
    // The rule's choices timed again after the candidates, each shape keeping its faster time: the first timing may
    // run before the GPU's clocks have risen (on the H100, a training step's GEMMs 17.1 ms at first, within 6.6 ms
    // for the whole step later), which would make every candidate look better than the rule.
    const GemmPlanTimes ruleAgain = timePlan();
    for (auto& [key, ms] : rule.gemmMs) {
      const auto again = ruleAgain.gemmMs.find(key);
      if (again != ruleAgain.gemmMs.end()) ms = std::min(ms, again->second);
    }
    rule.totalMs = std::min(rule.totalMs, ruleAgain.totalMs);
  }
  GemmTuning* table = currentGemmTuning();
  std::map<std::string, std::optional<GemmCandidate>> before;  // what the table held for each shape changed here
  for (const auto& [key, ruleMs] : rule.gemmMs) {
    ++report.shapes;
    report.ruleMs += ruleMs;
    const auto found = fastest.find(key);
    const bool better = found != fastest.end() && found->second.second < requiredGain * ruleMs;
    report.tunedMs += better ? found->second.second : ruleMs;
    if (better) ++report.changed;
    if (!table) continue;
    before[key] = table->find(key);
    if (better) {
      table->set(key, found->second.first);
    } else {
      table->erase(key);
    }
  }
  report.tunedTotalMs = timePlan().totalMs;
  {
    IgnoredGemmTuning ruleOnly;
    report.ruleTotalMs = std::min(rule.totalMs, timePlan().totalMs);
  }
  if (table && report.changed > 0 && report.tunedTotalMs > requiredTotalGain * report.ruleTotalMs) {
    report.reverted = true;
    for (const auto& [key, previous] : before) {
      if (previous) {
        table->set(key, *previous);
      } else {
        table->erase(key);
      }
    }
  }
  if (table) {
    saveCurrentGemmTuning();
    report.path = currentGemmTuningPath();
  }
  report.seconds = clock.seconds();
  return report;
}

}  // namespace glnet
