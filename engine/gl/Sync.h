// GPU synchronisation objects: a fence to wait on, and timestamp queries to time GPU work.
#pragma once

#include <cstdint>

namespace glnet {

class Fence {
 public:
  // Inserts the fence after every command issued so far.
  Fence();
  ~Fence();
  Fence(Fence&& other) noexcept;
  Fence& operator=(Fence&& other) noexcept;
  Fence(const Fence&) = delete;
  Fence& operator=(const Fence&) = delete;

  // Blocks until the GPU passes the fence. Throws glnet::GpuFailure when the GPU takes longer than the
  // watchdog allows (GLNET_GPU_TIMEOUT_S, default 300 s: a hung GPU becomes an error, not a hang) or was
  // reset meanwhile.
  void wait() const;
  // The same within `timeoutNanoseconds`; false when they ran out first.
  bool waitFor(std::uint64_t timeoutNanoseconds) const;
  // The watchdog's limit in nanoseconds.
  static std::uint64_t watchdogNanoseconds();

 private:
  void* sync_ = nullptr;
};

// One GL_TIMESTAMP query. Record two and subtract to time the GPU work between them. On a device without
// timer queries (OpenGL ES without EXT_disjoint_timer_query) it records the host's clock after glFinish
// instead: wall time, which `measuresGpu()` tells apart so that reports can say so.
class TimerQuery {
 public:
  static bool measuresGpu();
  // "GPU" or "wall (no timer queries)", for the label of a time measured this way.
  static const char* clockName();
  TimerQuery();
  ~TimerQuery();
  TimerQuery(TimerQuery&& other) noexcept;
  TimerQuery& operator=(TimerQuery&& other) noexcept;
  TimerQuery(const TimerQuery&) = delete;
  TimerQuery& operator=(const TimerQuery&) = delete;

  // Records the GPU time at which all earlier commands have completed.
  void record();
  // The recorded GPU time in nanoseconds; waits for the result.
  std::uint64_t nanoseconds() const;

 private:
  unsigned id_ = 0;
  std::uint64_t wallNanoseconds_ = 0;
};

// GPU milliseconds between two recorded timestamps; waits for both results.
inline double gpuMilliseconds(const TimerQuery& start, const TimerQuery& end) {
  return static_cast<double>(end.nanoseconds() - start.nanoseconds()) / 1e6;
}

}  // namespace glnet
