#include "model/Schedule.h"

#include <doctest/doctest.h>

#include <cmath>

using namespace glnet;

TEST_CASE("learning-rate schedules: warm-up, cosine, step and PyTorch's one-cycle") {
  const LearningRateSchedule constant{ScheduleKind::constant, 0.5};
  CHECK(constant.at(1) == 0.5);
  CHECK(constant.at(1000) == 0.5);

  const LearningRateSchedule cosine{ScheduleKind::cosine, 0.2, 4, 104};
  CHECK(cosine.at(1) == doctest::Approx(0.05));  // warm-up: peak·1/4
  CHECK(cosine.at(4) == doctest::Approx(0.2));
  CHECK(cosine.at(5) == doctest::Approx(0.2));  // the first step after the warm-up is at the peak
  CHECK(cosine.at(55) == doctest::Approx(0.1));  // half way
  CHECK(cosine.at(104) == doctest::Approx(0.2 * (1 + std::cos(std::acos(-1.0) * 99 / 100)) / 2));

  const LearningRateSchedule step{ScheduleKind::step, 1.0, 0, 100, 10, 0.5};
  CHECK(step.at(10) == 1.0);
  CHECK(step.at(11) == 0.5);
  CHECK(step.at(25) == 0.25);

  // torch.optim.lr_scheduler.OneCycleLR(max_lr=1, total_steps=100): 0.04 at first, 1 after 29 steps, 4e-6 at the end.
  const LearningRateSchedule onecycle{ScheduleKind::onecycle, 1.0, 0, 100};
  CHECK(onecycle.at(1) == doctest::Approx(0.04));
  CHECK(onecycle.at(30) == doctest::Approx(1.0));
  CHECK(onecycle.at(100) == doctest::Approx(4e-6));
  CHECK(onecycle.at(15) > onecycle.at(10));
  CHECK(onecycle.at(60) < onecycle.at(40));
}
