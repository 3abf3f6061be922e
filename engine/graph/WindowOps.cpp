// Pooling of any geometry and grouped, strided and dilated convolution of imported models (InferenceOps.h).
#include "graph/InferenceOp.h"

#include "base/check.h"
#include "gl/Limits.h"
#include "numbers/ShaderModes.h"
#include "ops/Gemm.h"
#include "ops/StridedCopy.h"
#include "plan/Groups.h"
#include "ref/Reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <utility>

namespace glnet {
namespace inference {
namespace {

std::uint32_t pooledSize(std::uint32_t size, std::uint32_t padBefore, std::uint32_t padAfter, std::uint32_t kernel, std::uint32_t stride,
                          std::uint32_t dilation, bool ceilMode) {
  const std::int64_t span = std::int64_t{dilation} * (kernel - 1) + 1, room = std::int64_t{size} + padBefore + padAfter - span;
  if (room < 0) return 0;
  std::int64_t out = (ceilMode ? (room + stride - 1) / stride : room / stride) + 1;
  // A last window that would start inside the end padding only is dropped (PyTorch and ONNX agree).
  if (ceilMode && (out - 1) * stride >= std::int64_t{size} + padBefore) --out;
  return static_cast<std::uint32_t>(out);
}

// Trainable: its gradient goes back to the window's first maximum (max) or spreads over the cells it averaged.
class PoolOp : public InferenceOp {
 public:
  explicit PoolOp(PoolSettings s) : s_(s) {}
  bool differentiable() const override { return true; }
  bool passesGradient(std::size_t) const override { return true; }
  std::string name() const override {
    return std::string(s_.average ? "average" : "max") + " pool " + std::to_string(s_.kernel[0]) + "x" + std::to_string(s_.kernel[1]);
  }
  Shape outputShape(const std::vector<Shape>& in) const override {
    if (in.size() != 1 || in[0].size() != 4) throw Error(name() + " takes one [N, C, H, W] input, not " + shapesText(in));
    for (int k = 0; k < 2; ++k) {
      if (s_.kernel[k] == 0 || s_.strides[k] == 0 || s_.dilations[k] == 0) throw Error(name() + ": kernel, strides and dilations must be positive");
      // A window wholly in the padding has no value (the maximum of nothing, or an average over no element); ONNX
      // requires pads below the kernel for this reason.
      if (s_.pads[k] >= s_.kernel[k] || s_.pads[k + 2] >= s_.kernel[k]) {
        throw Error(name() + ": pads " + std::to_string(s_.pads[k]) + " and " + std::to_string(s_.pads[k + 2]) + " must be smaller than the kernel");
      }
    }
    const std::uint32_t oh = pooledSize(in[0][2], s_.pads[0], s_.pads[2], s_.kernel[0], s_.strides[0], s_.dilations[0], s_.ceilMode);
    const std::uint32_t ow = pooledSize(in[0][3], s_.pads[1], s_.pads[3], s_.kernel[1], s_.strides[1], s_.dilations[1], s_.ceilMode);
    if (oh == 0 || ow == 0) throw Error(name() + ": the window is larger than the padded input " + describe(in[0]));
    return {in[0][0], in[0][1], oh, ow};
  }
  void forward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out) const override {
    const Program& program = programs.get("Pooling.glsl", {kindDefine(s_.average ? PoolKind::average : PoolKind::max)});
    Dispatch dispatch = linearDispatch(program, name(), elementCount(out.shape));
    dispatch.buffers = {{0, in[0].view, Access::read}, {1, out.view, Access::write}};
    dispatch.uniforms = uniforms(in[0].shape, out.shape);
    plan.record(dispatch);
  }
  void backward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out,
                const GpuTensor& dOut, const std::vector<std::optional<GradientTarget>>& targets) const override {
    if (!targets[0]) return;
    const Program& program = programs.get("Pooling.glsl", {kindDefine(s_.average ? PoolKind::average : PoolKind::max), {"POOL_GRADIENT", "1"}});
    Dispatch dispatch = linearDispatch(program, name() + " backward", elementCount(in[0].shape));
    dispatch.buffers = {{0, in[0].view, Access::read}, {2, dOut.view, Access::read}, {3, targets[0]->view, Access::readWrite}};
    dispatch.uniforms = uniforms(in[0].shape, out.shape);
    dispatch.uniforms.push_back(Uniform::u32(16, targets[0]->accumulate ? 1 : 0));
    plan.record(dispatch);
  }
  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override {
    std::vector<double> y;
    forWindows(in[0], [&](const std::vector<std::size_t>& cells, std::size_t best, double divisor) {
      double sum = 0;
      for (const std::size_t cell : cells) sum += (*in[0].values)[cell];
      y.push_back(s_.average ? sum / divisor : cells.empty() ? -INFINITY : (*in[0].values)[best]);
    });
    return y;
  }
  std::vector<std::vector<double>> referenceBackward(const std::vector<HostTensor64>& in, const std::vector<double>&,
                                                     const std::vector<double>& dy) const override {
    std::vector<double> dx(in[0].values->size(), 0.0);
    std::size_t output = 0;
    forWindows(in[0], [&](const std::vector<std::size_t>& cells, std::size_t best, double divisor) {
      if (s_.average) {
        for (const std::size_t cell : cells) dx[cell] += dy[output] / divisor;
      } else if (!cells.empty()) {
        dx[best] += dy[output];
      }
      ++output;
    });
    return {dx};
  }

 private:
  std::vector<Uniform> uniforms(const Shape& x, const Shape& out) const {
    const std::array<std::uint32_t, 16> values{x[0] * x[1], x[2], x[3], out[2], out[3], s_.kernel[0], s_.kernel[1], s_.strides[0],
                                               s_.strides[1], s_.dilations[0], s_.dilations[1], s_.pads[0], s_.pads[1], s_.pads[2],
                                               s_.pads[3], s_.countIncludePad ? 1u : 0u};
    std::vector<Uniform> result;
    for (std::size_t k = 0; k < values.size(); ++k) {
      const bool unsignedUniform = k == 0 || k == 3 || k == 4 || k == 15;
      result.push_back(unsignedUniform ? Uniform::u32(static_cast<int>(k), values[k])
                                       : Uniform::i32(static_cast<int>(k), static_cast<std::int32_t>(values[k])));
    }
    return result;
  }
  // Calls visit(the input indices of the window's cells inside the input, the first maximum's index, the average's
  // divisor) for every output element in order. Average pooling ignores dilations, as ONNX's AveragePool before
  // opset 19 does.
  template <class Visit>
  void forWindows(const HostTensor64& in, Visit visit) const {
    const Shape& x = in.shape;
    const Shape out = outputShape({x});
    const std::array<std::uint32_t, 2> dilations = s_.average ? std::array<std::uint32_t, 2>{1, 1} : s_.dilations;
    std::vector<std::size_t> cells;
    forEachCoordinate(out, [&](const std::vector<std::uint32_t>& c) {
      const std::int64_t top = std::int64_t{c[2]} * s_.strides[0] - s_.pads[0], left = std::int64_t{c[3]} * s_.strides[1] - s_.pads[1];
      cells.clear();
      std::size_t best = 0;
      for (std::int64_t kh = 0; kh < s_.kernel[0]; ++kh) {
        for (std::int64_t kw = 0; kw < s_.kernel[1]; ++kw) {
          const std::int64_t ih = top + kh * dilations[0], iw = left + kw * dilations[1];
          if (ih < 0 || iw < 0 || ih >= x[2] || iw >= x[3]) continue;
          const std::size_t index = ((std::size_t{c[0]} * x[1] + c[1]) * x[2] + static_cast<std::size_t>(ih)) * x[3] + static_cast<std::size_t>(iw);
          if (cells.empty() || ref::beats((*in.values)[index], (*in.values)[best])) best = index;
          cells.push_back(index);
        }
      }
      std::int64_t divisor = static_cast<std::int64_t>(cells.size());
      if (s_.countIncludePad) {
        divisor = (std::min<std::int64_t>(top + s_.kernel[0], std::int64_t{x[2]} + s_.pads[2]) - top) *
                  (std::min<std::int64_t>(left + s_.kernel[1], std::int64_t{x[3]} + s_.pads[3]) - left);
      }
      visit(cells, best, static_cast<double>(std::max<std::int64_t>(divisor, 1)));
    });
  }

 private:
  PoolSettings s_;
};

// Trainable without a fused function (GroupedConvGradient.glsl).
class GroupedConvOp : public InferenceOp {
 public:
  GroupedConvOp(ConvSettings s, Pointwise after) : s_(s), after_(after) {}
  bool differentiable() const override { return after_.kind == PointwiseKind::identity; }
  bool passesGradient(std::size_t) const override { return differentiable(); }
  std::string name() const override {
    return std::string(s_.groups > 1 ? "grouped conv" : "direct conv") + (after_.kind == PointwiseKind::identity ? "" : " + " + after_.name());
  }
  Shape outputShape(const std::vector<Shape>& in) const override {
    const bool fits = in.size() == 3 && in[0].size() == 4 && in[1].size() == 4 && in[2].size() == 1 && s_.groups > 0 &&
                      in[0][1] % s_.groups == 0 && in[1][0] % s_.groups == 0 && in[1][1] * s_.groups == in[0][1] && in[2][0] == in[1][0];
    if (!fits) {
      throw Error("conv takes X [N, C, H, W], W [OC, C/groups, KH, KW] and b [OC] with C and OC multiples of the " +
                  std::to_string(s_.groups) + " groups; got " + shapesText(in));
    }
    for (int k = 0; k < 2; ++k) {
      if (s_.strides[k] == 0 || s_.dilations[k] == 0) throw Error("conv: strides and dilations must be positive");
    }
    const std::uint32_t oh = pooledSize(in[0][2], s_.pads[0], s_.pads[2], in[1][2], s_.strides[0], s_.dilations[0], false);
    const std::uint32_t ow = pooledSize(in[0][3], s_.pads[1], s_.pads[3], in[1][3], s_.strides[1], s_.dilations[1], false);
    if (oh == 0 || ow == 0) throw Error("conv: the kernel is larger than the padded input " + describe(in[0]));
    return {in[0][0], in[1][0], oh, ow};
  }
  void forward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out) const override {
    const Shape& x = in[0].shape;
    const Shape& w = in[1].shape;
    std::vector<ShaderDefine> defines = after_.defines();
    const std::vector<ShaderDefine> geometry = geometryDefines(x, w, out.shape);
    defines.insert(defines.end(), geometry.begin(), geometry.end());
    const auto i = [](std::uint32_t v) { return std::to_string(v); };
    if (const std::optional<DepthwiseTile> tile = depthwiseTile(x, w, out.shape)) {
      defines.insert(defines.end(), {{"TILE_HEIGHT", i(tile->height)}, {"TILE_WIDTH", i(tile->width)}, {"TILE_RUN", i(tile->run)},
                                     {"TILE_PLANES", i(tile->planes)}, {"TILE_INVOCATIONS", i(tile->invocations())}});
      if (tile->run == 4 && vec4Readable(out.view.offset, out.shape[3])) defines.push_back({"STORE_VEC4", "1"});
      const Program& program = programs.get("GroupedConv.glsl", defines, {"Pointwise.glsl", "GroupedConvGeometry.glsl"});
      const std::uint64_t tiles = std::uint64_t{(out.shape[2] + tile->height - 1) / tile->height} * ((out.shape[3] + tile->width - 1) / tile->width);
      Dispatch dispatch;
      dispatch.program = &program;
      dispatch.label = "depthwise " + name();
      dispatch.groups = {static_cast<std::uint32_t>(tiles * ((std::uint64_t{x[0]} * x[1] + tile->planes - 1) / tile->planes)), 1, 1};
      dispatch.linear = true;
      dispatch.buffers = {{0, in[0].view, Access::read}, {1, in[1].view, Access::read}, {2, in[2].view, Access::read}, {3, out.view, Access::write}};
      dispatch.uniforms = {Uniform::u32(0, x[0])};
      plan.record(dispatch);
      return;
    }
    const Program& program = programs.get("GroupedConv.glsl", defines, {"Pointwise.glsl", "GroupedConvGeometry.glsl"});
    Dispatch dispatch = linearDispatch(program, name(), elementCount(out.shape));
    dispatch.buffers = {{0, in[0].view, Access::read}, {1, in[1].view, Access::read}, {2, in[2].view, Access::read}, {3, out.view, Access::write}};
    dispatch.uniforms = {Uniform::u32(0, x[0])};
    plan.record(dispatch);
  }
  void backward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out, const GpuTensor& dOut,
                const std::vector<std::optional<GradientTarget>>& targets) const override {
    GLNET_ASSERT(differentiable(), "a convolution with a fused function runs in forward-only graphs");
    const Shape& x = in[0].shape;
    const Shape& w = in[1].shape;
    const std::vector<ShaderDefine> geometry = geometryDefines(x, w, out.shape);
    // Each gradient and the input it is of: x, w, b.
    const std::pair<GroupedConvGradient, std::size_t> gradients[] = {
        {GroupedConvGradient::inputGradient, 0}, {GroupedConvGradient::weightGradient, 1}, {GroupedConvGradient::biasGradient, 2}};
    for (const auto& [gradient, input] : gradients) {
      const std::optional<GradientTarget>& target = targets[input];
      if (!target) continue;
      std::vector<ShaderDefine> defines = geometry;
      defines.push_back(kindDefine(gradient));
      const Program& program = programs.get("GroupedConvGradient.glsl", defines, {"GroupedConvGeometry.glsl"});
      Dispatch dispatch;
      if (gradient == GroupedConvGradient::inputGradient) {
        dispatch = linearDispatch(program, name() + kindName(gradient), elementCount(x));
      } else {
        dispatch.program = &program;
        dispatch.label = name() + kindName(gradient);
        dispatch.groups = {static_cast<std::uint32_t>(gradient == GroupedConvGradient::weightGradient ? elementCount(w) : w[0]), 1, 1};
        dispatch.linear = true;
      }
      dispatch.buffers = {{0, in[0].view, Access::read}, {1, in[1].view, Access::read}, {2, dOut.view, Access::read},
                          {3, target->view, target->accumulate ? Access::readWrite : Access::write}};
      dispatch.uniforms = {Uniform::u32(0, x[0]), Uniform::u32(1, target->accumulate ? 1 : 0)};
      plan.record(dispatch);
    }
  }
  std::vector<std::vector<double>> referenceBackward(const std::vector<HostTensor64>& in, const std::vector<double>&,
                                                     const std::vector<double>& dy) const override {
    GLNET_ASSERT(differentiable(), "a convolution with a fused function runs in forward-only graphs");
    std::vector<std::vector<double>> grads{std::vector<double>(in[0].values->size(), 0.0), std::vector<double>(in[1].values->size(), 0.0),
                                           std::vector<double>(in[1].shape[0], 0.0)};
    forTaps(in, [&](std::size_t output, std::uint32_t channel) { grads[2][channel] += dy[output]; },
            [&](std::size_t output, std::size_t xIndex, std::size_t wIndex) {
              grads[0][xIndex] += dy[output] * (*in[1].values)[wIndex];
              grads[1][wIndex] += dy[output] * (*in[0].values)[xIndex];
            },
            [](std::size_t) {});
    return grads;
  }
  // The layer's geometry, compiled into GroupedConv.glsl and GroupedConvGradient.glsl.
  std::vector<ShaderDefine> geometryDefines(const Shape& x, const Shape& w, const Shape& out) const {
    const auto u = [](std::uint32_t v) { return std::to_string(v) + "u"; };
    const auto i = [](std::uint32_t v) { return std::to_string(v); };
    return {{"CONV_CHANNELS", u(x[1])}, {"CONV_HEIGHT", u(x[2])}, {"CONV_WIDTH", u(x[3])},
            {"CONV_OUT_CHANNELS", u(w[0])}, {"CONV_OUT_HEIGHT", u(out[2])}, {"CONV_OUT_WIDTH", u(out[3])},
            {"CONV_KERNEL_HEIGHT", u(w[2])}, {"CONV_KERNEL_WIDTH", u(w[3])}, {"CONV_GROUPS", u(s_.groups)},
            {"CONV_STRIDE_H", i(s_.strides[0])}, {"CONV_STRIDE_W", i(s_.strides[1])},
            {"CONV_DILATION_H", i(s_.dilations[0])}, {"CONV_DILATION_W", i(s_.dilations[1])},
            {"CONV_PAD_TOP", i(s_.pads[0])}, {"CONV_PAD_LEFT", i(s_.pads[1])}};
  }
  // A depthwise convolution (one input and one output channel per group) of stride 1 runs GroupedConv.glsl's tiled kernel
  // with tiles of this height and width: as wide as the output up to 32, as tall as a group of GLNET_GROUP_SIZE
  // allows, and only where the tile's input window fits the device's shared memory. Measured on the H100 at batch
  // 64 (mobilenet_v2): stride 1 gains 11-20 % per layer (0.247 -> 0.219 ms at 56x56x144), stride 2 loses 45 %
  // (0.194 -> 0.282 ms at 112x112x96 -> 56x56), so strided ones stay with GroupedConv.glsl.
  // Each invocation computes a run of 4 outputs where the layer has at least 2^20 of them: on the H100 at batch 64,
  // 56x56x144 0.219 -> 0.137 ms, 14x14x672 0.118 -> 0.068; at batch 1 (up to 0.45 million outputs, latency-bound) each
  // layer 0.001 ms slower. A tile of a small plane then takes several planes, so that a group still has 64
  // invocations: 7x7 planes in groups of 16 were slower (0.057 -> 0.068 ms at 7x7x1152; bench/NOTES-conv.md).
  struct DepthwiseTile {
    std::uint32_t height, width, run, planes;
    std::uint32_t invocations() const { return planes * height * width / run; }
  };
  std::optional<DepthwiseTile> depthwiseTile(const Shape& x, const Shape& w, const Shape& out) const {
    if (s_.groups != x[1] || w[0] != x[1] || s_.strides != std::array<std::uint32_t, 2>{1, 1}) return std::nullopt;
    const auto group = static_cast<std::uint32_t>(currentLimits().groupSize());
    DepthwiseTile tile{1, 8, elementCount(out) >= (1u << 20) ? 4u : 1u, 1};
    while (tile.width < 32 && tile.width < out[3]) tile.width *= 2;
    while (tile.invocations() < group && tile.height < out[2]) tile.height *= 2;
    while (tile.invocations() < std::min(group, 64u)) tile.planes *= 2;
    const std::uint64_t windowHeight = tile.height + std::uint64_t{w[2] - 1} * s_.dilations[0];
    const std::uint64_t windowWidth = tile.width + std::uint64_t{w[3] - 1} * s_.dilations[1];
    if (tile.invocations() > group ||
        tile.planes * windowHeight * windowWidth * sizeof(float) > static_cast<std::uint64_t>(currentLimits().maxSharedMemoryBytes)) {
      return std::nullopt;
    }
    return tile;
  }
  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override {
    std::vector<double> y;
    double sum = 0;
    forTaps(in, [&](std::size_t, std::uint32_t channel) { sum = (*in[2].values)[channel]; },
            [&](std::size_t, std::size_t xIndex, std::size_t wIndex) { sum += (*in[0].values)[xIndex] * (*in[1].values)[wIndex]; },
            [&](std::size_t) { y.push_back(after_(sum)); });
    return y;
  }
  // For every output element in order: begin(output index, its channel), then tap(output index, x index, w index) for each
  // product of its sum inside the image, then end(output index).
  template <class Begin, class Tap, class End>
  void forTaps(const std::vector<HostTensor64>& in, Begin begin, Tap tap, End end) const {
    const Shape& x = in[0].shape;
    const Shape& w = in[1].shape;
    const std::uint32_t groupIn = x[1] / s_.groups, groupOut = w[0] / s_.groups;
    std::size_t index = 0;
    forEachCoordinate(outputShape(shapesOf(in)), [&](const std::vector<std::uint32_t>& c) {
      begin(index, c[1]);
      for (std::uint32_t ic = 0; ic < groupIn; ++ic) {
        const std::uint32_t channel = c[1] / groupOut * groupIn + ic;
        for (std::uint32_t kh = 0; kh < w[2]; ++kh) {
          for (std::uint32_t kw = 0; kw < w[3]; ++kw) {
            const std::int64_t ih = std::int64_t{c[2]} * s_.strides[0] - s_.pads[0] + std::int64_t{kh} * s_.dilations[0];
            const std::int64_t iw = std::int64_t{c[3]} * s_.strides[1] - s_.pads[1] + std::int64_t{kw} * s_.dilations[1];
            if (ih < 0 || iw < 0 || ih >= x[2] || iw >= x[3]) continue;
            tap(index, ((std::size_t{c[0]} * x[1] + channel) * x[2] + static_cast<std::size_t>(ih)) * x[3] + static_cast<std::size_t>(iw),
                ((std::size_t{c[1]} * groupIn + ic) * w[2] + kh) * w[3] + kw);
          }
        }
      }
      end(index++);
    });
  }

 private:
  ConvSettings s_;
  Pointwise after_;
};

}  // namespace
}  // namespace inference

std::shared_ptr<const Op> poolOp(PoolSettings settings) { return std::make_shared<inference::PoolOp>(settings); }
std::shared_ptr<const Op> groupedConvOp(ConvSettings settings, Pointwise after) { return std::make_shared<inference::GroupedConvOp>(settings, after); }

}  // namespace glnet
