// Rearranges floats between layouts: Transpose, Slice, Split, Concat, Pad, Expand and Gather on a constant
// index are each a copy of a region, whose coordinates index the source and the destination through their own
// strides (negative for a reversed slice, 0 for a broadcast axis).
//   COPY_MODE_COPY: y[yOffset + Σ c·yStrides] = x[xOffset + Σ c·xStrides] for every coordinate c of the region
//   COPY_MODE_FILL: y[i] = value for i < count (Pad's border, before the copy of the interior)
//   COPY_MODE_CONCAT: a concat of up to 32 inputs that live in one buffer, in one dispatch: y is rows of `row` elements,
//              each the inputs' pieces one after another (input s: segmentEnd[s] − segmentEnd[s − 1] elements, from
//              element segmentOffset[s] of the buffer, one piece per row)
//   RANK: the region's rank (1 to 6; COPY and FILL)
//   ACCUMULATE 1 (COPY): y[...] += x[...] (a concatenation's gradient into an input that other ops also read)
// bindings: 0 x read (COPY and CONCAT: in CONCAT the buffer that holds every input), 1 y write
// uniforms: 0 count (the region's elements; CONCAT: y's), 1 xOffset, 2 yOffset (elements), 3 value (FILL); 4-9
// the region's own strides; 10-15 x's strides; 16-21 y's strides. Mode 2: 1 row, 2 segments, 4-35 segmentEnd,
// 36-67 segmentOffset
layout(local_size_x = LOCAL_SIZE_X) in;

layout(std430, binding = 0) readonly buffer Source { float x[]; };
#if ACCUMULATE
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
