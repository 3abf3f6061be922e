#include "plan/Plan.h"

#include "gl/Sync.h"
#include "base/check.h"

#include <glad/gl.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace glnet {
namespace {
template <class Range>
bool overlapsAny(const std::vector<Range>& ranges, const Range& range) {
  return std::any_of(ranges.begin(), ranges.end(), [&](const Range& other) { return other.overlaps(range); });
}

// Plans are the only code that binds storage buffers, switches programs or sets uniforms, so a plan whose
// id is the last one issued on this thread's context finds GL state as its shadow says.
std::atomic<std::uint64_t> nextPlanId{1};
thread_local std::uint64_t lastIssuedPlan = 0;

std::uint64_t uniformBits(const Uniform& uniform, std::int64_t integer) {
  if (uniform.type != Uniform::Type::float32) return static_cast<std::uint64_t>(integer);
  std::uint32_t bits = 0;
  std::memcpy(&bits, &uniform.real, sizeof bits);
  return (std::uint64_t{1} << 32) | bits;
}
}  // namespace

Plan::SyncMode Plan::syncModeFromEnvironment() {
  const char* value = std::getenv("GLNET_SYNC");
  return value && std::strcmp(value, "all") == 0 ? SyncMode::all : SyncMode::hazards;
}

Plan::IssuerId::IssuerId() : value_(nextPlanId++) {}

Plan::IssuerId::~IssuerId() {
  if (lastIssuedPlan == value_) lastIssuedPlan = 0;
}

Plan::IssuerId::IssuerId(IssuerId&& other) noexcept : value_(std::exchange(other.value_, 0)) {}

Plan::IssuerId& Plan::IssuerId::operator=(IssuerId&& other) noexcept {
  if (this != &other) {
    if (lastIssuedPlan == value_) lastIssuedPlan = 0;
    value_ = std::exchange(other.value_, 0);
  }
  return *this;
}

bool Plan::IssuerId::takeOver() {
  const bool changed = lastIssuedPlan != value_;
  lastIssuedPlan = value_;
  return changed;
}

Plan::Plan(const Limits& limits, SyncMode mode) : limits_(limits), mode_(mode) {}

int Plan::addParameter(std::uint32_t initial) {
  parameters_.push_back(initial);
  return static_cast<int>(parameters_.size() - 1);
}

void Plan::setParameter(int parameter, std::uint32_t value) {
  GLNET_ASSERT(parameter >= 0 && static_cast<std::size_t>(parameter) < parameters_.size(), "unknown plan parameter");
  parameters_[static_cast<std::size_t>(parameter)] = value;
}

void Plan::record(const Dispatch& dispatch) {
  GLNET_ASSERT(dispatch.program && dispatch.program->id(), "a dispatch needs a compiled program");
  Step step{dispatch.program->id(), {}, dispatch.uniforms, {}, dispatch.groups, false, dispatch.label, dispatch.tuningKey, steps_.size(),
            dispatch.invocations ? dispatch.program : nullptr, dispatch.invocations.value_or(0), dispatch.linear};
  const bool pending = dispatch.program->pending();
  if (pending) unfinishedPrograms_.push_back(dispatch.program);
  for (const Uniform& uniform : step.uniforms) {
    GLNET_ASSERT(uniform.parameter < static_cast<int>(parameters_.size()), "uniform names an unknown plan parameter");
    const std::pair<unsigned, int> key{step.program, uniform.location};
    const auto slot = std::find(uniformSlots_.begin(), uniformSlots_.end(), key);
    step.uniformSlots.push_back(static_cast<std::size_t>(slot - uniformSlots_.begin()));
    if (slot == uniformSlots_.end()) uniformSlots_.push_back(key);
  }

  if (!step.counting) {
    step.groups = runnableGroups(step.groups, step.linear, step.label);
  } else if (!pending) {
    countGroups(step);
  } else {
    ++uncountedSteps_;
  }

  bool hazard = mode_ == SyncMode::all && !steps_.empty();
  for (const StorageBinding& binding : dispatch.buffers) {
    GLNET_ASSERT(binding.buffer && binding.buffer->id(), "a dispatch binds an empty buffer: " + dispatch.label);
    const std::size_t end = binding.bytes ? binding.offset + binding.bytes : binding.buffer->bytes();
    GLNET_ASSERT(binding.offset < end && end <= binding.buffer->bytes(), "a binding range lies outside its buffer: " + dispatch.label);
    GLNET_ASSERT(binding.offset % static_cast<std::size_t>(std::max(limits_.storageBufferOffsetAlignment, 1)) == 0,
                 "a binding offset breaks the device's storage buffer offset alignment: " + dispatch.label);
    if (static_cast<std::int64_t>(end - binding.offset) > limits_.maxStorageBlockBytes) {
      throw Error("dispatch " + dispatch.label + " binds " + std::to_string(end - binding.offset) +
                  " bytes, over this device's storage block limit of " + std::to_string(limits_.maxStorageBlockBytes));
    }
    const Range range{binding.buffer->id(), binding.offset, end, binding.part};
    const bool reads = binding.access != Access::write;
    const bool writes = binding.access != Access::read;
    if (reads && overlapsAny(writtenSinceBarrier_, range)) hazard = true;
    if (writes && (overlapsAny(writtenSinceBarrier_, range) || overlapsAny(readSinceBarrier_, range))) hazard = true;
    step.bindings.push_back({binding.index, range, binding.offset == 0 && end == binding.buffer->bytes(), binding.buffer, reads, writes});
    bindingCount_ = std::max<std::size_t>(bindingCount_, binding.index + 1);
  }
  if (hazard) {
    step.barrierBefore = true;
    readSinceBarrier_.clear();
    writtenSinceBarrier_.clear();
  }
  noteSinceBarrier(step);
  steps_.push_back(std::move(step));
}

std::array<std::uint32_t, 3> Plan::runnableGroups(std::array<std::uint32_t, 3> groups, bool linear, const std::string& label) const {
  if (linear && groups[0] > static_cast<std::uint32_t>(limits_.maxWorkGroupCount[0])) {
    GLNET_ASSERT(groups[1] == 1 && groups[2] == 1, "a linear dispatch has groups along x only");
    const auto maxX = static_cast<std::uint32_t>(limits_.maxWorkGroupCount[0]);
    groups[1] = (groups[0] + maxX - 1) / maxX;
    groups[0] = maxX;
  }
  for (int axis = 0; axis < 3; ++axis) {
    if (groups[axis] > static_cast<std::uint32_t>(limits_.maxWorkGroupCount[axis])) {
      throw Error("dispatch " + label + " needs " + std::to_string(groups[axis]) + " work groups along axis " + std::to_string(axis) +
                  ", more than this device's " + std::to_string(limits_.maxWorkGroupCount[axis]) + "; use a smaller batch");
    }
  }
  return groups;
}

void Plan::countGroups(const Step& step) const {
  const auto size = static_cast<std::uint64_t>(step.counting->localSize()[0]);
  const std::uint64_t groups = (step.invocations + size - 1) / size;
  if (groups > std::numeric_limits<std::uint32_t>::max()) {
    throw Error("dispatch " + step.label + " needs " + std::to_string(groups) + " work groups; use a smaller batch");
  }
  step.groups = runnableGroups({static_cast<std::uint32_t>(groups), 1, 1}, step.linear, step.label);
  step.counting = nullptr;
}

void Plan::noteSinceBarrier(const Step& step) {
  for (const Bound& bound : step.bindings) {
    if (bound.read) readSinceBarrier_.push_back(bound.range);
    if (bound.written) writtenSinceBarrier_.push_back(bound.range);
  }
}

void Plan::groupIndependentSteps() {
  if (mode_ == SyncMode::all || steps_.empty()) return;
  const auto dependsOn = [](const Step& later, const Step& earlier) {
    for (const Bound& a : later.bindings) {
      for (const Bound& b : earlier.bindings) {
        if ((a.written || b.written) && a.range.overlaps(b.range)) return true;
      }
    }
    return false;
  };
  std::vector<std::size_t> level(steps_.size(), 0);
  std::size_t levels = 1;
  for (std::size_t i = 0; i < steps_.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (level[j] + 1 > level[i] && dependsOn(steps_[i], steps_[j])) level[i] = level[j] + 1;
    }
    levels = std::max(levels, level[i] + 1);
  }
  std::vector<Step> grouped;
  grouped.reserve(steps_.size());
  for (std::size_t l = 0; l < levels; ++l) {
    bool first = true;
    for (std::size_t i = 0; i < steps_.size(); ++i) {
      if (level[i] != l) continue;
      steps_[i].barrierBefore = first && l > 0;
      first = false;
      grouped.push_back(std::move(steps_[i]));
    }
  }
  steps_ = std::move(grouped);

  // What the steps after the last barrier touch, for steps recorded later.
  readSinceBarrier_.clear();
  writtenSinceBarrier_.clear();
  for (std::size_t i = steps_.size(); i-- > 0;) {
    noteSinceBarrier(steps_[i]);
    if (steps_[i].barrierBefore) break;
  }
}

void Plan::finishPrograms() const {
  if (!unfinishedPrograms_.empty()) {
    glnet::finishPrograms(unfinishedPrograms_);
    unfinishedPrograms_.clear();
  }
  // Until every step is counted: a count that throws (too many groups) throws again at every later run.
  if (uncountedSteps_ == 0) return;
  for (const Step& step : steps_) {
    if (!step.counting) continue;
    countGroups(step);
    --uncountedSteps_;
  }
}

void Plan::begin() const {
  // Programs started while recording compile side by side until here.
  finishPrograms();
  if (issuer_.takeOver()) shadow_ = Shadow{};
  // Steps recorded since the last run may use more bindings and uniforms.
  shadow_.bindings.resize(bindingCount_, Range{0, 0, 0});
  shadow_.uniforms.resize(uniformSlots_.size());
  stateCalls_ = 0;
  // Work recorded elsewhere (another plan, an earlier run of this one) may still write what this run reads.
  glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);
}

void Plan::run() const {
  begin();
  for (const Step& step : steps_) issue(step);
}

void Plan::run(const std::function<void(std::size_t)>& afterStep) const {
  begin();
  for (std::size_t i = 0; i < steps_.size(); ++i) {
    issue(steps_[i]);
    afterStep(i);
  }
}

std::optional<std::size_t> Plan::lastStepWriting(const Buffer& buffer, std::size_t offset, std::size_t bytes) const {
  const Range range{buffer.id(), offset, offset + bytes};
  for (std::size_t i = steps_.size(); i-- > 0;) {
    for (const Bound& bound : steps_[i].bindings) {
      if (bound.written && bound.range.overlaps(range)) return i;
    }
  }
  return std::nullopt;
}

std::vector<double> Plan::runTimed() const {
  std::vector<TimerQuery> stamps(steps_.size() + 1);
  begin();
  stamps[0].record();
  for (std::size_t i = 0; i < steps_.size(); ++i) {
    issue(steps_[i]);
    stamps[i + 1].record();
  }
  std::vector<double> milliseconds;
  for (std::size_t i = 0; i < steps_.size(); ++i) {
    milliseconds.push_back(static_cast<double>(stamps[i + 1].nanoseconds() - stamps[i].nanoseconds()) / 1e6);
  }
  return milliseconds;
}

void Plan::runReadingEveryStep() const {
  std::vector<std::uint8_t> scratch;
  begin();
  for (const Step& step : steps_) {
    glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);
    issue(step);
    for (const Bound& bound : step.bindings) {
      if (!bound.written) continue;
      scratch.resize(bound.range.end - bound.range.begin);
      bound.buffer->download(scratch.data(), scratch.size(), bound.range.begin);
    }
  }
}

void Plan::issue(const Step& step) const {
  if (step.barrierBefore) glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);
  if (step.program != shadow_.program) {
    glUseProgram(step.program);
    shadow_.program = step.program;
    ++stateCalls_;
  }
  for (const Bound& bound : step.bindings) {
    Range& inPlace = shadow_.bindings[bound.index];
    if (inPlace == bound.range) continue;
    inPlace = bound.range;
    ++stateCalls_;
    if (bound.whole) {
      glBindBufferBase(GL_SHADER_STORAGE_BUFFER, bound.index, bound.range.buffer);
    } else {
      glBindBufferRange(GL_SHADER_STORAGE_BUFFER, bound.index, bound.range.buffer, static_cast<GLintptr>(bound.range.begin),
                        static_cast<GLsizeiptr>(bound.range.end - bound.range.begin));
    }
  }
  for (std::size_t u = 0; u < step.uniforms.size(); ++u) {
    const Uniform& uniform = step.uniforms[u];
    const std::int64_t integer =
        uniform.parameter >= 0 ? uniform.scale * parameters_[static_cast<std::size_t>(uniform.parameter)] : uniform.integer;
    std::optional<std::uint64_t>& inPlace = shadow_.uniforms[step.uniformSlots[u]];
    const std::uint64_t bits = uniformBits(uniform, integer);
    if (inPlace == bits) continue;
    inPlace = bits;
    ++stateCalls_;
    switch (uniform.type) {
      case Uniform::Type::uint32:
        glProgramUniform1ui(step.program, uniform.location, static_cast<GLuint>(integer));
        break;
      case Uniform::Type::int32:
        glProgramUniform1i(step.program, uniform.location, static_cast<GLint>(integer));
        break;
      case Uniform::Type::float32:
        glProgramUniform1f(step.program, uniform.location, uniform.real);
        break;
    }
  }
  glDispatchCompute(step.groups[0], step.groups[1], step.groups[2]);
}

void Plan::read(const Buffer& buffer, void* out, std::size_t bytes, std::size_t offset) const {
  buffer.download(out, bytes, offset);
}

std::size_t Plan::barrierCount() const {
  return 1 + static_cast<std::size_t>(std::count_if(steps_.begin(), steps_.end(), [](const Step& s) { return s.barrierBefore; }));
}

std::vector<std::size_t> Plan::recordingOrder() const {
  std::vector<std::size_t> result;
  for (const Step& step : steps_) result.push_back(step.recorded);
  return result;
}

std::vector<std::string> Plan::labels() const {
  std::vector<std::string> result;
  for (const Step& step : steps_) result.push_back(step.label);
  return result;
}

std::vector<std::string> Plan::tuningKeys() const {
  std::vector<std::string> result;
  for (const Step& step : steps_) result.push_back(step.tuningKey);
  return result;
}

}  // namespace glnet
