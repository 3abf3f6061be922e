// The second pass of a split-K GEMM: out[i] = Σ_z partial[z·count + i], written or added (accumulate).
// bindings: 0 partial [splits × count] read, 1 out read-write
// uniforms: 0 count, 1 splits, 2 accumulate
layout(local_size_x = LOCAL_SIZE_X) in;

layout(std430, binding = 0) readonly buffer Partial { float partial[]; };
layout(std430, binding = 1) buffer Result { float result[]; };
layout(location = 0) uniform uint count;
layout(location = 1) uniform uint splits;
layout(location = 2) uniform uint accumulate;

void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i >= count) return;
  float sum = 0.0;
  for (uint z = 0u; z < splits; ++z) sum += partial[z * count + i];
  result[i] = accumulate != 0u ? result[i] + sum : sum;
}
