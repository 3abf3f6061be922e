#include "ops/Dense.h"

#include "base/check.h"
#include "numbers/ShaderModes.h"

namespace glnet {
namespace {

constexpr std::uint32_t biasGradientColumns = 16;  // one group's strip in BackwardPass.glsl's BACKWARD_MODE_BIAS_GRADIENT

// y: the forward output (for act'), null where binding 0 holds dZᵀ already.
Dispatch gradient(const Program& program, const std::string& label, const BufferView& dy, const BufferView* y,
                  const BufferView* operand, const BufferView& out, const DenseShape& shape, bool accumulate,
                  std::array<std::uint32_t, 3> groups) {
  Dispatch dispatch;
  dispatch.program = &program;
  dispatch.label = label;
  dispatch.buffers = {{0, dy, Access::read}};
  if (y) dispatch.buffers.push_back({1, *y, Access::read});
  if (operand) dispatch.buffers.push_back({2, *operand, Access::read});
  dispatch.buffers.push_back({3, out, accumulate ? Access::readWrite : Access::write});
  dispatch.uniforms = {Uniform::u32(0, shape.rows), Uniform::u32(1, shape.outputs), Uniform::u32(2, shape.inputs),
                       Uniform::u32(3, accumulate ? 1u : 0u)};
  dispatch.groups = groups;
  return dispatch;
}

// DenseOp::transposesOperands: from 512 rows, inputs and outputs and 2^31 multiply-adds. On the H100 the
// transposes of 1024×4096×4096 took 0.10 ms and saved 0.47 on its GEMM, but made 1024³ slower (0.085 -> 0.105 ms).
constexpr std::uint32_t transposeFrom = 512;
constexpr std::uint64_t transposeFromMultiplyAdds = std::uint64_t{1} << 31;
constexpr std::uint64_t transposeGroupLimit = 65535;  // Transpose.glsl's groups along x and y: the GL minimum
constexpr std::uint32_t outputGradientTransposeFromInputs = 1024;  // DenseOp::transposesOutputGradient

// Bytes of a rows × columns float matrix, rounded up to 256 (the largest storage buffer offset alignment GL allows)
// so that another may follow.
std::size_t alignedMatrixBytes(std::uint32_t rows, std::uint32_t columns) {
  return boundableBytes(std::size_t{rows} * columns * sizeof(float));
}

// The forward GEMM from its two operands (X and W, or their transposes) into Y or, split, its partial sums.
Dispatch forwardGemm(const Program& program, std::string label, const BufferView& first, const BufferView& second,
                     const BufferView& bias, const BufferView& out, const DenseShape& shape, std::array<std::uint32_t, 3> groups) {
  Dispatch dispatch;
  dispatch.program = &program;
  dispatch.label = std::move(label);
  dispatch.buffers = {{0, first, Access::read}, {1, second, Access::read}, {2, bias, Access::read}, {3, out, Access::write}};
  dispatch.uniforms = {Uniform::u32(0, shape.rows), Uniform::u32(1, shape.outputs), Uniform::u32(2, shape.inputs)};
  dispatch.groups = groups;
  return dispatch;
}

// The defines of a program, then those of the function after it.
std::vector<ShaderDefine> withDefines(std::vector<ShaderDefine> defines, std::vector<ShaderDefine> more) {
  for (ShaderDefine& define : more) defines.push_back(std::move(define));
  return defines;
}

// The defines of the function after the forward pass and of its residual.
std::vector<ShaderDefine> forwardDefines(const Pointwise& after, bool residual) {
  return withDefines(residual ? std::vector<ShaderDefine>{{"RESIDUAL", "1"}} : std::vector<ShaderDefine>{}, after.fusedDefines());
}

// dZ = dY ⊙ act'(Y), rows of N outputs: vec4 runs when both are aligned.
bool outputGradientVec4(const BufferView& dy, const BufferView& y, const DenseShape& shape) {
  return vec4Readable(dy.offset, shape.outputs) && vec4Readable(y.offset, shape.outputs);
}

}  // namespace

DenseOp::DenseOp(ProgramCache& programs, Activation activation, bool hasBias, const Pointwise& after, bool residual)
    : programs_(&programs),
      activation_(activation),
      hasBias_(hasBias),
      after_(after),
      residual_(residual),
      forward_(programs, "ForwardPass.glsl",
               withDefines({kindDefine(activation), {"HAS_BIAS", hasBias ? "1" : "0"}}, forwardDefines(after, residual)), after.fusedIncludes()),
      forwardTransposed_(programs, "ForwardPass.glsl",
                         withDefines({kindDefine(activation), {"HAS_BIAS", hasBias ? "1" : "0"}, {"TRANSPOSED_OPERANDS", "1"},
                                      {"GEMM_A_ALONG_ROWS", "1"}, {"GEMM_B_ALONG_COLUMNS", "1"}},
                                     forwardDefines(after, residual)),
                         after.fusedIncludes()),
      transpose_(programs),
      finishForward_(programs, activation, after, residual),
      inputGradient_(programs, "BackwardPass.glsl",
                     {kindDefine(activation), kindDefine(BackwardMode::inputGradient), {"GEMM_B_ALONG_COLUMNS", "1"}}),
      inputGradientTransposed_(programs, "BackwardPass.glsl",
                               {kindDefine(Activation::none), kindDefine(BackwardMode::inputGradient), {"TRANSPOSED_OUTPUT_GRADIENT", "1"},
                                {"GEMM_A_ALONG_ROWS", "1"}, {"GEMM_B_ALONG_COLUMNS", "1"}}),
      weightGradient_(programs, "BackwardPass.glsl",
                      {kindDefine(activation), kindDefine(BackwardMode::weightGradient), {"GEMM_A_ALONG_ROWS", "1"},
                       {"GEMM_B_ALONG_COLUMNS", "1"}}),
      splitSum_(programs),
      biasGradient_(programs.get("BackwardPass.glsl", {kindDefine(activation), kindDefine(BackwardMode::biasGradient)})) {}

std::string DenseOp::functionName() const {
  return after_.kind != PointwiseKind::identity ? after_.name() : activationName(activation_);
}

bool DenseOp::transposesOperands(const DenseShape& shape) {
  return shape.rows >= transposeFrom && shape.inputs >= transposeFrom && shape.outputs >= transposeFrom &&
         std::uint64_t{shape.rows} * shape.inputs * shape.outputs >= transposeFromMultiplyAdds &&
         (std::uint64_t{shape.rows} + 31) / 32 <= transposeGroupLimit && (std::uint64_t{shape.outputs} + 31) / 32 <= transposeGroupLimit &&
         (std::uint64_t{shape.inputs} + 31) / 32 <= transposeGroupLimit;
}

std::size_t DenseOp::forwardWorkspaceBytes(const DenseShape& shape, bool hasBias) {
  if (fewRows(shape)) return 0;
  if (transposesOperands(shape)) return alignedMatrixBytes(shape.rows, shape.inputs) + std::size_t{shape.outputs} * shape.inputs * sizeof(float);
  return hasBias ? chooseGemm(shape.rows, shape.outputs, shape.inputs).split.workspaceBytes(shape.rows, shape.outputs) : 0;
}

std::vector<Dispatch> DenseOp::forward(const BufferView& x, const BufferView& weight, const BufferView& bias,
                                       const BufferView& y, const DenseShape& shape,
                                       const std::optional<BufferView>& workspace, const BufferView* residual) const {
  GLNET_ASSERT((residual != nullptr) == residual_, "a dense layer made for a residual is given one, and only that layer");
  if (fewRows(shape)) return {fewRowsForward(*programs_, activation_, hasBias_, after_, x, weight, bias, y, shape, residual)};
  if (workspace && transposesOperands(shape)) {
    GLNET_ASSERT(workspace->room() >= forwardWorkspaceBytes(shape, hasBias_),
                 "a large dense layer's forward pass needs workspace for its transposed operands");
    const BufferView xT(*workspace->buffer, workspace->offset, alignedMatrixBytes(shape.rows, shape.inputs));
    const BufferView wT(*workspace->buffer, workspace->offset + xT.bytes, std::size_t{shape.outputs} * shape.inputs * sizeof(float));
    const GemmChoice gemm = chooseGemmAlongRows(shape.rows, shape.outputs, shape.inputs);
    const Program& program =
        forwardTransposed_.get(*gemm.config, vec4Readable(xT.offset, shape.rows), vec4Readable(wT.offset, shape.outputs), false);
    Dispatch product = forwardGemm(program, "dense " + functionName() + " " + gemm.config->name + " on transposes", xT, wT, bias, y, shape, gemm.groups);
    if (residual) product.buffers.push_back({4, *residual, Access::read});
    return taggedWith(gemm, {transpose_(x, xT, shape.rows, shape.inputs, "dense X transposed"),
                             transpose_(weight, wT, shape.outputs, shape.inputs, "dense weights transposed"), product});
  }
  // The shape's key says whether the layer may split (a bias to add after the sum), whatever workspace this plan gave
  // it: a plan made under a whole-sum choice has none, and its timing must count for the same shape.
  GemmChoice gemm = chooseGemm(shape.rows, shape.outputs, shape.inputs, hasBias_);
  if (gemm.split.splits > 1 && !workspace) {
    const std::string key = gemm.tuningKey;
    gemm = gemmWith(*gemm.config, shape.rows, shape.outputs, shape.inputs, false);
    gemm.tuningKey = key;
  }
  const bool splitting = gemm.split.splits > 1;
  const Program& program =
      forward_.get(*gemm.config, vec4Readable(x.offset, shape.inputs), vec4Readable(weight.offset, shape.inputs), splitting);
  Dispatch dispatch =
      forwardGemm(program, "dense " + functionName() + " " + gemm.config->name + (splitting ? " split-K" : ""),
                  x, weight, bias, splitting ? *workspace : y, shape, gemm.groups);
  if (!splitting) {
    if (residual) dispatch.buffers.push_back({4, *residual, Access::read});
    return taggedWith(gemm, std::vector<Dispatch>{dispatch});
  }
  GLNET_ASSERT(workspace->room() >= gemm.split.workspaceBytes(shape.rows, shape.outputs),
               "a dense layer's split sum needs workspace for its partial sums");
  dispatch.uniforms.push_back(Uniform::u32(15, gemm.split.chunk));
  return taggedWith(gemm, {dispatch, finishForward_(*workspace, bias, y, shape.rows * shape.outputs, shape.outputs, gemm.split.splits, 1, residual)});
}

Dispatch DenseOp::fewRowsForward(ProgramCache& programs, Activation activation, bool hasBias, const Pointwise& after,
                                 const BufferView& x, const BufferView& weight, const BufferView& bias, const BufferView& y,
                                 const DenseShape& shape, const BufferView* residual) {
  GLNET_ASSERT(fewRows(shape), "the few-rows dense kernel takes 1 to 4 rows");
  const std::uint32_t outputsPerGroup = 8 / shape.rows;
  const bool vec4 = vec4Readable(x.offset, shape.inputs) && vec4Readable(weight.offset, shape.inputs);
  std::vector<ShaderDefine> defines{kindDefine(activation), {"HAS_BIAS", hasBias ? "1" : "0"},
                                    {"ROWS", std::to_string(shape.rows)}, {"FEW_OUTPUTS", std::to_string(outputsPerGroup)}};
  if (vec4) defines.push_back({"VEC4", "1"});
  for (ShaderDefine& define : forwardDefines(after, residual != nullptr)) defines.push_back(std::move(define));
  const Program& program = programs.get("DenseFewRows.glsl", defines, after.fusedIncludes());
  const std::string function = after.kind != PointwiseKind::identity ? after.name() : activationName(activation);
  Dispatch dispatch = forwardGemm(program, "dense " + function + " few rows", x, weight, bias, y, shape,
                                  {(shape.outputs + outputsPerGroup - 1) / outputsPerGroup, 1, 1});
  if (residual) dispatch.buffers.push_back({4, *residual, Access::read});
  dispatch.linear = true;
  return dispatch;
}

bool DenseOp::transposesOutputGradient(const DenseShape& shape) {
  return transposesOperands(shape) && shape.inputs >= outputGradientTransposeFromInputs;
}

std::size_t DenseOp::inputGradientWorkspaceBytes(const DenseShape& shape) {
  return transposesOutputGradient(shape) ? alignedMatrixBytes(shape.outputs, shape.rows) : 0;
}

Dispatch DenseOp::inputGradient(const BufferView& dy, const BufferView& y, const BufferView& weight, const BufferView& dx,
                                const DenseShape& shape, bool accumulate) const {
  const GemmChoice gemm = chooseGemm(shape.rows, shape.inputs, shape.outputs, false);
  const Program& program = inputGradient_.get(*gemm.config, outputGradientVec4(dy, y, shape),
                                              vec4Readable(weight.offset, shape.inputs), false);
  return taggedWith(gemm, gradient(program, std::string("dense dX ") + gemm.config->name, dy, &y, &weight, dx, shape, accumulate, gemm.groups));
}

Dispatch DenseOp::preActivationGradient(const BufferView& dy, const BufferView& y, const BufferView& dzT,
                                        const DenseShape& shape) const {
  GLNET_ASSERT(dzT.room() >= std::size_t{shape.outputs} * shape.rows * sizeof(float), "dZᵀ needs room for rows × outputs floats");
  return transpose_.preActivationGradient(dy, y, dzT, shape.rows, shape.outputs, activation_,
                                          activation_ == Activation::none ? "dense dZ transposed" : "dense dZ in place and transposed");
}

Dispatch DenseOp::inputGradientOnTransposed(const BufferView& dzT, const BufferView& weight, const BufferView& dx,
                                            const DenseShape& shape, bool accumulate) const {
  const GemmChoice gemm = chooseGemm(shape.rows, shape.inputs, shape.outputs, false);
  const Program& program = inputGradientTransposed_.get(*gemm.config, vec4Readable(dzT.offset, shape.rows),
                                                        vec4Readable(weight.offset, shape.inputs), false);
  return taggedWith(gemm, gradient(program, std::string("dense dX ") + gemm.config->name + " on dZ transposed", dzT, nullptr,
                                   &weight, dx, shape, accumulate, gemm.groups));
}

std::vector<Dispatch> DenseOp::weightGradient(const BufferView& dy, const BufferView& y, const BufferView& x,
                                              const BufferView& dw, const DenseShape& shape, bool accumulate,
                                              const std::optional<BufferView>& workspace) const {
  const GemmChoice gemm = chooseGemm(shape.outputs, shape.inputs, shape.rows, workspace.has_value());
  const bool splitting = gemm.split.splits > 1;
  const Program& program = weightGradient_.get(*gemm.config, outputGradientVec4(dy, y, shape),
                                               vec4Readable(x.offset, shape.inputs), splitting);
  const std::string label = std::string("dense dW ") + gemm.config->name;
  if (!splitting) return taggedWith(gemm, std::vector<Dispatch>{gradient(program, label, dy, &y, &x, dw, shape, accumulate, gemm.groups)});
  GLNET_ASSERT(workspace->room() >= gemm.split.workspaceBytes(shape.outputs, shape.inputs),
               "a dense layer's split weight gradient needs workspace for its partial sums");
  Dispatch partial = gradient(program, label + " split-K", dy, &y, &x, *workspace, shape, false, gemm.groups);
  partial.uniforms.push_back(Uniform::u32(15, gemm.split.chunk));
  return taggedWith(gemm, {partial, splitSum_(*workspace, dw, shape.outputs * shape.inputs, gemm.split.splits, accumulate)});
}

Dispatch DenseOp::biasGradient(const BufferView& dy, const BufferView& y, const BufferView& db, const DenseShape& shape,
                               bool accumulate) const {
  return gradient(biasGradient_, "dense db", dy, &y, nullptr, db, shape, accumulate, {(shape.outputs + biasGradientColumns - 1) / biasGradientColumns, 1, 1});
}

}  // namespace glnet
