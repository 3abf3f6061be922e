// A training batch gathered from a GPU-resident dataset through a shuffled index list:
//   GATHER_MODE 0 images: y[r·P + c] = (pixel c of image indices[firstRow + r]) / 255, then (− mean)·inverseStd
//   GATHER_MODE 1 labels: labels[r] = label byte of image indices[firstRow + r]
// bindings: 0 bytes (uint8 pixels or labels, packed four to a uint) read, 1 indices [uint] read, 2 out write
// uniforms: 0 count (floats in mode 0, rows in mode 1), 1 firstRow, 2 P (pixels per image), 3 mean, 4 inverseStd
layout(local_size_x = LOCAL_SIZE_X) in;

layout(std430, binding = 0) readonly buffer Bytes { uint packedBytes[]; };
layout(std430, binding = 1) readonly buffer Indices { uint indices[]; };
#if GATHER_MODE == 0
layout(std430, binding = 2) writeonly buffer Output { float y[]; };
#else
layout(std430, binding = 2) writeonly buffer Output { uint labels[]; };
#endif
layout(location = 0) uniform uint count;
layout(location = 1) uniform uint firstRow;
layout(location = 2) uniform uint pixelsPerImage;
layout(location = 3) uniform float mean;
layout(location = 4) uniform float inverseStd;

uint byteAt(uint index) { return PACKED_BYTE(packedBytes, index); }

void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i >= count) return;
#if GATHER_MODE == 0
  uint row = i / pixelsPerImage;
  uint image = indices[firstRow + row];
  y[i] = (float(byteAt(image * pixelsPerImage + i - row * pixelsPerImage)) / 255.0 - mean) * inverseStd;
#else
  labels[i] = byteAt(indices[firstRow + i]);
#endif
}
