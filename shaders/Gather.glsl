// A training batch gathered from a GPU-resident dataset through a shuffled index list:
//   GATHER_MODE_IMAGES: y[r·P + c] = (pixel c of image indices[firstRow + r]) / 255, then (− mean[k])·inverseStd[k]
//                 for the channel plane k the pixel is in
//   GATHER_MODE_LABELS: labels[r] = label byte of image indices[firstRow + r]
//   GATHER_MODE_TOKENS: y[r·P + c] = token id c of sequence indices[firstRow + r] as a float, the ids uint32 words
//   GATHER_MODE_AUGMENTED: images as GATHER_MODE_IMAGES, each [C, H, W] image shifted by (dx, dy) with zeros (pixel 0) where
//                 the shift uncovers it, after a horizontal flip: augment[firstRow + r] packs dx + 128 (bits 0-7),
//                 dy + 128 (bits 8-15) and the flip (bit 16), drawn on the host for each epoch from the seed
// bindings: 0 bytes (uint8 pixels or labels, packed four to a uint; uint32 token ids) read, 1 indices [uint] read, 2 out write,
//   3 augment [uint] read (AUGMENTED)
// uniforms: 0 count (floats in IMAGES, AUGMENTED and TOKENS, rows in LABELS), 1 firstRow, 2 P (pixels per image), 3 planeSize
//   (pixels per channel plane), 4-7 mean[4], 8-11 inverseStd[4] (one channel: the four the same), 12 H, 13 W (AUGMENTED)
layout(local_size_x = LOCAL_SIZE_X) in;

layout(std430, binding = 0) readonly buffer Bytes { uint packedBytes[]; };
layout(std430, binding = 1) readonly buffer Indices { uint indices[]; };
#if GATHER_MODE != GATHER_MODE_LABELS
layout(std430, binding = 2) writeonly buffer Output { float y[]; };
#else
layout(std430, binding = 2) writeonly buffer Output { uint labels[]; };
#endif
layout(location = 0) uniform uint count;
layout(location = 1) uniform uint firstRow;
layout(location = 2) uniform uint pixelsPerImage;
#if GATHER_MODE == GATHER_MODE_IMAGES || GATHER_MODE == GATHER_MODE_AUGMENTED
layout(location = 3) uniform uint planeSize;
layout(location = 4) uniform float mean[4];
layout(location = 8) uniform float inverseStd[4];

float scaled(uint pixel, uint within) {
  uint channel = min(within / planeSize, 3u);
  return (float(pixel) / 255.0 - mean[channel]) * inverseStd[channel];
}
#endif
#if GATHER_MODE == GATHER_MODE_AUGMENTED
layout(std430, binding = 3) readonly buffer Augment { uint augment[]; };
layout(location = 12) uniform uint H;
layout(location = 13) uniform uint W;
#endif

uint byteAt(uint index) { return PACKED_BYTE(packedBytes, index); }

void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i >= count) return;
#if GATHER_MODE == GATHER_MODE_IMAGES
  uint row = i / pixelsPerImage;
  uint image = indices[firstRow + row];
  uint within = i - row * pixelsPerImage;
  y[i] = scaled(byteAt(image * pixelsPerImage + within), within);
#elif GATHER_MODE == GATHER_MODE_TOKENS
  uint row = i / pixelsPerImage;
  y[i] = float(packedBytes[indices[firstRow + row] * pixelsPerImage + i - row * pixelsPerImage]);
#elif GATHER_MODE == GATHER_MODE_AUGMENTED
  uint row = i / pixelsPerImage, within = i - row * pixelsPerImage;
  uint image = indices[firstRow + row], how = augment[firstRow + row];
  uint plane = within / (H * W), x = within % W, yAt = (within / W) % H;
  int sourceX = int((how & 0x10000u) != 0u ? W - 1u - x : x) - (int(how & 0xffu) - 128);
  int sourceY = int(yAt) - (int((how >> 8) & 0xffu) - 128);
  bool inside = sourceX >= 0 && sourceY >= 0 && sourceX < int(W) && sourceY < int(H);
  uint pixel = inside ? byteAt(image * pixelsPerImage + (plane * H + uint(sourceY)) * W + uint(sourceX)) : 0u;
  y[i] = scaled(pixel, within);
#else
  labels[i] = byteAt(indices[firstRow + i]);
#endif
}
