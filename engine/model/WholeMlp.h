// Binding of shaders/WholeMlp.glsl: a whole MLP for a small batch in one dispatch (normalize, every dense
// layer, softmax and argmax), for batches whose cost is the fixed cost of each dispatch.
#pragma once

#include "gl/Buffer.h"
#include "gl/Context.h"
#include "model/Network.h"
#include "plan/Plan.h"
#include "plan/ProgramCache.h"

namespace glnet {

class WholeMlpOp {
 public:
  // Batches of at most this many images take the one-dispatch path; larger ones fill the GPU with GEMMs.
  static constexpr std::size_t largestBatch = 64;
  // True when `network` is dense layers only, each activation fits in shared memory, and `batch` is small.
  // (The first layer runs in slices across groups, so one multiprocessor does not read all its weights.)
  static bool fits(const Network& network, std::size_t batch, const Context& context);

  // Uploads the widths, then the weights transposed ([in × out] per layer; the first layer in slices of
  // outputs, one group each, sized for batches of `batch`) and the bias of each layer.
  // `concurrentGroups`: how many groups the device runs at once (see concurrentGroups()); with fewer images
  // than that, the first layer is cut into narrower slices.
  WholeMlpOp(ProgramCache& programs, const Network& network, const Limits& limits, std::size_t batch, std::size_t concurrentGroups);
  // About 2048 on a GPU (16 groups on each of the H100's 132 multiprocessors); 1 on a CPU device, which pays
  // each group's fixed cost in turn (llvmpipe, 784-128-10 at batch 64: 7.8 ms in one group per image against
  // 31 ms in 32).
  static std::size_t concurrentGroups(const Context& context);
  // classes[first + image] and, when given, probabilities[image × classes] for `batch` images starting at
  // image `first` of `pixels` (a constant, or a plan parameter via Uniform::fromParameter).
  Dispatch operator()(const BufferView& pixels, const BufferView& classes, const BufferView* probabilities, std::uint32_t batch,
                      const Uniform& first) const;
  static constexpr int firstImageLocation = 2;

 private:
  std::size_t batch_;       // the largest batch a dispatch runs
  std::size_t sliceWidth_;  // outputs of the first layer per group
  std::size_t slices_;      // groups per image
  Buffer weights_;
  Buffer firstLayerOutputs_;  // [image × slices × width], when slices_ > 1
  Buffer arrivals_;           // per image: the slices done (back to 0 by the last)
  InputFormat input_;
  ProgramCache* programs_;
  std::vector<ShaderDefine> defines_;
};

}  // namespace glnet
