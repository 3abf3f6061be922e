// Bindings of shaders/StridedCopy.glsl's copy of a region and its fill: the layout operators of imported models and
// the zero-spread gradient of a strided convolution are such copies.
#pragma once

#include "plan/Plan.h"
#include "plan/ProgramCache.h"

#include <cstdint>
#include <vector>

namespace glnet {

// The most axes a region may have.
constexpr std::size_t largestCopyRank = 6;

// A region's shape, and where its coordinates are in x and in y (offsets and strides in elements).
struct RegionCopy {
  std::vector<std::uint32_t> region;
  std::int64_t xOffset = 0, yOffset = 0;
  std::vector<std::int64_t> xStrides, yStrides;
};

// y[yOffset + Σ c·yStrides] = x[xOffset + Σ c·xStrides] for every coordinate c of the region (+= when `accumulate`).
Dispatch regionCopy(ProgramCache& programs, const std::string& label, const BufferView& x, const BufferView& y, const RegionCopy& copy,
                    bool accumulate = false);
// y[i] = value for i < count.
Dispatch fill(ProgramCache& programs, const std::string& label, const BufferView& y, std::uint64_t count, float value);

}  // namespace glnet
