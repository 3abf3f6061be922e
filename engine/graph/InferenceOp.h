// What the general operators of imported models (InferenceOps.h) share, split by family over BroadcastOps.cpp,
// LayoutOps.cpp, WindowOps.cpp and AxisOps.cpp: the base of operators without gradients, and helpers on shapes.
// Internal to engine/graph.
#pragma once

#include "base/check.h"
#include "graph/InferenceOps.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace glnet::inference {

std::uint32_t count32(const Shape& shape);
// Contiguous (row-major) strides of a shape, in elements.
std::vector<std::int64_t> stridesOf(const Shape& shape);
// Strides of `shape` seen from the axes of `result` (aligned on the right), 0 along broadcast axes.
std::vector<std::int64_t> broadcastStrides(const Shape& shape, const Shape& result);
// Calls visit(coordinates) for every element of `shape`, in row-major order.
void forEachCoordinate(const Shape& shape, const std::function<void(const std::vector<std::uint32_t>&)>& visit);
std::string shapesText(const std::vector<Shape>& in);
// Throws unless `shape` has at most largestRank axes.
void checkRank(const std::string& op, const Shape& shape);
std::vector<Shape> shapesOf(const std::vector<GpuTensor>& in);
std::vector<Shape> shapesOf(const std::vector<HostTensor64>& in);

// A dispatch of AxisReduce.glsl (`kind` and `defines`) over `lines` lines of `axis` values `inner` apart: its program,
// groups and uniforms; the caller binds the buffers.
Dispatch axisDispatch(ProgramCache& programs, AxisKind kind, std::vector<ShaderDefine> defines, std::size_t lines, std::size_t axis, std::size_t inner,
                      float epsilon, const std::string& label);

class InferenceOp : public Op {
 public:
  bool differentiable() const override { return false; }
  bool passesGradient(std::size_t) const override { return false; }
  void backward(ProgramCache&, Plan&, const std::vector<GpuTensor>&, const GpuTensor&, const GpuTensor&,
                const std::vector<std::optional<GradientTarget>>&) const override {
    GLNET_ASSERT(false, "the operators of imported models run in inference graphs only");
  }
  std::vector<std::vector<double>> referenceBackward(const std::vector<HostTensor64>&, const std::vector<double>&,
                                                     const std::vector<double>&) const override {
    GLNET_ASSERT(false, "the operators of imported models run in inference graphs only");
    return {};
  }
};

}  // namespace glnet::inference
