// Bindings of shaders/Elementwise.glsl, shaders/Loss.glsl (mean squared error) and shaders/Reduce.glsl.
#pragma once

#include "numbers/Activation.h"
#include "numbers/ElementwiseKinds.h"
#include "plan/Plan.h"
#include "plan/ProgramCache.h"

namespace glnet {

class ElementwiseOp {
 public:
  // `activation` matters for the two activation kinds, add (applied to the sum) and scale-multiply-activate.
  ElementwiseOp(ProgramCache& programs, ElementwiseKind kind, Activation activation = Activation::none);
  // out = f(a, b) over `count` elements, written or added (accumulate); `columns` is the bias width,
  // `scale` the factor of the two scaling kinds.
  Dispatch operator()(const BufferView& a, const BufferView& b, const BufferView& out, std::uint32_t count,
                      bool accumulate, std::uint32_t columns = 1, float scale = 1.0f) const;
  // The same values stored in two places in one pass (each written or added): an add's gradient to both its inputs.
  // The two must not overlap.
  Dispatch twoResults(const BufferView& a, const BufferView& b, const BufferView& out, bool accumulate, const BufferView& second,
                      bool accumulateSecond, std::uint32_t count) const;

 private:
  ElementwiseKind kind_;
  ProgramCache& programs_;
  Activation activation_;
  const Program& program_;
};

class MeanSquaredErrorOp {
 public:
  explicit MeanSquaredErrorOp(ProgramCache& programs);
  // loss[r] = mean over the row of (y − t)².
  Dispatch loss(const BufferView& y, const BufferView& target, const BufferView& loss, std::uint32_t rows,
                std::uint32_t columns) const;
  // dY = rowGradient[r] · 2(y − t)/columns.
  Dispatch gradient(const BufferView& y, const BufferView& target, const BufferView& rowGradient, const BufferView& dy,
                    std::uint32_t rows, std::uint32_t columns, bool accumulate) const;

 private:
  const Program& loss_;
  const Program& gradient_;
};

class ReduceOp {
 public:
  explicit ReduceOp(ProgramCache& programs);
  // totals[slot] += Σ values[0, count).
  Dispatch sumInto(const BufferView& values, std::uint32_t count, const BufferView& totals, std::uint32_t slot) const;
  // totals[slot] = Σ values[0, count)² (written, not added).
  Dispatch squaresInto(const BufferView& values, std::uint32_t count, const BufferView& totals, std::uint32_t slot) const;

 private:
  const Program& program_;
  const Program& squares_;
};

}  // namespace glnet
