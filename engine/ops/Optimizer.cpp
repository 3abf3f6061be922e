#include "ops/Optimizer.h"

#include "base/check.h"
#include "numbers/ShaderModes.h"
#include "plan/Groups.h"

namespace glnet {

OptimizerKind parseOptimizer(const std::string& name) { return parseKind<OptimizerKind>(name, "optimizer"); }

const char* optimizerName(OptimizerKind kind) { return kindName(kind); }

OptimizerOp::OptimizerOp(ProgramCache& programs, const OptimizerSettings& settings)
    : settings_(settings),
      program_(programs.get("Optimizer.glsl", {kindDefine(settings.kind),
                                               {"NESTEROV", settings.nesterov ? "1" : "0"},
                                               {"CLIP", settings.clipNorm > 0 ? "1" : "0"}})) {}

Dispatch OptimizerOp::update(const BufferView& parameters, const BufferView& gradients, const std::vector<BufferView>& state,
                             std::uint32_t count, std::uint32_t decayed, int step, int learningRate,
                             const std::optional<BufferView>& squaredNorm) const {
  GLNET_ASSERT(state.size() == stateBuffers(settings_.kind), "wrong number of optimizer state buffers");
  GLNET_ASSERT(squaredNorm.has_value() == (settings_.clipNorm > 0), "clipping reads the gradients' squared norm");
  Dispatch dispatch;
  dispatch.program = &program_;
  dispatch.label = std::string("optimizer ") + optimizerName(settings_.kind);
  dispatch.buffers = {{0, parameters, Access::readWrite}, {1, gradients, Access::read}};
  for (std::size_t i = 0; i < state.size(); ++i) dispatch.buffers.push_back({static_cast<unsigned>(2 + i), state[i], Access::readWrite});
  if (squaredNorm) dispatch.buffers.push_back({4, *squaredNorm, Access::read});
  dispatch.uniforms = {Uniform::u32(0, count), Uniform::fromParameter(1, learningRate), Uniform::f32(2, settings_.momentum),
                       Uniform::f32(3, settings_.beta2), Uniform::f32(4, settings_.epsilon),
                       step >= 0 ? Uniform::fromParameter(5, step) : Uniform::u32(5, 1), Uniform::f32(6, settings_.weightDecay),
                       Uniform::u32(7, decayed)};
  if (squaredNorm) dispatch.uniforms.push_back(Uniform::f32(8, settings_.clipNorm));
  dispatch.invocations = count;
  dispatch.linear = true;
  return dispatch;
}

GatherOp::GatherOp(ProgramCache& programs)
    : images_(programs.get("Gather.glsl", {kindDefine(GatherMode::images)})),
      labels_(programs.get("Gather.glsl", {kindDefine(GatherMode::labels)})),
      augmented_(programs.get("Gather.glsl", {kindDefine(GatherMode::augmented)})),
      tokens_(programs.get("Gather.glsl", {kindDefine(GatherMode::tokens)})) {}

Dispatch GatherOp::tokens(const BufferView& ids, const BufferView& indices, const BufferView& out, std::uint32_t rows,
                          std::uint32_t idsPerSequence, int firstRow) const {
  const std::uint32_t count = rows * idsPerSequence;
  Dispatch dispatch = linearDispatch(tokens_, "gather token ids", count);
  dispatch.buffers = {{0, ids, Access::read}, {1, indices, Access::read}, {2, out, Access::write}};
  dispatch.uniforms = {Uniform::u32(0, count), Uniform::fromParameter(1, firstRow), Uniform::u32(2, idsPerSequence)};
  return dispatch;
}

Dispatch GatherOp::images(const BufferView& pixels, const BufferView& indices, const BufferView& out, std::uint32_t rows,
                          std::uint32_t pixelsPerImage, int firstRow, const InputFormat& format) const {
  Dispatch dispatch;
  dispatch.program = &images_;
  dispatch.label = "gather images";
  dispatch.buffers = {{0, pixels, Access::read}, {1, indices, Access::read}, {2, out, Access::write}};
  const std::uint32_t count = rows * pixelsPerImage;
  dispatch.uniforms = {Uniform::u32(0, count), Uniform::fromParameter(1, firstRow), Uniform::u32(2, pixelsPerImage)};
  for (const Uniform& uniform : scalingUniforms(format, pixelsPerImage, 4, 3)) dispatch.uniforms.push_back(uniform);
  dispatch.invocations = count;
  dispatch.linear = true;
  return dispatch;
}

Dispatch GatherOp::augmentedImages(const BufferView& pixels, const BufferView& indices, const BufferView& augment, const BufferView& out,
                                   std::uint32_t rows, std::uint32_t pixelsPerImage, std::uint32_t height, std::uint32_t width,
                                   int firstRow, const InputFormat& format) const {
  GLNET_ASSERT(height * width > 0 && pixelsPerImage % (height * width) == 0, "an image is whole planes of height × width");
  Dispatch dispatch = images(pixels, indices, out, rows, pixelsPerImage, firstRow, format);
  dispatch.program = &augmented_;
  dispatch.label = "gather augmented images";
  dispatch.buffers.push_back({3, augment, Access::read});
  dispatch.uniforms.push_back(Uniform::u32(12, height));
  dispatch.uniforms.push_back(Uniform::u32(13, width));
  return dispatch;
}

Dispatch GatherOp::labels(const BufferView& labelBytes, const BufferView& indices, const BufferView& out, std::uint32_t rows,
                          int firstRow) const {
  Dispatch dispatch;
  dispatch.program = &labels_;
  dispatch.label = "gather labels";
  dispatch.buffers = {{0, labelBytes, Access::read}, {1, indices, Access::read}, {2, out, Access::write}};
  dispatch.uniforms = {Uniform::u32(0, rows), Uniform::fromParameter(1, firstRow), Uniform::u32(2, 1)};
  dispatch.invocations = rows;
  dispatch.linear = true;
  return dispatch;
}

}  // namespace glnet
