// Binding of shaders/Optimizer.glsl and shaders/Gather.glsl: the parameter update and the batch gather of
// a training step.
#pragma once

#include "numbers/OptimizerKinds.h"
#include "ops/Normalize.h"
#include "plan/Plan.h"
#include "plan/ProgramCache.h"

#include <optional>

namespace glnet {

OptimizerKind parseOptimizer(const std::string& name);  // throws UsageError
const char* optimizerName(OptimizerKind kind);

struct OptimizerSettings {
  OptimizerKind kind = OptimizerKind::sgd;
  float learningRate = 0.1f;
  float momentum = 0.9f;  // also Adam's β1
  float beta2 = 0.999f;
  float epsilon = 1e-8f;
  // L2 (added to the gradient) for sgd, momentum and adam; decoupled (p −= lr·λ·p) for adamw. Applied to weights only
  // (parameters of rank 2 and more), not to biases and normalization parameters.
  float weightDecay = 0.0f;
  bool nesterov = false;      // momentum only
  float clipNorm = 0.0f;      // > 0: gradients scaled so that their global L2 norm is at most this
};

class OptimizerOp {
 public:
  OptimizerOp(ProgramCache& programs, const OptimizerSettings& settings);
  // Updates `count` parameters from their gradients, the first `decayed` of them with weight decay; `state` holds the
  // optimizer's per-parameter buffers (none for SGD, one for momentum, two for Adam and AdamW). Adam's step t is plan
  // parameter `step`, the learning rate's float bits plan parameter `learningRate`; with clipping, `squaredNorm`
  // holds Σ g² of every gradient (ReduceOp::squaresInto).
  Dispatch update(const BufferView& parameters, const BufferView& gradients, const std::vector<BufferView>& state,
                  std::uint32_t count, std::uint32_t decayed, int step, int learningRate,
                  const std::optional<BufferView>& squaredNorm = std::nullopt) const;
  static std::size_t stateBuffers(OptimizerKind kind) { return kind == OptimizerKind::sgd ? 0 : kind == OptimizerKind::momentum ? 1 : 2; }

 private:
  OptimizerSettings settings_;
  const Program& program_;
};

class GatherOp {
 public:
  explicit GatherOp(ProgramCache& programs);
  // rows × pixelsPerImage floats, (byte/255 − mean)/std in `format`, of images indices[firstRow ...] (plan parameter).
  Dispatch images(const BufferView& pixels, const BufferView& indices, const BufferView& out, std::uint32_t rows,
                  std::uint32_t pixelsPerImage, int firstRow, const InputFormat& format) const;
  // The same with each image (height × width planes) shifted and flipped as augment[firstRow ...] says
  // (packAugmentation).
  Dispatch augmentedImages(const BufferView& pixels, const BufferView& indices, const BufferView& augment, const BufferView& out,
                           std::uint32_t rows, std::uint32_t pixelsPerImage, std::uint32_t height, std::uint32_t width, int firstRow,
                           const InputFormat& format) const;
  static std::uint32_t packAugmentation(int dx, int dy, bool flip) {
    return static_cast<std::uint32_t>(dx + 128) | static_cast<std::uint32_t>(dy + 128) << 8 | (flip ? 1u << 16 : 0u);
  }
  // rows × idsPerSequence floats, the uint32 token ids of sequences indices[firstRow ...] as they are.
  Dispatch tokens(const BufferView& ids, const BufferView& indices, const BufferView& out, std::uint32_t rows, std::uint32_t idsPerSequence,
                  int firstRow) const;
  // rows uint labels of images indices[firstRow ...].
  Dispatch labels(const BufferView& labelBytes, const BufferView& indices, const BufferView& out, std::uint32_t rows,
                  int firstRow) const;

 private:
  const Program& images_;
  const Program& labels_;
  const Program& augmented_;
  const Program& tokens_;
};

}  // namespace glnet
