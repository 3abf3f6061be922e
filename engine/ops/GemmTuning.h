// Per-device GEMM choices measured by `glnet_bench --tune` and `glnet_train --tune` (tuneGemms below): for each GEMM
// shape a model plans, the candidate (a configuration, with the rule's split of the sum or the whole sum) that ran
// fastest on this device. chooseGemm reads them before its rule; GLNET_TUNE=0 leaves them unread, and shapes never
// tuned keep the rule.
#pragma once

#include "ops/Gemm.h"

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace glnet {

// What a tuning is kept for: a GEMM's shape, whether it may split its sum, and how it reads its operand.
std::string gemmTuningKey(std::uint64_t rows, std::uint64_t columns, std::uint64_t depth, bool splittable, GemmOperand operand);

struct GemmCandidate {
  const GemmConfig* config = nullptr;
  bool split = true;  // the rule's split of the sum for this configuration (which may be none), or never a split
  std::uint32_t splits = 0;  // > 1 (with split): the sum cut into about this many parts instead of the rule's split
  std::string name() const;  // "64x64 split", "64x64 split 4", "128x128 whole"
};
// Every configuration that fits `limits`, each with the rule's split, whole, and cut in 2 and in 4 (the rule's model
// prices a split's partial sums; the tuning measures them).
std::vector<GemmCandidate> gemmCandidates(const Limits& limits);

class GemmTuning {
 public:
  // One line per shape, `KEY = CONFIG split|whole`; a line that does not read so (a damaged or older file) is
  // skipped with one warning naming `source`.
  static GemmTuning parse(const std::string& text, const std::string& source);
  std::string text() const;
  std::optional<GemmCandidate> find(const std::string& key) const;
  void set(const std::string& key, const GemmCandidate& candidate);
  void erase(const std::string& key) { entries_.erase(key); }
  std::size_t size() const { return entries_.size(); }

 private:
  std::map<std::string, GemmCandidate> entries_;
};

// The table of the current context's device, read on first use from currentGemmTuningPath(); null when GLNET_TUNE=0,
// while an IgnoredGemmTuning lives, or when no device is current.
GemmTuning* currentGemmTuning();
// <Program::binaryCacheDirectory()>/gemm-tuning-<Program::deviceCacheName()>.txt; empty when GLNET_CACHE=0 or no
// cache location is known (a tuning then lasts as long as the process).
std::string currentGemmTuningPath();
// Writes the current device's table to its path (atomically); nothing when there is no path.
void saveCurrentGemmTuning();
// Throws glnet::Error naming the path when the table could not be written there, so that a tuning refuses before it
// measures rather than after (its folder is made first).
void checkCurrentGemmTuningWritable();

// While it lives, chooseGemm uses its rule (or a forced configuration) only: what a tuning measures against.
class IgnoredGemmTuning {
 public:
  IgnoredGemmTuning();
  ~IgnoredGemmTuning();
  IgnoredGemmTuning(const IgnoredGemmTuning&) = delete;
  IgnoredGemmTuning& operator=(const IgnoredGemmTuning&) = delete;

 private:
  bool previous_;
};

// Why a tuning asked for (`option`, e.g. "--tune") would measure nothing this process keeps: GLNET_TUNE=0, or
// GLNET_GEMM_CONFIG forcing every GEMM; empty when it can run.
std::string gemmTuningRefusal(const std::string& option);

struct GemmTuningReport {
  std::size_t shapes = 0;      // GEMM shapes in the plan
  std::size_t candidates = 0;  // candidates each was timed under
  std::size_t changed = 0;     // shapes whose fastest candidate beat the rule's choice
  double ruleMs = 0;           // the plan's GEMMs, GPU time per run, as the rule chooses them
  double tunedMs = 0;          // the same with each shape's fastest candidate
  double ruleTotalMs = 0;      // the whole plan's GPU time per run under the rule (the faster of two measurements)
  double tunedTotalMs = 0;     // the same under the tuning as kept
  bool reverted = false;       // the tuned plan was not faster as a whole, so this tuning's changes were dropped
  double seconds = 0;          // the tuning's wall time, plans and programs built included
  std::string path;            // where the table was written; empty when the cache is off (GLNET_CACHE=0)
};

// What a tuning times: a plan built afresh under the GEMM choices in force, warmed up and timed dispatch by dispatch.
struct GemmPlanTimes {
  std::map<std::string, double> gemmMs;  // per GEMM shape (Dispatch::tuningKey): its dispatches' median GPU times, summed
  double totalMs = 0;                    // the whole plan, median per run
};

// Times the plan (`timePlan`) under the rule, then under each candidate (every GEMM of the plan forced to it), then
// under the rule again (each shape keeps the rule's faster time: a first timing may run before the GPU's clocks rise).
// A shape keeps a candidate only where it beat the rule by at least 3 % (a smaller difference is within the timing's
// spread); otherwise any earlier tuning of it is dropped. Per-dispatch times of small GEMMs overlap their neighbours'
// waits, so the whole plan is then timed under the tuning and under the rule again: unless the tuned plan is at least
// 1 % faster, its changes are dropped. `progress` names each candidate.
GemmTuningReport tuneGemms(const std::function<GemmPlanTimes()>& timePlan, const std::function<void(const std::string&)>& progress = {});

// A timePlan's warm-up: calls `runAndWait` (one run of the plan, waiting for the GPU) `runs` times, and more until a
// quarter of a second has passed. A GPU lowers its clocks while the CPU compiles a candidate's programs, and a few runs
// of a short plan do not raise them again: on the H100, alexnet's batch-64 plan timed 8.6 ms in a tuning of 20-run
// warm-ups and 4.8 ms right after it, so the tuning's whole-plan check compared clock states, not choices.
void warmUpForTiming(const std::function<void()>& runAndWait, int runs);

}  // namespace glnet
