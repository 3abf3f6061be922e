#include "ops/Transpose.h"

namespace glnet {

namespace {
constexpr std::uint32_t tileSide = 32;  // Transpose.glsl's tile

Dispatch transposeDispatch(const Program& program, const BufferView& source, const BufferView& target, std::uint32_t rows,
                           std::uint32_t columns, std::string label) {
  Dispatch d;
  d.program = &program;
  d.label = std::move(label);
  d.buffers = {{0, source, Access::read}, {3, target, Access::write}};
  d.uniforms = {Uniform::u32(0, rows), Uniform::u32(1, columns)};
  d.groups = {(columns + tileSide - 1) / tileSide, (rows + tileSide - 1) / tileSide, 1};
  return d;
}
}  // namespace

TransposeOp::TransposeOp(ProgramCache& programs) : programs_(&programs), plain_(programs.get("Transpose.glsl")) {}

Dispatch TransposeOp::operator()(const BufferView& source, const BufferView& target, std::uint32_t rows,
                                 std::uint32_t columns, std::string label) const {
  return transposeDispatch(plain_, source, target, rows, columns, std::move(label));
}

Dispatch TransposeOp::preActivationGradient(const BufferView& dy, const BufferView& y, const BufferView& target,
                                            std::uint32_t rows, std::uint32_t columns, Activation activation,
                                            std::string label) const {
  if (activation == Activation::none) return (*this)(dy, target, rows, columns, std::move(label));
  const Program& program =
      programs_->get("Transpose.glsl", {kindDefine(activation)});
  Dispatch d = transposeDispatch(program, dy, target, rows, columns, std::move(label));
  d.buffers = {{0, dy, Access::readWrite}, {1, y, Access::read}, {3, target, Access::write}};
  return d;
}

}  // namespace glnet
