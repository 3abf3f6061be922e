#include "ops/Softmax.h"

namespace glnet {
namespace {
Dispatch rowwise(const Program& program, const char* label, const Buffer& in, const Buffer& out, std::uint32_t rows,
                 std::uint32_t columns, const Uniform& firstRow) {
  Dispatch dispatch;
  dispatch.program = &program;
  dispatch.label = label;
  dispatch.buffers = {{0, &in, Access::read}, {1, &out, Access::write}};
  dispatch.uniforms = {Uniform::u32(0, rows), Uniform::u32(1, columns), firstRow};
  dispatch.groups = {(rows + program.localSize()[0] - 1) / program.localSize()[0], 1, 1};
  dispatch.linear = true;
  return dispatch;
}
}  // namespace

SoftmaxOp::SoftmaxOp()
    : softmax_(Program::compute("Softmax.glsl", {{"SOFTMAX_MODE", "0"}, {"LOCAL_SIZE_X", "64"}})),
      argmax_(Program::compute("Softmax.glsl", {{"SOFTMAX_MODE", "1"}, {"LOCAL_SIZE_X", "64"}})) {}

Dispatch SoftmaxOp::softmax(const Buffer& logits, const Buffer& probabilities, std::uint32_t rows,
                            std::uint32_t columns) const {
  return rowwise(softmax_, "softmax", logits, probabilities, rows, columns, Uniform::u32(firstRowLocation, 0));
}

Dispatch SoftmaxOp::argmax(const Buffer& logits, const Buffer& classes, std::uint32_t rows, std::uint32_t columns,
                           const Uniform& firstRow) const {
  return rowwise(argmax_, "argmax", logits, classes, rows, columns, firstRow);
}

}  // namespace glnet
