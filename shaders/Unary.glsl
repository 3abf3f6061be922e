// y[i] = pointwise(x[i]) over count floats (the function: Pointwise.glsl's POINTWISE).
// bindings: 0 x read, 1 y write
// uniforms: 0 count
layout(local_size_x = LOCAL_SIZE_X) in;

layout(std430, binding = 0) readonly buffer Source { float x[]; };
layout(std430, binding = 1) writeonly buffer Result { float y[]; };
layout(location = 0) uniform uint count;

void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i < count) y[i] = pointwise(x[i]);
}
