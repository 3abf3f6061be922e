#include "gl/Sync.h"

#include "gl/Limits.h"
#include "base/check.h"
#include "gl/GlCheck.h"

#include <glad/gl.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <utility>

namespace glnet {

Fence::Fence() : sync_(glFenceSync(GL_SYNC_GPU_COMMANDS_COMPLETE, 0)) {
  if (!sync_) throw Error("glFenceSync failed: the GL context is lost or out of memory");
}

Fence::~Fence() {
  if (sync_) glDeleteSync(static_cast<GLsync>(sync_));
}

Fence::Fence(Fence&& other) noexcept : sync_(std::exchange(other.sync_, nullptr)) {}

Fence& Fence::operator=(Fence&& other) noexcept {
  if (this != &other) {
    if (sync_) glDeleteSync(static_cast<GLsync>(sync_));
    sync_ = std::exchange(other.sync_, nullptr);
  }
  return *this;
}

std::uint64_t Fence::watchdogNanoseconds() {
  static const std::uint64_t limit = [] {
    const char* text = std::getenv("GLNET_GPU_TIMEOUT_S");
    if (!text || !*text) return std::uint64_t{300'000'000'000};
    char* end = nullptr;
    const double seconds = std::strtod(text, &end);
    if (*end != '\0' || !(seconds > 0) || seconds > 1e9) {
      throw Error(std::string("GLNET_GPU_TIMEOUT_S must be a positive number of seconds, not '") + text + "'");
    }
    return static_cast<std::uint64_t>(seconds * 1e9);
  }();
  return limit;
}

bool Fence::waitFor(std::uint64_t timeoutNanoseconds) const {
  const GLenum status =
      glClientWaitSync(static_cast<GLsync>(sync_), GL_SYNC_FLUSH_COMMANDS_BIT, timeoutNanoseconds);
  throwIfContextLost();
  if (status == GL_WAIT_FAILED) throw GpuFailure("glClientWaitSync failed: the GL context is lost");
  return status != GL_TIMEOUT_EXPIRED;
}

void Fence::wait() const {
  if (!waitFor(watchdogNanoseconds())) {
    throw GpuFailure("the GPU did not finish its work within " + std::to_string(watchdogNanoseconds() / 1e9) +
                     " s (GLNET_GPU_TIMEOUT_S sets the limit): it may be hung, or the work too large for it");
  }
}

bool TimerQuery::measuresGpu() { return currentLimits().timestampBits > 0; }

const char* TimerQuery::clockName() { return measuresGpu() ? "GPU" : "wall (no timer queries)"; }

TimerQuery::TimerQuery() {
  if (measuresGpu()) glGenQueries(1, &id_);
}

TimerQuery::~TimerQuery() {
  if (id_) glDeleteQueries(1, &id_);
}

TimerQuery::TimerQuery(TimerQuery&& other) noexcept
    : id_(std::exchange(other.id_, 0u)), wallNanoseconds_(other.wallNanoseconds_) {}

TimerQuery& TimerQuery::operator=(TimerQuery&& other) noexcept {
  if (this != &other) {
    if (id_) glDeleteQueries(1, &id_);
    id_ = std::exchange(other.id_, 0u);
    wallNanoseconds_ = other.wallNanoseconds_;
  }
  return *this;
}

void TimerQuery::record() {
  if (id_) {
    glQueryCounter(id_, GL_TIMESTAMP);
    return;
  }
  glFinish();
  wallNanoseconds_ = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

std::uint64_t TimerQuery::nanoseconds() const {
  if (!id_) return wallNanoseconds_;
  GLuint64 value = 0;
  GL_CHECK(glGetQueryObjectui64v(id_, GL_QUERY_RESULT, &value));
  return value;
}

}  // namespace glnet
