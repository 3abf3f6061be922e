#include "bench/GemmTuner.h"

#include "plan/Statistics.h"

namespace glnet {
namespace {

// The plan of `shapes` planned afresh under whatever choice is in force, warmed up (each run waits for its readback),
// then timed dispatch by dispatch.
GemmPlanTimes planTimes(OnnxRunner& runner, const InputShapes& shapes, const std::vector<const float*>& feeds, int runs) {
  runner.forgetPlans();
  runner.run(feeds, shapes);  // plans and compiles, outside the warm-up's clock
  warmUpForTiming([&] { runner.run(feeds, shapes); }, runs);
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
