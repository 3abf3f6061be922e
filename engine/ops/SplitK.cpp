#include "ops/SplitK.h"

#include "ops/Gemm.h"
#include "plan/Groups.h"

namespace glnet {

SplitSumOp::SplitSumOp(ProgramCache& programs) : programs_(&programs) {}

namespace {

// Invocations per sum (SplitSum.glsl's SUM_LANES): 1 where the sums alone fill the GPU the GEMM rule models (about
// 4 groups of 256 on each multiprocessor), else up to 16, each taking at least 4 slices.
std::uint32_t lanesFor(std::uint64_t sums, std::uint32_t splits) {
  const std::uint64_t wanted = 4 * modelledMultiprocessors * 256;
  std::uint32_t lanes = 1;
  while (lanes < 16 && sums * lanes < wanted && 4u * lanes * 2 <= splits) lanes *= 2;
  return lanes;
}

}  // namespace

Dispatch SplitSumOp::sum(std::uint64_t slice, std::uint32_t splits, std::vector<ShaderDefine> defines) const {
  const std::uint32_t lanes = lanesFor(slice, splits);
  if (lanes > 1) defines.push_back({"SUM_LANES", std::to_string(lanes)});
  Dispatch d;
  d.program = &programs_->get("SplitSum.glsl", defines);
  d.label = "split-K sum";
  // SUM_LANES groups are 128 invocations, 128 / lanes sums each.
  if (lanes > 1) {
    d.groups = {static_cast<std::uint32_t>((slice * lanes + 127) / 128), 1, 1};
  } else {
    d.invocations = slice;
  }
  d.linear = true;
  return d;
}

Dispatch SplitSumOp::operator()(const BufferView& partial, const BufferView& out, std::uint32_t count, std::uint32_t splits,
                                bool accumulate) const {
  Dispatch d = sum(count, splits, {});
  d.buffers = {{0, partial, Access::read}, {1, out, accumulate ? Access::readWrite : Access::write}};
  d.uniforms = {Uniform::u32(0, count), Uniform::u32(1, splits), Uniform::u32(2, accumulate ? 1u : 0u)};
  return d;
}

Dispatch SplitSumOp::operator()(const BufferView& partial, const BufferView& out, std::uint32_t count, const BufferView& tail,
                                std::uint32_t tailCount, std::uint32_t splits, bool accumulate) const {
  Dispatch d = sum(std::uint64_t{count} + tailCount, splits, {{"TAIL", "1"}});
  d.buffers = {{0, partial, Access::read}, {1, out, accumulate ? Access::readWrite : Access::write},
               {2, tail, accumulate ? Access::readWrite : Access::write}};
  d.uniforms = {Uniform::u32(0, count), Uniform::u32(1, splits), Uniform::u32(2, accumulate ? 1u : 0u), Uniform::u32(4, tailCount)};
  return d;
}

namespace {

std::vector<ShaderDefine> finishDefines(Activation activation, const Pointwise& after, bool residual) {
  std::vector<ShaderDefine> defines{{"BIAS_ACTIVATION", "1"}, kindDefine(activation)};
  if (residual) defines.push_back({"RESIDUAL", "1"});
  for (ShaderDefine& define : after.fusedDefines()) defines.push_back(std::move(define));
  return defines;
}

}  // namespace

SplitBiasActivationOp::SplitBiasActivationOp(ProgramCache& programs, Activation activation, const Pointwise& after, bool residual)
    : program_(programs.get("SplitSum.glsl", finishDefines(activation, after, residual), after.fusedIncludes())),
      pooledProgram_(programs.get("SplitSum.glsl", {{"BIAS_ACTIVATION", "1"}, {"POOL", "1"}, kindDefine(activation)})) {}

Dispatch SplitBiasActivationOp::pooled(const BufferView& partial, const BufferView& bias, const BufferView& out, std::uint32_t images,
                                       std::uint32_t channels, std::uint32_t height, std::uint32_t width, std::uint32_t splits) const {
  const std::uint32_t count = images * channels * (height / 2) * (width / 2);
  Dispatch d;
  d.program = &pooledProgram_;
  d.label = "split-K sum, max pool, bias, activation";
  d.buffers = {{0, partial, Access::read}, {1, out, Access::write}, {2, bias, Access::read}};
  d.uniforms = {Uniform::u32(0, count),  Uniform::u32(1, splits), Uniform::u32(3, channels),
                Uniform::u32(6, height), Uniform::u32(7, width),  Uniform::u32(8, images * channels * height * width)};
  d.invocations = count;
  d.linear = true;
  return d;
}

Dispatch SplitBiasActivationOp::operator()(const BufferView& partial, const BufferView& bias, const BufferView& out,
                                           std::uint32_t count, std::uint32_t columns, std::uint32_t splits, std::uint32_t plane,
                                           const BufferView* residual) const {
  Dispatch d;
  d.program = &program_;
  d.label = "split-K sum, bias, activation";
  d.buffers = {{0, partial, Access::read}, {1, out, Access::write}, {2, bias, Access::read}};
  if (residual) d.buffers.push_back({3, *residual, Access::read});
  d.uniforms = {Uniform::u32(0, count), Uniform::u32(1, splits), Uniform::u32(2, 0), Uniform::u32(3, columns), Uniform::u32(5, plane)};
  d.invocations = count;
  d.linear = true;
  return d;
}

}  // namespace glnet
