// Rearranges floats between layouts: Transpose, Slice, Split, Concat, Pad, Expand and Gather on a constant
// index are each a copy of a region, whose coordinates index the source and the destination through their own
// strides (negative for a reversed slice, 0 for a broadcast axis).
//   COPY_MODE_COPY: y[yOffset + Σ c·yStrides] = x[xOffset + Σ c·xStrides] for every coordinate c of the region
//   COPY_MODE_FILL: y[i] = value for i < count (Pad's border, before the copy of the interior)
//   COPY_MODE_CONCAT: a concat of up to 32 inputs that live in one buffer, in one dispatch: y is rows of `row` elements,
//              each the inputs' pieces one after another (input s: segmentEnd[s] − segmentEnd[s − 1] elements, from
//              element segmentOffset[s] of the buffer, one piece per row)
//   COPY_MODE_GATHER: Gather and GatherND with indices held as floats: y is [outer, rows, inner]; row j of outer block o
//              reads the `depth` indices at indices[o·indexOuterStride + j·depth ...], each wrapped once when negative
//              (+ dims[k]), and y[(o·rows + j)·inner + e] = x[o·dataOuterStride + Σ index_k·strides[k] + e]; an index
//              outside its axis, fractional or NaN reads nothing and makes its elements NaN (a GPU cannot raise an error)
//   COPY_MODE_SCATTER: ScatterND's updates after the copy of its data: updates x is [rows, inner]; row j goes to
//              y[Σ index_k·strides[k] + e] for the `depth` indices of row j (checked at load; a bad one writes nothing)
//   COPY_MODE_TRILU: y = x where column − row ≥ k (UPPER 1) or ≤ k (UPPER 0) of the last two axes [rows, cols], else 0
//   RANK: the region's rank (1 to 6; COPY and FILL)
//   ACCUMULATE 1 (COPY): y[...] += x[...] (a concatenation's gradient into an input that other ops also read)
// bindings: 0 x read (COPY and CONCAT: in CONCAT the buffer that holds every input; SCATTER: the updates), 1 y write
//   (SCATTER: read and written), 2 indices read (GATHER and SCATTER)
// uniforms: 0 count (the region's elements; CONCAT: y's), 1 xOffset, 2 yOffset (elements), 3 value (FILL); 4-9
// the region's own strides; 10-15 x's strides; 16-21 y's strides. Mode 2: 1 row, 2 segments, 4-35 segmentEnd,
// 36-67 segmentOffset. GATHER and SCATTER: 1 inner, 2 rows, 3 depth, 4-9 dims, 10-15 strides, 16 dataOuterStride,
// 17 indexOuterStride. TRILU: 1 rows, 2 cols, 3 k
layout(local_size_x = LOCAL_SIZE_X) in;

layout(std430, binding = 0) readonly buffer Source { float x[]; };
#if ACCUMULATE || COPY_MODE == COPY_MODE_SCATTER
layout(std430, binding = 1) buffer Result { float y[]; };
#else
layout(std430, binding = 1) writeonly buffer Result { float y[]; };
#endif
layout(location = 0) uniform uint count;
#if COPY_MODE == COPY_MODE_CONCAT
#define MAX_SEGMENTS 32
layout(location = 1) uniform uint row;
layout(location = 2) uniform uint segments;
layout(location = 4) uniform uint segmentEnd[MAX_SEGMENTS];
layout(location = 36) uniform int segmentOffset[MAX_SEGMENTS];

void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i >= count) return;
  uint r = i / row, within = i % row, begin = 0u, s = 0u;
  while (s + 1u < segments && within >= segmentEnd[s]) begin = segmentEnd[s++];
  y[i] = x[uint(segmentOffset[s]) + r * (segmentEnd[s] - begin) + (within - begin)];
}
#elif COPY_MODE == COPY_MODE_GATHER || COPY_MODE == COPY_MODE_SCATTER
layout(std430, binding = 2) readonly buffer Indices { float indices[]; };
layout(location = 1) uniform uint inner;
layout(location = 2) uniform uint rows;
layout(location = 3) uniform uint depth;
layout(location = 4) uniform int dims[6];
layout(location = 10) uniform int strides[6];
layout(location = 16) uniform int dataOuterStride;
layout(location = 17) uniform int indexOuterStride;

// The offset in x (GATHER) or y (SCATTER) of index row `at`, or -1 when an index is outside its axis, fractional or NaN.
int indexedOffset(uint at) {
  int offset = 0;
  for (uint k = 0u; k < depth; ++k) {
    float index = indices[at + k];
    if (index < 0.0) index += float(dims[k]);
    if (isNaN(index) || !(index >= 0.0 && index < float(dims[k])) || index != floor(index)) return -1;
    offset += int(index) * strides[k];
  }
  return offset;
}

void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i >= count) return;
  uint e = i % inner, row = i / inner;
#if COPY_MODE == COPY_MODE_GATHER
  uint j = row % rows, o = row / rows;
  int offset = indexedOffset(uint(int(o) * indexOuterStride) + j * depth);
  y[i] = offset < 0 ? uintBitsToFloat(0x7fc00000u) : x[uint(int(o) * dataOuterStride + offset) + e];
#else
  int offset = indexedOffset(row * depth);
  if (offset >= 0) y[uint(offset) + e] = x[i];
#endif
}
#elif COPY_MODE == COPY_MODE_TRILU
layout(location = 1) uniform uint rows;
layout(location = 2) uniform uint cols;
layout(location = 3) uniform int k;

void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i >= count) return;
  int column = int(i % cols), row = int((i / cols) % rows);
#if UPPER
  bool kept = column - row >= k;
#else
  bool kept = column - row <= k;
#endif
  y[i] = kept ? x[i] : 0.0;
}
#else
layout(location = 1) uniform int xOffset;
layout(location = 2) uniform int yOffset;
layout(location = 3) uniform float value;
layout(location = 4) uniform uint regionStrides[6];
layout(location = 10) uniform int xStrides[6];
layout(location = 16) uniform int yStrides[6];

void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i >= count) return;
#if COPY_MODE == COPY_MODE_FILL
  y[i] = value;
#else
  uint rest = i;
  int from = xOffset, to = yOffset;
  for (int k = 0; k < RANK; ++k) {
    uint coordinate = rest / regionStrides[k];
    rest -= coordinate * regionStrides[k];
    from += int(coordinate) * xStrides[k];
    to += int(coordinate) * yStrides[k];
  }
#if ACCUMULATE
  y[to] += x[from];
#else
  y[to] = x[from];
#endif
#endif
}
#endif
