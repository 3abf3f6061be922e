// y = (x/255 − mean) / std for uint8 pixels packed four to a uint (little-endian byte order).
// bindings: 0 pixels (uint8 × any, packed) read, 1 y[count] write
// uniforms: 0 count (uint), 1 firstPixel (uint, index of the byte that becomes y[0]), 2 mean, 3 inverseStd
layout(local_size_x = LOCAL_SIZE_X) in;

layout(std430, binding = 0) readonly buffer Pixels { uint packedPixels[]; };
layout(std430, binding = 1) writeonly buffer Output { float y[]; };
layout(location = 0) uniform uint count;
layout(location = 1) uniform uint firstPixel;
layout(location = 2) uniform float mean;
layout(location = 3) uniform float inverseStd;

void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i >= count) return;
  y[i] = (float(PACKED_BYTE(packedPixels, firstPixel + i)) / 255.0 - mean) * inverseStd;
}
