// The per-node GPU time table that glnet_run --profile and glnet_bench --model M.onnx print.
#pragma once

#include "model/OnnxRunner.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <vector>

namespace glnet::cli {

// The 20 slowest nodes (every one with `all`), with their share of the total.
void printNodeTimes(std::FILE* out, const OnnxRunner::Profile& profile, int runs, bool all);
nlohmann::json nodeTimesJson(const OnnxRunner::Profile& profile);

}  // namespace glnet::cli
