#include "bench/GemmTuner.h"

#include "base/Stopwatch.h"
#include "base/log.h"
#include "ops/GemmTuning.h"

#include <map>

namespace glnet {
namespace {

constexpr double requiredGain = 0.97;

// The GPU time of each GEMM shape of the plan of `shapes`, planned afresh under whatever choice is in force.
std::map<std::string, double> gemmTimes(OnnxRunner& runner, const InputShapes& shapes, const std::vector<const float*>& feeds, int runs) {
  runner.forgetPlans();
  runner.run(feeds, shapes);
  return runner.profile(shapes, runs).gemmMs;
}

}  // namespace

GemmTuningReport tuneGemms(OnnxRunner& runner, const InputShapes& shapes, const std::vector<const float*>& feeds, int runs,
                           const std::function<void(const std::string&)>& progress) {
  Stopwatch clock;
  GemmTuningReport report;
  std::map<std::string, double> rule;
  std::map<std::string, std::pair<GemmCandidate, double>> fastest;
  {
    IgnoredGemmTuning ruleAndCandidatesOnly;
    if (progress) progress("the rule's choices");
    rule = gemmTimes(runner, shapes, feeds, runs);
    for (const GemmCandidate& candidate : gemmCandidates(currentLimits())) {
      if (progress) progress(candidate.name());
      ForcedGemmConfig forced(*candidate.config, candidate.split);
      std::map<std::string, double> times;
      try {
        times = gemmTimes(runner, shapes, feeds, runs);
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
  }
  runner.forgetPlans();
  GemmTuning* table = currentGemmTuning();
  for (const auto& [key, ruleMs] : rule) {
    ++report.shapes;
    report.ruleMs += ruleMs;
    const auto found = fastest.find(key);
    const bool better = found != fastest.end() && found->second.second < requiredGain * ruleMs;
    report.tunedMs += better ? found->second.second : ruleMs;
    if (better) ++report.changed;
    if (!table) continue;
    if (better) {
      table->set(key, found->second.first);
    } else {
      table->erase(key);
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
