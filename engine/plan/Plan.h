// A recorded sequence of compute dispatches (one batch of inference, one training step), replayed with no
// host round trip. Barriers are decided at record time from buffer hazards (a step reads or writes a buffer written, or
// writes one read, since the last barrier), so replay costs no host checks; a whole plan's independent steps may then
// be grouped to share them (groupIndependentSteps).
#pragma once

#include "gl/Buffer.h"
#include "gl/Context.h"
#include "gl/Program.h"

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace glnet {

enum class Access { read, write, readWrite };

// A buffer, or the part [offset, offset + bytes) of one; bytes 0 means to the end.
struct BufferView {
  BufferView(const Buffer& whole) : buffer(&whole) {}  // NOLINT(google-explicit-constructor): a buffer is a view of itself
  BufferView(const Buffer& part, std::size_t offset, std::size_t bytes) : buffer(&part), offset(offset), bytes(bytes) {}
  const Buffer* buffer;
  std::size_t offset = 0;
  std::size_t bytes = 0;
  // The bytes the view may use: its size, or the rest of its buffer.
  std::size_t room() const { return bytes ? bytes : buffer->bytes() - offset; }
};

// Whether two views share no byte.
inline bool disjoint(const BufferView& a, const BufferView& b) {
  return a.buffer != b.buffer || a.offset + a.room() <= b.offset || b.offset + b.room() <= a.offset;
}

// `bytes` rounded up to a multiple of 256, the largest storage buffer offset alignment of the devices glnet runs on: a
// view starting after that many bytes of a bound one can be bound too.
constexpr std::size_t boundableBytes(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

// Which elements of a bound range a dispatch touches: class `part` of a partition of the range that dispatches in
// other classes never touch (a strided convolution's dX phases: the pixels (ih, iw) ≡ (row, column) modulo the
// stride). `partition` names the partition, 0 none (the whole range). Two accesses to the same range in one
// partition but in different parts need no barrier between them.
struct RangePart {
  std::uint64_t partition = 0;
  std::uint32_t part = 0;
};

// A binding of part of a buffer: [offset, offset + bytes); bytes 0 means to the end. Offsets must be
// multiples of the device's storage buffer offset alignment.
struct StorageBinding {
  unsigned index;
  const Buffer* buffer;
  Access access;
  std::size_t offset = 0;
  std::size_t bytes = 0;
  RangePart part;

  StorageBinding(unsigned index, const BufferView& view, Access access, RangePart part = {})
      : index(index), buffer(view.buffer), access(access), offset(view.offset), bytes(view.bytes), part(part) {}
};

// A uniform set before a dispatch: a constant, or a plan parameter times `scale` (an offset that changes
// from one run to the next, such as the first image of a batch).
struct Uniform {
  enum class Type { int32, uint32, float32 };
  int location = 0;
  Type type = Type::uint32;
  std::int64_t integer = 0;
  float real = 0.0f;
  int parameter = -1;
  std::int64_t scale = 1;

  static Uniform u32(int location, std::uint32_t value) { return {location, Type::uint32, value, 0.0f, -1, 1}; }
  static Uniform i32(int location, std::int32_t value) { return {location, Type::int32, value, 0.0f, -1, 1}; }
  static Uniform f32(int location, float value) { return {location, Type::float32, 0, value, -1, 1}; }
  static Uniform fromParameter(int location, int parameter, std::int64_t scale = 1) {
    return {location, Type::uint32, 0, 0.0f, parameter, scale};
  }
};

struct Dispatch {
  const Program* program = nullptr;
  std::vector<StorageBinding> buffers;
  std::vector<Uniform> uniforms;
  std::array<std::uint32_t, 3> groups{1, 1, 1};
  // Instead of `groups`, a 1-D problem of this many invocations: its groups along x (rounded up to whole groups of the
  // local size the shader declares) are counted once its program has compiled (Plan::finishPrograms), so that the
  // programs of a plan compile side by side as it is recorded.
  std::optional<std::uint64_t> invocations;
  // A 1-D problem whose shader indexes with LINEAR_INVOCATION_INDEX and bounds-checks, so groups beyond
  // the device's x limit may fold into y.
  bool linear = false;
  std::string label;
  // The GEMM shape it runs (GemmChoice::tuningKey), empty for other work: what `glnet_bench --tune` times it under.
  std::string tuningKey;
};

class Plan {
 public:
  enum class SyncMode { hazards, all };
  // GLNET_SYNC=all puts a barrier after every dispatch (debugging); anything else tracks hazards.
  static SyncMode syncModeFromEnvironment();

  explicit Plan(const Limits& limits, SyncMode mode = syncModeFromEnvironment());

  // A run-time value for uniforms (see Uniform::fromParameter); returns its id.
  int addParameter(std::uint32_t initial = 0);
  void setParameter(int parameter, std::uint32_t value);

  void record(const Dispatch& dispatch);
  // Reorders the steps recorded so far into levels: each step goes right after the last barrier that every
  // step it depends on (reads what they write, writes what they read or write) precedes. Independent
  // branches then share barriers, and the run issues as few as the longest chain of dependent steps needs.
  // Call it once a plan is whole and before asking it for step indices (lastStepWriting); GLNET_SYNC=all
  // plans keep their order.
  void groupIndependentSteps();
  // An op that takes several dispatches (a split-K GEMM and its sum) records them in order.
  void record(const std::vector<Dispatch>& dispatches) {
    for (const Dispatch& dispatch : dispatches) record(dispatch);
  }
  // Waits for the programs its dispatches use to compile (Program::finish; they compile side by side from when they are
  // asked for), throwing a compile error, and counts the groups of dispatches given as invocations (throwing where they
  // exceed the device's counts); the first run does it too.
  void finishPrograms() const;
  // Issues every dispatch; no host synchronisation.
  void run() const;
  // The same, calling afterStep(i) as soon as step i is issued, for GL work between steps (a copy of results
  // that are complete, a fence). afterStep must leave programs, storage bindings and uniforms alone.
  void run(const std::function<void(std::size_t)>& afterStep) const;
  // The last step that writes any of the bytes [offset, offset + bytes) of `buffer`; none when no step does.
  std::optional<std::size_t> lastStepWriting(const Buffer& buffer, std::size_t offset, std::size_t bytes) const;
  // For measurements: runs with a GL_TIMESTAMP before the first and after every dispatch and returns each
  // dispatch's GPU milliseconds (waits for the results).
  std::vector<double> runTimed() const;
  // The naive way, for comparison: after every dispatch, wait for the GPU and read back everything it wrote.
  void runReadingEveryStep() const;
  // The one synchronisation: waits for the GPU and copies `bytes` of `buffer` from `offset`.
  void read(const Buffer& buffer, void* out, std::size_t bytes, std::size_t offset = 0) const;

  std::size_t dispatchCount() const { return steps_.size(); }
  // Barriers one run() issues, the one at its start included.
  std::size_t barrierCount() const;
  SyncMode syncMode() const { return mode_; }
  std::vector<std::string> labels() const;
  // Per step in run order, its Dispatch::tuningKey.
  std::vector<std::string> tuningKeys() const;
  // Per step in run order, its place in the order of recording (they differ after groupIndependentSteps).
  std::vector<std::size_t> recordingOrder() const;
  // Buffer bindings, uniforms and program switches the last run issued. A run skips those already in place:
  // set earlier in the same run, or left by this plan's previous run when no other plan ran in between.
  std::size_t stateCallsLastRun() const { return stateCalls_; }

 private:
  struct Range {
    unsigned buffer;
    std::size_t begin, end;
    RangePart part{};
    bool overlaps(const Range& other) const {
      const bool disjointParts = part.partition != 0 && part.partition == other.part.partition && part.part != other.part.part &&
                                 begin == other.begin && end == other.end;
      return buffer == other.buffer && begin < other.end && other.begin < end && !disjointParts;
    }
    bool operator==(const Range& other) const { return buffer == other.buffer && begin == other.begin && end == other.end; }
  };
  struct Bound {
    unsigned index;
    Range range;
    bool whole;
    const Buffer* buffer;
    bool read;
    bool written;
  };
  struct Step {
    unsigned program;
    std::vector<Bound> bindings;
    std::vector<Uniform> uniforms;
    std::vector<std::size_t> uniformSlots;  // per uniform, its (program, location) in the shadow
    // Counted by finishPrograms where the dispatch gave invocations and its program was still compiling.
    mutable std::array<std::uint32_t, 3> groups;
    bool barrierBefore;
    std::string label;
    std::string tuningKey;
    std::size_t recorded;  // its index in the order of recording
    mutable const Program* counting;  // the program whose local size counts its groups, until it has
    std::uint64_t invocations;
    bool linear;
  };
  // `groups` as the device can run them: a linear dispatch's groups beyond its x limit folded into y; throws where
  // they exceed its counts.
  std::array<std::uint32_t, 3> runnableGroups(std::array<std::uint32_t, 3> groups, bool linear, const std::string& label) const;
  void countGroups(const Step& step) const;
  Limits limits_;
  SyncMode mode_;
  std::vector<Step> steps_;
  std::vector<std::uint32_t> parameters_;
  std::vector<Range> readSinceBarrier_;
  std::vector<Range> writtenSinceBarrier_;
  // What this plan last left in GL state, valid while no other plan issued since (see stateCallsLastRun).
  struct Shadow {
    unsigned program = 0;
    std::vector<Range> bindings;                        // by binding index; buffer 0 = unknown
    std::vector<std::optional<std::uint64_t>> uniforms;  // by uniform slot: the value's bits
  };
  // Which plan issued last on this thread: unique per plan, carried along by a move, forgotten with the plan.
  class IssuerId {
   public:
    IssuerId();
    ~IssuerId();
    IssuerId(IssuerId&& other) noexcept;
    IssuerId& operator=(IssuerId&& other) noexcept;
    IssuerId(const IssuerId&) = delete;
    IssuerId& operator=(const IssuerId&) = delete;
    // True when another plan (or none) issued since this one; from now on this one is the last.
    bool takeOver();

   private:
    std::uint64_t value_;
  };
  // Adds the ranges `step` reads and writes to those touched since the last barrier.
  void noteSinceBarrier(const Step& step);
  void begin() const;
  void issue(const Step& step) const;
  mutable IssuerId issuer_;
  std::size_t bindingCount_ = 0;                        // the highest binding index recorded, plus one
  std::vector<std::pair<unsigned, int>> uniformSlots_;  // (program, location) per slot
  mutable Shadow shadow_;
  mutable std::size_t stateCalls_ = 0;
  mutable std::vector<const Program*> unfinishedPrograms_;  // started, not yet finished (Program::start)
  mutable std::size_t uncountedSteps_ = 0;                  // steps whose groups wait for their program (Step::counting)
};

}  // namespace glnet
