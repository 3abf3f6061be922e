// Bindings of shaders/StridedCopy.glsl's copy of a region and its fill: the layout operators of imported models are
// such copies. Its indexed copies (Gather, GatherND, ScatterND)
// and its triangle (Trilu) too.
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
// Where the rows of an indexed copy read (gather) or write (scatter): `count` elements as [outer, rows, inner]; row j
// of outer block o takes the `depth` indices at o·indexOuterStride + j·depth, index k along an axis of dims[k] elements
// at strides[k], from element o·dataOuterStride (gather; scatter has one outer block).
struct IndexedCopy {
  std::uint64_t count = 0;
  std::uint32_t inner = 1, rows = 1;
  std::vector<std::int64_t> dims, strides;
  std::int64_t dataOuterStride = 0, indexOuterStride = 0;
};
// y[i] = x at the rows' indices, NaN where an index is outside its axis, fractional or NaN.
Dispatch gatherCopy(ProgramCache& programs, const std::string& label, const BufferView& x, const BufferView& indices, const BufferView& y,
                    const IndexedCopy& copy);
// y at the rows' indices = updates (y already holds the data); a bad index writes nothing.
Dispatch scatterCopy(ProgramCache& programs, const std::string& label, const BufferView& updates, const BufferView& indices, const BufferView& y,
                     const IndexedCopy& copy);
// y = x where column − row ≥ k (upper) or ≤ k (lower) over the last two axes, [rows, cols], else 0.
Dispatch triluCopy(ProgramCache& programs, const std::string& label, const BufferView& x, const BufferView& y, std::uint64_t count,
                   std::uint32_t rows, std::uint32_t cols, std::int32_t k, bool upper);
// y[i] = value for i < count.
Dispatch fill(ProgramCache& programs, const std::string& label, const BufferView& y, std::uint64_t count, float value);

}  // namespace glnet
