#include "ops/Conv.h"

#include "ops/Groups.h"

namespace glnet {
namespace {

constexpr std::uint32_t tile = 64;  // GEMM_TILE in Gemm.glsl
std::uint32_t tiles(std::uint64_t size) { return static_cast<std::uint32_t>((size + tile - 1) / tile); }

const Program& convProgram(ProgramCache& programs, Activation activation, int mode, std::vector<ShaderDefine> layout) {
  layout.push_back({"CONV_MODE", std::to_string(mode)});
  layout.push_back({"ACTIVATION", std::to_string(static_cast<int>(activation))});
  return programs.get("Conv2D.glsl", layout, mode <= 2 ? std::vector<std::string>{"Gemm.glsl"} : std::vector<std::string>{});
}

}  // namespace

ConvOp::ConvOp(ProgramCache& programs, Activation activation)
    : activation_(activation),
      forward_(convProgram(programs, activation, 0, {{"GEMM_A_ALONG_ROWS", "1"}})),
      inputGradient_(convProgram(programs, activation, 1, {{"GEMM_A_ALONG_ROWS", "1"}})),
      weightGradient_(convProgram(programs, activation, 2, {})),
      weightGradientSplit_(convProgram(programs, activation, 2, {{"SPLIT_K", "1"}})),
      splitSum_(programs),
      biasGradient_(convProgram(programs, activation, 3, {})) {}

Dispatch ConvOp::dispatch(const Program& program, const char* label, std::vector<StorageBinding> buffers,
                          const ConvShape& s, bool accumulate, std::array<std::uint32_t, 3> groups) const {
  Dispatch d;
  d.program = &program;
  d.label = std::string(label) + " " + activationName(activation_);
  d.buffers = std::move(buffers);
  d.uniforms = {Uniform::u32(0, s.batch),       Uniform::u32(1, s.channels),     Uniform::u32(2, s.height),
                Uniform::u32(3, s.width),       Uniform::u32(4, s.outChannels),  Uniform::u32(5, s.kernelHeight),
                Uniform::u32(6, s.kernelWidth), Uniform::i32(7, static_cast<std::int32_t>(s.padding)),
                Uniform::u32(8, s.outHeight()), Uniform::u32(9, s.outWidth()),  Uniform::u32(10, accumulate ? 1u : 0u)};
  d.groups = groups;
  return d;
}

Dispatch ConvOp::forward(const BufferView& x, const BufferView& weight, const BufferView& bias, const BufferView& y,
                         const ConvShape& s) const {
  const std::uint64_t rows = std::uint64_t{s.batch} * s.outHeight() * s.outWidth();
  return dispatch(forward_, "conv", {{0, x, Access::read}, {1, weight, Access::read}, {2, bias, Access::read}, {3, y, Access::write}},
                  s, false, {tiles(rows), tiles(s.outChannels), 1});
}

Dispatch ConvOp::inputGradient(const BufferView& dy, const BufferView& y, const BufferView& weight, const BufferView& dx,
                               const ConvShape& s, bool accumulate) const {
  const std::uint64_t rows = std::uint64_t{s.batch} * s.height * s.width;
  return dispatch(inputGradient_, "conv dX",
                  {{0, dy, Access::read}, {1, y, Access::read}, {2, weight, Access::read},
                   {3, dx, accumulate ? Access::readWrite : Access::write}},
                  s, accumulate, {tiles(rows), tiles(s.channels), 1});
}

std::vector<Dispatch> ConvOp::weightGradient(const BufferView& dy, const BufferView& y, const BufferView& x,
                                             const BufferView& dw, const ConvShape& s, bool accumulate,
                                             const std::optional<BufferView>& workspace) const {
  const std::uint64_t columns = std::uint64_t{s.channels} * s.kernelHeight * s.kernelWidth;
  const SplitK split = weightGradientSplit(s);
  if (split.splits == 1 || !workspace) {
    return {dispatch(weightGradient_, "conv dW",
                     {{0, dy, Access::read}, {1, y, Access::read}, {2, x, Access::read},
                      {3, dw, accumulate ? Access::readWrite : Access::write}},
                     s, accumulate, {tiles(s.outChannels), tiles(columns), 1})};
  }
  Dispatch partial = dispatch(weightGradientSplit_, "conv dW split-K",
                              {{0, dy, Access::read}, {1, y, Access::read}, {2, x, Access::read}, {3, *workspace, Access::write}},
                              s, false, {tiles(s.outChannels), tiles(columns), split.splits});
  partial.uniforms.push_back(Uniform::u32(15, split.chunk));
  return {partial, splitSum_(*workspace, dw, static_cast<std::uint32_t>(s.outChannels * columns), split.splits, accumulate)};
}

Dispatch ConvOp::biasGradient(const BufferView& dy, const BufferView& y, const BufferView& db, const ConvShape& s,
                              bool accumulate) const {
  return dispatch(biasGradient_, "conv db",
                  {{0, dy, Access::read}, {1, y, Access::read}, {2, dy, Access::read},
                   {3, db, accumulate ? Access::readWrite : Access::write}},
                  s, accumulate, {s.outChannels, 1, 1});
}

MaxPoolOp::MaxPoolOp(ProgramCache& programs)
    : forward_(programs.get("MaxPool.glsl", {{"POOL_MODE", "0"}})), backward_(programs.get("MaxPool.glsl", {{"POOL_MODE", "1"}})) {}

Dispatch MaxPoolOp::forward(const BufferView& x, const BufferView& y, const BufferView& argmax, std::uint32_t planes,
                            std::uint32_t height, std::uint32_t width) const {
  Dispatch d;
  d.program = &forward_;
  d.label = "max pool";
  d.buffers = {{0, x, Access::read}, {1, y, Access::write}, {2, argmax, Access::write}};
  d.uniforms = {Uniform::u32(0, planes), Uniform::u32(1, height), Uniform::u32(2, width), Uniform::u32(3, height / 2),
                Uniform::u32(4, width / 2), Uniform::u32(5, 0)};
  d.groups = linearGroups(std::uint64_t{planes} * (height / 2) * (width / 2), forward_);
  d.linear = true;
  return d;
}

Dispatch MaxPoolOp::backward(const BufferView& dy, const BufferView& argmax, const BufferView& dx, std::uint32_t planes,
                             std::uint32_t height, std::uint32_t width, bool accumulate) const {
  Dispatch d;
  d.program = &backward_;
  d.label = "max pool gradient";
  d.buffers = {{0, dy, Access::read}, {2, argmax, Access::read}, {3, dx, accumulate ? Access::readWrite : Access::write}};
  d.uniforms = {Uniform::u32(0, planes), Uniform::u32(1, height), Uniform::u32(2, width), Uniform::u32(3, height / 2),
                Uniform::u32(4, width / 2), Uniform::u32(5, accumulate ? 1u : 0u)};
  d.groups = linearGroups(std::uint64_t{planes} * height * width, backward_);
  d.linear = true;
  return d;
}

}  // namespace glnet
