// Binding of shaders/NextToken.glsl: each row of logits' next token chosen on the GPU (greedy or sampled, see
// numbers/Sampling.h), written as a uint32 id for the host to read and as an exact float for the next step's input.
#pragma once

#include "numbers/Sampling.h"
#include "plan/Plan.h"
#include "plan/ProgramCache.h"

#include <vector>

namespace glnet {

struct NextTokenShape {
  std::uint32_t rows = 1;
  // V: a row's logits. A row holding a NaN gets the id V, and so does a sampled row whose largest logit is not finite.
  std::uint32_t vocabulary = 0;
  // Row r's logits start at logits[logitsOffset + r·logitsStride] (floats; logitsStride 0: V): a decode step's
  // [rows × V], or the last position of each of a prefill's sequences.
  std::uint32_t logitsOffset = 0, logitsStride = 0;
  // Where row r's id goes as a float: idFloats[floatOffset + r·floatStride]; as a uint32: ids[idsOffset + r].
  std::uint32_t floatOffset = 0, floatStride = 1, idsOffset = 0;
};

class NextTokenOp {
 public:
  explicit NextTokenOp(ProgramCache& programs);
  // The workspace operator() needs for `shape` (the greedy search's per-block maxima; at least one, so that its
  // binding always exists).
  std::size_t workspaceBytes(const NextTokenShape& shape) const;
  // ids[idsOffset + r] (uint32) and idFloats[floatOffset + r·floatStride] = row r's next token under `settings` (checked here).
  // `step` is the uniform at stepLocation: a plan parameter that a decode loop advances each replay, so that every
  // step draws afresh without recording again (Uniform::fromParameter(stepLocation, id)), or a constant.
  std::vector<Dispatch> operator()(const BufferView& logits, const BufferView& ids, const BufferView& idFloats,
                                   const BufferView& workspace, const NextTokenShape& shape,
                                   const SamplingSettings& settings, const Uniform& step) const;
  static constexpr int stepLocation = 11;

 private:
  struct Blocks {
    std::uint32_t count, chunk;
  };
  Blocks argmaxBlocks(const NextTokenShape& shape) const;
  const Program& argmaxBlocks_;
  const Program& argmaxFinal_;
  const Program& sample_;
};

}  // namespace glnet
