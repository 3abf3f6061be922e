#include "ops/Dense.h"

namespace glnet {
namespace {

constexpr std::uint32_t tile = 64;  // GEMM_TILE in Gemm.glsl

std::uint32_t tiles(std::uint32_t size) { return (size + tile - 1) / tile; }

ShaderDefine activationDefine(Activation activation) {
  return {"ACTIVATION", std::to_string(static_cast<int>(activation))};
}

Dispatch gradient(const Program& program, const char* label, const BufferView& dy, const BufferView& y,
                  const BufferView* operand, const BufferView& out, const DenseShape& shape, bool accumulate,
                  std::array<std::uint32_t, 3> groups) {
  Dispatch dispatch;
  dispatch.program = &program;
  dispatch.label = label;
  dispatch.buffers = {{0, dy, Access::read}, {1, y, Access::read}};
  if (operand) dispatch.buffers.push_back({2, *operand, Access::read});
  dispatch.buffers.push_back({3, out, accumulate ? Access::readWrite : Access::write});
  dispatch.uniforms = {Uniform::u32(0, shape.rows), Uniform::u32(1, shape.outputs), Uniform::u32(2, shape.inputs),
                       Uniform::u32(3, accumulate ? 1u : 0u)};
  dispatch.groups = groups;
  return dispatch;
}

}  // namespace

DenseOp::DenseOp(ProgramCache& programs, Activation activation, bool hasBias)
    : activation_(activation),
      hasBias_(hasBias),
      forward_(programs.get("ForwardPass.glsl", {activationDefine(activation), {"HAS_BIAS", hasBias ? "1" : "0"}},
                            {"Gemm.glsl"})),
      forwardSplit_(programs.get("ForwardPass.glsl", {activationDefine(activation), {"HAS_BIAS", "0"}, {"SPLIT_K", "1"}},
                                 {"Gemm.glsl"})),
      finishForward_(programs, static_cast<int>(activation)),
      inputGradient_(programs.get("BackwardPass.glsl",
                                  {activationDefine(activation), {"BACKWARD_MODE", "0"}, {"GEMM_B_ALONG_COLUMNS", "1"}},
                                  {"Gemm.glsl"})),
      weightGradient_(programs.get("BackwardPass.glsl",
                                   {activationDefine(activation), {"BACKWARD_MODE", "1"}, {"GEMM_A_ALONG_ROWS", "1"},
                                    {"GEMM_B_ALONG_COLUMNS", "1"}},
                                   {"Gemm.glsl"})),
      weightGradientSplit_(programs.get("BackwardPass.glsl",
                                        {activationDefine(activation), {"BACKWARD_MODE", "1"}, {"GEMM_A_ALONG_ROWS", "1"},
                                         {"GEMM_B_ALONG_COLUMNS", "1"}, {"SPLIT_K", "1"}},
                                        {"Gemm.glsl"})),
      splitSum_(programs),
      biasGradient_(programs.get("BackwardPass.glsl", {activationDefine(activation), {"BACKWARD_MODE", "2"}})) {}

std::vector<Dispatch> DenseOp::forward(const BufferView& x, const BufferView& weight, const BufferView& bias,
                                       const BufferView& y, const DenseShape& shape,
                                       const std::optional<BufferView>& workspace) const {
  const SplitK split = forwardSplit(shape);
  const bool splitting = split.splits > 1 && workspace && hasBias_;
  Dispatch dispatch;
  dispatch.program = splitting ? &forwardSplit_ : &forward_;
  dispatch.label = std::string("dense ") + activationName(activation_) + (splitting ? " split-K" : "");
  dispatch.buffers = {{0, x, Access::read}, {1, weight, Access::read}, {2, bias, Access::read},
                      {3, splitting ? *workspace : y, Access::write}};
  dispatch.uniforms = {Uniform::u32(0, shape.rows), Uniform::u32(1, shape.outputs), Uniform::u32(2, shape.inputs)};
  dispatch.groups = {tiles(shape.rows), tiles(shape.outputs), splitting ? split.splits : 1};
  if (!splitting) return {dispatch};
  dispatch.uniforms.push_back(Uniform::u32(15, split.chunk));
  return {dispatch, finishForward_(*workspace, bias, y, shape.rows * shape.outputs, shape.outputs, split.splits)};
}

Dispatch DenseOp::inputGradient(const BufferView& dy, const BufferView& y, const BufferView& weight, const BufferView& dx,
                                const DenseShape& shape, bool accumulate) const {
  return gradient(inputGradient_, "dense dX", dy, y, &weight, dx, shape, accumulate,
                  {tiles(shape.rows), tiles(shape.inputs), 1});
}

std::vector<Dispatch> DenseOp::weightGradient(const BufferView& dy, const BufferView& y, const BufferView& x,
                                              const BufferView& dw, const DenseShape& shape, bool accumulate,
                                              const std::optional<BufferView>& workspace) const {
  const SplitK split = weightGradientSplit(shape);
  if (split.splits == 1 || !workspace) {
    return {gradient(weightGradient_, "dense dW", dy, y, &x, dw, shape, accumulate, {tiles(shape.outputs), tiles(shape.inputs), 1})};
  }
  Dispatch partial = gradient(weightGradientSplit_, "dense dW split-K", dy, y, &x, *workspace, shape, false,
                              {tiles(shape.outputs), tiles(shape.inputs), split.splits});
  partial.uniforms.push_back(Uniform::u32(15, split.chunk));
  return {partial, splitSum_(*workspace, dw, shape.outputs * shape.inputs, split.splits, accumulate)};
}

Dispatch DenseOp::biasGradient(const BufferView& dy, const BufferView& y, const BufferView& db, const DenseShape& shape,
                               bool accumulate) const {
  return gradient(biasGradient_, "dense db", dy, y, nullptr, db, shape, accumulate, {tiles(shape.outputs), 1, 1});
}

}  // namespace glnet
