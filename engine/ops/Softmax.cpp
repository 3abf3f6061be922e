#include "ops/Softmax.h"

#include "numbers/ShaderModes.h"
#include "plan/Groups.h"

namespace glnet {
namespace {
const Program& mode(ProgramCache& programs, SoftmaxMode value) {
  return programs.get("Softmax.glsl", {kindDefine(value), {"LOCAL_SIZE_X", "64"}});
}
}  // namespace

SoftmaxOp::SoftmaxOp(ProgramCache& programs)
    : softmax_(mode(programs, SoftmaxMode::softmax)),
      argmax_(mode(programs, SoftmaxMode::argmax)),
      crossEntropy_(mode(programs, SoftmaxMode::crossEntropy)),
      crossEntropyGradient_(mode(programs, SoftmaxMode::crossEntropyGradient)),
      correct_(mode(programs, SoftmaxMode::correct)) {}

Dispatch SoftmaxOp::rowwise(const Program& program, const char* label, std::vector<StorageBinding> buffers,
                            std::uint32_t rows, std::uint32_t columns, const Uniform& firstRow, bool accumulate) const {
  Dispatch dispatch;
  dispatch.program = &program;
  dispatch.label = label;
  dispatch.buffers = std::move(buffers);
  dispatch.uniforms = {Uniform::u32(0, rows), Uniform::u32(1, columns), firstRow, Uniform::u32(3, accumulate ? 1u : 0u)};
  dispatch.invocations = rows;
  dispatch.linear = true;
  return dispatch;
}

Dispatch SoftmaxOp::softmax(const BufferView& logits, const BufferView& probabilities, std::uint32_t rows,
                            std::uint32_t columns) const {
  return rowwise(softmax_, "softmax", {{0, logits, Access::read}, {1, probabilities, Access::write}}, rows, columns,
                 Uniform::u32(firstRowLocation, 0), false);
}

Dispatch SoftmaxOp::argmax(const BufferView& logits, const BufferView& classes, std::uint32_t rows, std::uint32_t columns,
                           const Uniform& firstRow) const {
  return rowwise(argmax_, "argmax", {{0, logits, Access::read}, {1, classes, Access::write}}, rows, columns, firstRow, false);
}

Dispatch SoftmaxOp::crossEntropy(const BufferView& logits, const BufferView& labels, const BufferView& loss,
                                 std::uint32_t rows, std::uint32_t columns, float smoothing) const {
  Dispatch dispatch = rowwise(crossEntropy_, "cross-entropy",
                              {{0, logits, Access::read}, {1, loss, Access::write}, {2, labels, Access::read}}, rows, columns,
                              Uniform::u32(firstRowLocation, 0), false);
  dispatch.uniforms.push_back(Uniform::f32(4, smoothing));
  return dispatch;
}

Dispatch SoftmaxOp::crossEntropyGradient(const BufferView& logits, const BufferView& labels, const BufferView& rowGradient,
                                         const BufferView& dLogits, std::uint32_t rows, std::uint32_t columns,
                                         bool accumulate, float smoothing) const {
  Dispatch dispatch = rowwise(crossEntropyGradient_, "cross-entropy gradient",
                              {{0, logits, Access::read},
                               {1, dLogits, accumulate ? Access::readWrite : Access::write},
                               {2, labels, Access::read},
                               {3, rowGradient, Access::read}},
                              rows, columns, Uniform::u32(firstRowLocation, 0), accumulate);
  dispatch.uniforms.push_back(Uniform::f32(4, smoothing));
  return dispatch;
}

Dispatch SoftmaxOp::correct(const BufferView& logits, const BufferView& labels, const BufferView& correct,
                            std::uint32_t rows, std::uint32_t columns) const {
  return rowwise(correct_, "correct", {{0, logits, Access::read}, {1, correct, Access::write}, {2, labels, Access::read}},
                 rows, columns, Uniform::u32(firstRowLocation, 0), false);
}

}  // namespace glnet
