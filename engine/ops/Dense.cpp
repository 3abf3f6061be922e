#include "ops/Dense.h"

namespace glnet {
namespace {

constexpr std::uint32_t biasGradientColumns = 64;  // one group's strip in BackwardPass.glsl, mode 2

ShaderDefine activationDefine(Activation activation) {
  return {"ACTIVATION", std::to_string(static_cast<int>(activation))};
}

Dispatch gradient(const Program& program, const std::string& label, const BufferView& dy, const BufferView& y,
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

// dZ = dY ⊙ act'(Y), rows of N outputs: vec4 runs when both are aligned.
bool outputGradientVec4(const BufferView& dy, const BufferView& y, const DenseShape& shape) {
  return vec4Readable(dy.offset, shape.outputs) && vec4Readable(y.offset, shape.outputs);
}

}  // namespace

DenseOp::DenseOp(ProgramCache& programs, Activation activation, bool hasBias)
    : activation_(activation),
      hasBias_(hasBias),
      forward_(programs, "ForwardPass.glsl", {activationDefine(activation), {"HAS_BIAS", hasBias ? "1" : "0"}}),
      finishForward_(programs, static_cast<int>(activation)),
      inputGradient_(programs, "BackwardPass.glsl",
                     {activationDefine(activation), {"BACKWARD_MODE", "0"}, {"GEMM_B_ALONG_COLUMNS", "1"}}),
      weightGradient_(programs, "BackwardPass.glsl",
                      {activationDefine(activation), {"BACKWARD_MODE", "1"}, {"GEMM_A_ALONG_ROWS", "1"},
                       {"GEMM_B_ALONG_COLUMNS", "1"}}),
      splitSum_(programs),
      biasGradient_(programs.get("BackwardPass.glsl", {activationDefine(activation), {"BACKWARD_MODE", "2"}})) {}

std::vector<Dispatch> DenseOp::forward(const BufferView& x, const BufferView& weight, const BufferView& bias,
                                       const BufferView& y, const DenseShape& shape,
                                       const std::optional<BufferView>& workspace) const {
  const GemmChoice gemm = chooseGemm(shape.rows, shape.outputs, shape.inputs, workspace && hasBias_);
  const bool splitting = gemm.split.splits > 1;
  Dispatch dispatch;
  dispatch.program = &forward_.get(*gemm.config, vec4Readable(x.offset, shape.inputs), vec4Readable(weight.offset, shape.inputs),
                                   splitting);
  dispatch.label = std::string("dense ") + activationName(activation_) + " " + gemm.config->name + (splitting ? " split-K" : "");
  dispatch.buffers = {{0, x, Access::read}, {1, weight, Access::read}, {2, bias, Access::read},
                      {3, splitting ? *workspace : y, Access::write}};
  dispatch.uniforms = {Uniform::u32(0, shape.rows), Uniform::u32(1, shape.outputs), Uniform::u32(2, shape.inputs)};
  dispatch.groups = gemm.groups;
  if (!splitting) return {dispatch};
  dispatch.uniforms.push_back(Uniform::u32(15, gemm.split.chunk));
  return {dispatch, finishForward_(*workspace, bias, y, shape.rows * shape.outputs, shape.outputs, gemm.split.splits)};
}

Dispatch DenseOp::inputGradient(const BufferView& dy, const BufferView& y, const BufferView& weight, const BufferView& dx,
                                const DenseShape& shape, bool accumulate) const {
  const GemmChoice gemm = chooseGemm(shape.rows, shape.inputs, shape.outputs, false);
  const Program& program = inputGradient_.get(*gemm.config, outputGradientVec4(dy, y, shape),
                                              vec4Readable(weight.offset, shape.inputs), false);
  return gradient(program, std::string("dense dX ") + gemm.config->name, dy, y, &weight, dx, shape, accumulate, gemm.groups);
}

std::vector<Dispatch> DenseOp::weightGradient(const BufferView& dy, const BufferView& y, const BufferView& x,
                                              const BufferView& dw, const DenseShape& shape, bool accumulate,
                                              const std::optional<BufferView>& workspace) const {
  const GemmChoice gemm = chooseGemm(shape.outputs, shape.inputs, shape.rows, workspace.has_value());
  const bool splitting = gemm.split.splits > 1;
  const Program& program = weightGradient_.get(*gemm.config, outputGradientVec4(dy, y, shape),
                                               vec4Readable(x.offset, shape.inputs), splitting);
  const std::string label = std::string("dense dW ") + gemm.config->name;
  if (!splitting) return {gradient(program, label, dy, y, &x, dw, shape, accumulate, gemm.groups)};
  Dispatch partial = gradient(program, label + " split-K", dy, y, &x, *workspace, shape, false, gemm.groups);
  partial.uniforms.push_back(Uniform::u32(15, gemm.split.chunk));
  return {partial, splitSum_(*workspace, dw, shape.outputs * shape.inputs, gemm.split.splits, accumulate)};
}

Dispatch DenseOp::biasGradient(const BufferView& dy, const BufferView& y, const BufferView& db, const DenseShape& shape,
                               bool accumulate) const {
  return gradient(biasGradient_, "dense db", dy, y, nullptr, db, shape, accumulate, {(shape.outputs + biasGradientColumns - 1) / biasGradientColumns, 1, 1});
}

}  // namespace glnet
