// y = pointwise(x · scale[(i / plane) mod period] (+ shift[same])) over x [N, C, spatial...]: a BatchNormalization
// that no layer before it absorbs (scale and shift per channel: period C), or a squeeze-excite gate (scale per image
// and channel: period N·C, no shift). One pass instead of a broadcast multiply and add, with no per-axis index
// arithmetic. With VEC4 (the plane a multiple of 4, x and y 16-byte aligned) each invocation does 4 elements of one plane.
// bindings: 0 x read, 1 scale read, 2 shift read (SHIFT), 3 y write
// uniforms: 0 count (elements, vec4s with VEC4), 1 plane (the product of the spatial axes, in the same unit), 2 period
// defines: SHIFT, VEC4; POINTWISE and its constants from Pointwise.glsl
layout(local_size_x = LOCAL_SIZE_X) in;

#ifdef VEC4
#define ELEMENT vec4
#else
#define ELEMENT float
#endif
layout(std430, binding = 0) readonly buffer Input { ELEMENT x[]; };
layout(std430, binding = 1) readonly buffer Scale { float scale[]; };
#ifdef SHIFT
layout(std430, binding = 2) readonly buffer Shift { float shift[]; };
#endif
layout(std430, binding = 3) writeonly buffer Result { ELEMENT y[]; };
layout(location = 0) uniform uint count;
layout(location = 1) uniform uint plane;
layout(location = 2) uniform uint period;

void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i >= count) return;
  uint channel = (i / plane) % period;
#ifdef SHIFT
  ELEMENT v = fma(x[i], ELEMENT(scale[channel]), ELEMENT(shift[channel]));
#else
  ELEMENT v = x[i] * scale[channel];
#endif
#ifdef VEC4
  y[i] = vec4(pointwise(v.x), pointwise(v.y), pointwise(v.z), pointwise(v.w));
#else
  y[i] = pointwise(v);
#endif
}
