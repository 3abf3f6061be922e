#include "bench/GemmTuner.h"

#include "plan/Statistics.h"

namespace glnet {
namespace {

// The plan of `shapes` planned afresh under whatever choice is in force, warmed up, then timed dispatch by dispatch.
GemmPlanTimes planTimes(OnnxRunner& runner, const InputShapes& shapes, const std::vector<const float*>& feeds, int runs) {
  runner.forgetPlans();
  runner.run(feeds, shapes);  // plans, compiles and uploads the inputs, outside the warm-up's clock
  // Warmed by timed runs of the plan alone (each waits for the GPU): whole runs would leave it idle during their
  // uploads, checks and readbacks (alexnet at batch 64: 8.5 ms end to end, 4.8 ms of GPU work).
  warmUpForTiming([&] { runner.profile(shapes, 1); }, runs);
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

}  // namespace glnet
