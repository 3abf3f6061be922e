// `glnet_bench --model M --tune`: the GEMMs of a model's plan (an ONNX model's inference, a glnet model's training
// step) timed on this device under every candidate (ops/GemmTuning.h), each shape's fastest kept in the device's
// tuning table and written to its file.
#pragma once

#include "model/OnnxRunner.h"

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace glnet {

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

// Times the plan (`timePlan`) under the rule, then under each candidate (every GEMM of the plan forced to it). A shape
// keeps a candidate only where it beat the rule by at least 3 % (a smaller difference is within the timing's spread);
// otherwise any earlier tuning of it is dropped. Per-dispatch times of small GEMMs overlap their neighbours' waits, so
// the whole plan is then timed under the tuning and under the rule again: unless the tuned plan is at least 1 % faster,
// its changes are dropped. `progress` names each candidate.
GemmTuningReport tuneGemms(const std::function<GemmPlanTimes()>& timePlan, const std::function<void(const std::string&)>& progress = {});
// An ONNX model's plan of `shapes`: `feeds` run through it `runs` times unmeasured, then `runs` times timing every
// dispatch. Leaves the runner with no plan kept, so that the next run plans with the tuning.
GemmTuningReport tuneGemms(OnnxRunner& runner, const InputShapes& shapes, const std::vector<const float*>& feeds, int runs,
                           const std::function<void(const std::string&)>& progress = {});

}  // namespace glnet
