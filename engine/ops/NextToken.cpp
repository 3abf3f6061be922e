#include "ops/NextToken.h"

#include "base/ExactInteger.h"
#include "numbers/ShaderModes.h"

#include <algorithm>

namespace glnet {
namespace {

const Program& mode(ProgramCache& programs, NextTokenMode value) { return programs.get("NextToken.glsl", {kindDefine(value)}); }

// Groups a greedy search aims at when rows are few: enough to keep a large GPU's multiprocessors reading (an H100 has
// 132), since a decode step waits for this tail. Each invocation reads at least a few logits, so that the block maxima
// stay few for the final pass.
constexpr std::uint64_t greedyGroups = 256;
constexpr std::uint64_t logitsPerInvocation = 4;

}  // namespace

NextTokenOp::NextTokenOp(ProgramCache& programs)
    : argmaxBlocks_(mode(programs, NextTokenMode::argmaxBlocks)),
      argmaxFinal_(mode(programs, NextTokenMode::argmaxFinal)),
      sample_(programs.get("NextToken.glsl", {kindDefine(NextTokenMode::sample), {"DRAW_BITS", drawBitsGlsl()}})) {}

NextTokenOp::Blocks NextTokenOp::argmaxBlocks(const NextTokenShape& shape) const {
  const std::uint64_t perBlock = std::uint64_t{static_cast<std::uint32_t>(argmaxBlocks_.localSize()[0])} * logitsPerInvocation;
  const std::uint64_t most = (shape.vocabulary + perBlock - 1) / perBlock;
  const std::uint64_t wanted = (greedyGroups + shape.rows - 1) / shape.rows;
  const auto count = static_cast<std::uint32_t>(std::max<std::uint64_t>(1, std::min(most, wanted)));
  const std::uint32_t chunk = (shape.vocabulary + count - 1) / count;
  return {(shape.vocabulary + chunk - 1) / chunk, chunk};
}

std::size_t NextTokenOp::workspaceBytes(const NextTokenShape& shape) const {
  return std::size_t{shape.rows} * argmaxBlocks(shape).count * 2 * sizeof(std::uint32_t);
}

std::vector<Dispatch> NextTokenOp::operator()(const BufferView& logits, const BufferView& ids, const BufferView& idFloats,
                                              const BufferView& workspace, const NextTokenShape& shape,
                                              const SamplingSettings& settings, const Uniform& step) const {
  settings.check();
  if (shape.vocabulary == 0 || !exactAsFloat(shape.vocabulary))
    throw Error("the next token is chosen among 1 to 2^24 tokens (ids exact as floats), not " + std::to_string(shape.vocabulary));
  // A group per row along y: GL guarantees 65535.
  if (shape.rows == 0 || shape.rows > 65535)
    throw DeviceLimitError("the next token is chosen for 1 to 65535 rows at once, not " + std::to_string(shape.rows));
  const std::uint32_t stride = shape.logitsStride ? shape.logitsStride : shape.vocabulary;
  GLNET_ASSERT(stride >= shape.vocabulary, "a row of logits overlaps the next");
  const std::uint64_t logitsEnd = shape.logitsOffset + std::uint64_t{shape.rows - 1} * stride + shape.vocabulary;
  GLNET_ASSERT(logits.room() / sizeof(float) >= logitsEnd, "logits too small");
  GLNET_ASSERT(logitsEnd <= std::uint64_t{1} << 32, "logits indexed by uint");
  GLNET_ASSERT(ids.room() / sizeof(std::uint32_t) >= std::uint64_t{shape.idsOffset} + shape.rows, "ids too small");
  GLNET_ASSERT(idFloats.room() / sizeof(float) > shape.floatOffset + std::uint64_t{shape.rows - 1} * shape.floatStride,
               "id floats too small");
  GLNET_ASSERT(workspace.room() >= workspaceBytes(shape), "next-token workspace too small");
  GLNET_ASSERT(step.location == stepLocation, "the step's uniform is at NextTokenOp::stepLocation");

  // Every mode binds the same buffers (the workspace unused when sampling) and reads the same shape.
  const auto dispatch = [&](const Program& program, const char* label, Access workspaceAccess, std::uint32_t groupsPerRow) {
    Dispatch d;
    d.program = &program;
    d.label = label;
    d.buffers = {{0, logits, Access::read}, {1, ids, Access::write}, {2, idFloats, Access::write}, {3, workspace, workspaceAccess}};
    d.uniforms = {Uniform::u32(0, shape.vocabulary), Uniform::u32(1, stride), Uniform::u32(4, shape.floatOffset),
                  Uniform::u32(5, shape.floatStride), Uniform::u32(12, shape.logitsOffset),
                  Uniform::u32(13, shape.idsOffset)};
    d.groups = {groupsPerRow, shape.rows, 1};
    return d;
  };
  if (!settings.greedy()) {
    Dispatch sample = dispatch(sample_, "sample", Access::read, 1);
    sample.uniforms.insert(sample.uniforms.end(), {Uniform::f32(6, settings.temperature), Uniform::u32(7, settings.topK),
                                                   Uniform::f32(8, settings.topP),
                                                   Uniform::u32(9, static_cast<std::uint32_t>(settings.seed)),
                                                   Uniform::u32(10, static_cast<std::uint32_t>(settings.seed >> 32)), step});
    return {sample};
  }
  const Blocks blocks = argmaxBlocks(shape);
  const std::vector<Uniform> searchShape = {Uniform::u32(2, blocks.count), Uniform::u32(3, blocks.chunk)};
  Dispatch search = dispatch(argmaxBlocks_, blocks.count == 1 ? "argmax" : "argmax (blocks)", Access::write, blocks.count);
  search.uniforms.insert(search.uniforms.end(), searchShape.begin(), searchShape.end());
  if (blocks.count == 1) return {search};
  Dispatch final = dispatch(argmaxFinal_, "argmax (final)", Access::read, 1);
  final.uniforms.insert(final.uniforms.end(), searchShape.begin(), searchShape.end());
  return {search, final};
}

}  // namespace glnet
