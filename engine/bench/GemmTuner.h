// `glnet_bench --model M.onnx --tune`: the GEMMs of an ONNX model's inference plan timed on this device under every
// candidate (ops/GemmTuning.h), each shape's fastest kept in the device's tuning table and written to its file. A glnet
// model's training step is tuned by train/TrainingTuning.h.
#pragma once

#include "model/OnnxRunner.h"
#include "ops/GemmTuning.h"

#include <functional>
#include <string>
#include <vector>

namespace glnet {

// An ONNX model's plan of `shapes`: `feeds` run through it `runs` times unmeasured, then `runs` times timing every
// dispatch. Leaves the runner with no plan kept, so that the next run plans with the tuning.
GemmTuningReport tuneGemms(OnnxRunner& runner, const InputShapes& shapes, const std::vector<const float*>& feeds, int runs,
                           const std::function<void(const std::string&)>& progress = {});

}  // namespace glnet
