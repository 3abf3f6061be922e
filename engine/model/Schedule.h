// Learning-rate schedules over a run's steps, computed on the host and handed to the training plan each step.
#pragma once

#include <cstdint>
#include <string>

namespace glnet {

enum class ScheduleKind { constant, cosine, step, onecycle };
ScheduleKind parseSchedule(const std::string& name);  // throws UsageError
const char* scheduleName(ScheduleKind kind);

struct LearningRateSchedule {
  ScheduleKind kind = ScheduleKind::constant;
  double peak = 0.1;                // the learning rate given (--lr)
  std::uint64_t warmupSteps = 0;    // linear from peak/warmupSteps to peak first (not with onecycle, which warms up itself)
  std::uint64_t totalSteps = 1;     // the run's, for cosine and onecycle
  std::uint64_t stepSize = 1;       // step: the rate is multiplied by gamma every stepSize steps
  double gamma = 0.1;

  // The rate for step `step` (from 1):
  //   constant: peak;  cosine: peak·(1 + cos(π·s/S))/2 over the S steps after the warm-up, s from 0;
  //   step: peak·gamma^⌊(step − 1)/stepSize⌋;
  //   onecycle (PyTorch's OneCycleLR defaults): cosine from peak/25 up to peak over the first 30 % of the steps, then
  //   cosine down to peak/25/10⁴.
  double at(std::uint64_t step) const;
};

}  // namespace glnet
