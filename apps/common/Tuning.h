// A GEMM tuning's report as JSON (glnet_bench --tune --json-out, glnet_train --tune --json).
#pragma once

#include "ops/GemmTuning.h"

#include <nlohmann/json.hpp>

namespace glnet::cli {

nlohmann::json gemmTuningJson(const GemmTuningReport& report);

}  // namespace glnet::cli
