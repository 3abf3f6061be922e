#include "ops/SplitK.h"

#include "ops/Groups.h"

#include <algorithm>

namespace glnet {
namespace {
constexpr std::uint64_t tile = 64, tileK = 16;
constexpr std::uint64_t enoughGroups = 256;  // about two per multiprocessor of a large GPU
constexpr std::uint64_t minimumChunk = 64;   // 4 tile steps per group at least
}  // namespace

SplitK chooseSplitK(std::uint64_t rows, std::uint64_t columns, std::uint64_t depth) {
  const std::uint64_t groups = ((rows + tile - 1) / tile) * ((columns + tile - 1) / tile);
  if (groups >= enoughGroups || depth < 2 * minimumChunk) return {};
  const std::uint64_t wanted = std::min((depth + minimumChunk - 1) / minimumChunk, (2 * enoughGroups + groups - 1) / groups);
  const std::uint64_t chunk = ((depth + wanted - 1) / wanted + tileK - 1) / tileK * tileK;
  const std::uint64_t splits = (depth + chunk - 1) / chunk;
  if (splits < 2) return {};
  return {static_cast<std::uint32_t>(splits), static_cast<std::uint32_t>(chunk)};
}

SplitSumOp::SplitSumOp(ProgramCache& programs) : program_(programs.get("SplitSum.glsl")) {}

Dispatch SplitSumOp::operator()(const BufferView& partial, const BufferView& out, std::uint32_t count, std::uint32_t splits,
                                bool accumulate) const {
  Dispatch d;
  d.program = &program_;
  d.label = "split-K sum";
  d.buffers = {{0, partial, Access::read}, {1, out, accumulate ? Access::readWrite : Access::write}};
  d.uniforms = {Uniform::u32(0, count), Uniform::u32(1, splits), Uniform::u32(2, accumulate ? 1u : 0u)};
  d.groups = linearGroups(count, program_);
  d.linear = true;
  return d;
}

SplitBiasActivationOp::SplitBiasActivationOp(ProgramCache& programs, int activation)
    : program_(programs.get("SplitSum.glsl", {{"BIAS_ACTIVATION", "1"}, {"ACTIVATION", std::to_string(activation)}})) {}

Dispatch SplitBiasActivationOp::operator()(const BufferView& partial, const BufferView& bias, const BufferView& out,
                                           std::uint32_t count, std::uint32_t columns, std::uint32_t splits) const {
  Dispatch d;
  d.program = &program_;
  d.label = "split-K sum, bias, activation";
  d.buffers = {{0, partial, Access::read}, {1, out, Access::write}, {2, bias, Access::read}};
  d.uniforms = {Uniform::u32(0, count), Uniform::u32(1, splits), Uniform::u32(2, 0), Uniform::u32(3, columns)};
  d.groups = linearGroups(count, program_);
  d.linear = true;
  return d;
}

}  // namespace glnet
