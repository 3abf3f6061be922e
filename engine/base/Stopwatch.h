// Host wall-clock time since construction or the last restart.
#pragma once

#include <chrono>

namespace glnet {

class Stopwatch {
 public:
  double milliseconds() const { return std::chrono::duration<double, std::milli>(Clock::now() - start_).count(); }
  double seconds() const { return milliseconds() / 1e3; }
  // The milliseconds so far; counting starts again from now.
  double restart() {
    const double elapsed = milliseconds();
    start_ = Clock::now();
    return elapsed;
  }

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point start_ = Clock::now();
};

}  // namespace glnet
