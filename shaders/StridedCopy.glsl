// Rearranges floats between layouts: Transpose, Slice, Split, Concat, Pad, Expand and Gather on a constant
// index are each a copy of a region, whose coordinates index the source and the destination through their own
// strides (negative for a reversed slice, 0 for a broadcast axis).
//   COPY_MODE 0 copy: y[yOffset + Σ c·yStrides] = x[xOffset + Σ c·xStrides] for every coordinate c of the region
//   COPY_MODE 1 fill: y[i] = value for i < count (Pad's border, before the copy of the interior)
//   RANK: the region's rank (1 to 6)
// bindings: 0 x read (mode 0), 1 y write
// uniforms: 0 count (the region's elements), 1 xOffset, 2 yOffset (elements), 3 value (mode 1); 4-9 the
// region's own strides; 10-15 x's strides; 16-21 y's strides
layout(local_size_x = LOCAL_SIZE_X) in;

layout(std430, binding = 0) readonly buffer Source { float x[]; };
layout(std430, binding = 1) writeonly buffer Result { float y[]; };
layout(location = 0) uniform uint count;
layout(location = 1) uniform int xOffset;
layout(location = 2) uniform int yOffset;
layout(location = 3) uniform float value;
layout(location = 4) uniform uint regionStrides[6];
layout(location = 10) uniform int xStrides[6];
layout(location = 16) uniform int yStrides[6];

void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i >= count) return;
#if COPY_MODE == 1
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
  y[to] = x[from];
#endif
}
