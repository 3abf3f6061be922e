#include "common/Tuning.h"

namespace glnet::cli {

nlohmann::json gemmTuningJson(const GemmTuningReport& t) {
  return {{"shapes", t.shapes}, {"candidates", t.candidates}, {"changed", t.changed}, {"rule_gemm_ms", t.ruleMs},
          {"tuned_gemm_ms", t.tunedMs}, {"rule_total_ms", t.ruleTotalMs}, {"tuned_total_ms", t.tunedTotalMs},
          {"reverted", t.reverted}, {"seconds", t.seconds}, {"path", t.path}};
}

}  // namespace glnet::cli
