#include "ops/Transpose.h"

namespace glnet {

namespace {
constexpr std::uint32_t tileSide = 32;  // Transpose.glsl's tile
}

TransposeOp::TransposeOp(ProgramCache& programs) : program_(programs.get("Transpose.glsl")) {}

Dispatch TransposeOp::operator()(const BufferView& source, const BufferView& target, std::uint32_t rows,
                                 std::uint32_t columns, std::string label) const {
  Dispatch d;
  d.program = &program_;
  d.label = std::move(label);
  d.buffers = {{0, source, Access::read}, {3, target, Access::write}};
  d.uniforms = {Uniform::u32(0, rows), Uniform::u32(1, columns)};
  d.groups = {(columns + tileSide - 1) / tileSide, (rows + tileSide - 1) / tileSide, 1};
  return d;
}

}  // namespace glnet
