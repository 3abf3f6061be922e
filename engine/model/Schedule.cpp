#include "model/Schedule.h"

#include "base/check.h"

#include <algorithm>
#include <cmath>

namespace glnet {

ScheduleKind parseSchedule(const std::string& name) {
  if (name == "constant") return ScheduleKind::constant;
  if (name == "cosine") return ScheduleKind::cosine;
  if (name == "step") return ScheduleKind::step;
  if (name == "onecycle") return ScheduleKind::onecycle;
  throw UsageError("unknown schedule '" + name + "' (constant, cosine, step or onecycle)");
}

const char* scheduleName(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::constant: return "constant";
    case ScheduleKind::cosine: return "cosine";
    case ScheduleKind::step: return "step";
    case ScheduleKind::onecycle: return "onecycle";
  }
  return "constant";
}

double LearningRateSchedule::at(std::uint64_t step) const {
  const double pi = std::acos(-1.0);
  // from → to along half a cosine, at `done` of `length`.
  const auto anneal = [&](double from, double to, double done, double length) {
    return to + (from - to) * (1 + std::cos(pi * std::min(done / std::max(length, 1.0), 1.0))) / 2;
  };
  if (kind == ScheduleKind::onecycle) {
    const double up = std::max(0.3 * static_cast<double>(totalSteps) - 1, 1.0);
    const double start = peak / 25, end = start / 1e4, s = static_cast<double>(step - 1);
    if (s <= up) return anneal(start, peak, s, up);
    return anneal(peak, end, s - up, static_cast<double>(totalSteps) - 1 - up);
  }
  if (step <= warmupSteps) return peak * static_cast<double>(step) / static_cast<double>(warmupSteps);
  const std::uint64_t after = step - warmupSteps - 1;  // steps since the warm-up, from 0
  switch (kind) {
    case ScheduleKind::constant: return peak;
    case ScheduleKind::cosine: return anneal(peak, 0.0, static_cast<double>(after), static_cast<double>(totalSteps - warmupSteps));
    case ScheduleKind::step: return peak * std::pow(gamma, static_cast<double>((step - 1) / std::max<std::uint64_t>(stepSize, 1)));
    case ScheduleKind::onecycle: break;
  }
  return peak;
}

}  // namespace glnet
