// y = a·x + y, elementwise; the self-check of glnet_info and the dispatch tests.
// bindings: 0 x[n] read, 1 y[n] read-write
// uniforms: 0 a (float), 1 n (uint)
layout(local_size_x = LOCAL_SIZE_X) in;

layout(std430, binding = 0) readonly buffer XBuffer { float x[]; };
layout(std430, binding = 1) buffer YBuffer { float y[]; };
layout(location = 0) uniform float a;
layout(location = 1) uniform uint n;

void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i < n) y[i] = a * x[i] + y[i];
}
