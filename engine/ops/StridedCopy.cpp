#include "ops/StridedCopy.h"

#include "base/check.h"
#include "numbers/ShaderModes.h"
#include "plan/Groups.h"

#include <algorithm>

namespace glnet {

Dispatch regionCopy(ProgramCache& programs, const std::string& label, const BufferView& x, const BufferView& y, const RegionCopy& copy,
                    bool accumulate) {
  GLNET_ASSERT(copy.region.size() <= largestCopyRank && copy.xStrides.size() == copy.region.size() && copy.yStrides.size() == copy.region.size(),
               "a region copy has one stride per axis, at most 6 axes");
  const Program& program = programs.get("StridedCopy.glsl", {kindDefine(CopyMode::copy),
                                                                {"RANK", std::to_string(std::max<std::size_t>(copy.region.size(), 1))},
                                                                {"ACCUMULATE", accumulate ? "1" : "0"}});
  std::uint64_t count = 1;
  for (const std::uint32_t size : copy.region) count *= size;
  Dispatch dispatch = linearDispatch(program, label, count);
  dispatch.buffers = {{0, x, Access::read}, {1, y, accumulate ? Access::readWrite : Access::write}};
  dispatch.uniforms = {Uniform::u32(0, static_cast<std::uint32_t>(count)), Uniform::i32(1, static_cast<std::int32_t>(copy.xOffset)),
                       Uniform::i32(2, static_cast<std::int32_t>(copy.yOffset)), Uniform::f32(3, 0.0f)};
  std::vector<std::int64_t> own(copy.region.size(), 1);  // the region's own row-major strides
  for (std::size_t k = copy.region.size(); k-- > 1;) own[k - 1] = own[k] * copy.region[k];
  for (std::size_t k = 0; k < largestCopyRank; ++k) {
    const bool used = k < copy.region.size();
    dispatch.uniforms.push_back(Uniform::u32(4 + static_cast<int>(k), used ? static_cast<std::uint32_t>(own[k]) : 1));
    dispatch.uniforms.push_back(Uniform::i32(10 + static_cast<int>(k), used ? static_cast<std::int32_t>(copy.xStrides[k]) : 0));
    dispatch.uniforms.push_back(Uniform::i32(16 + static_cast<int>(k), used ? static_cast<std::int32_t>(copy.yStrides[k]) : 0));
  }
  return dispatch;
}

namespace {

Dispatch indexedCopy(ProgramCache& programs, CopyMode mode, const std::string& label, const BufferView& x, const BufferView& indices,
                     const BufferView& y, const IndexedCopy& copy) {
  GLNET_ASSERT(!copy.dims.empty() && copy.dims.size() <= largestCopyRank && copy.strides.size() == copy.dims.size(),
               "an indexed copy has 1 to 6 indices per row, each with its axis's size and stride");
  const Program& program = programs.get("StridedCopy.glsl", {kindDefine(mode), {"RANK", "1"}, {"ACCUMULATE", "0"}});
  Dispatch dispatch = linearDispatch(program, label, copy.count);
  dispatch.buffers = {{0, x, Access::read}, {1, y, mode == CopyMode::scatter ? Access::readWrite : Access::write}, {2, indices, Access::read}};
  dispatch.uniforms = {Uniform::u32(0, static_cast<std::uint32_t>(copy.count)), Uniform::u32(1, copy.inner), Uniform::u32(2, copy.rows),
                       Uniform::u32(3, static_cast<std::uint32_t>(copy.dims.size())),
                       Uniform::i32(16, static_cast<std::int32_t>(copy.dataOuterStride)), Uniform::i32(17, static_cast<std::int32_t>(copy.indexOuterStride))};
  for (std::size_t k = 0; k < largestCopyRank; ++k) {
    const bool used = k < copy.dims.size();
    dispatch.uniforms.push_back(Uniform::i32(4 + static_cast<int>(k), used ? static_cast<std::int32_t>(copy.dims[k]) : 1));
    dispatch.uniforms.push_back(Uniform::i32(10 + static_cast<int>(k), used ? static_cast<std::int32_t>(copy.strides[k]) : 0));
  }
  return dispatch;
}

}  // namespace

Dispatch gatherCopy(ProgramCache& programs, const std::string& label, const BufferView& x, const BufferView& indices, const BufferView& y,
                    const IndexedCopy& copy) {
  return indexedCopy(programs, CopyMode::gather, label, x, indices, y, copy);
}

Dispatch scatterCopy(ProgramCache& programs, const std::string& label, const BufferView& updates, const BufferView& indices, const BufferView& y,
                     const IndexedCopy& copy) {
  return indexedCopy(programs, CopyMode::scatter, label, updates, indices, y, copy);
}

Dispatch triluCopy(ProgramCache& programs, const std::string& label, const BufferView& x, const BufferView& y, std::uint64_t count,
                   std::uint32_t rows, std::uint32_t cols, std::int32_t k, bool upper) {
  const Program& program = programs.get("StridedCopy.glsl", {kindDefine(CopyMode::trilu), {"RANK", "1"}, {"ACCUMULATE", "0"}, {"UPPER", upper ? "1" : "0"}});
  Dispatch dispatch = linearDispatch(program, label, count);
  dispatch.buffers = {{0, x, Access::read}, {1, y, Access::write}};
  dispatch.uniforms = {Uniform::u32(0, static_cast<std::uint32_t>(count)), Uniform::u32(1, rows), Uniform::u32(2, cols), Uniform::i32(3, k)};
  return dispatch;
}

Dispatch fill(ProgramCache& programs, const std::string& label, const BufferView& y, std::uint64_t count, float value) {
  const Program& program = programs.get("StridedCopy.glsl", {kindDefine(CopyMode::fill), {"RANK", "1"}, {"ACCUMULATE", "0"}});
  Dispatch dispatch = linearDispatch(program, label, count);
  // The fill reads nothing; binding 0 must still hold a buffer.
  dispatch.buffers = {{0, y, Access::read}, {1, y, Access::write}};
  dispatch.uniforms = {Uniform::u32(0, static_cast<std::uint32_t>(count)), Uniform::f32(3, value)};
  return dispatch;
}

}  // namespace glnet
