// totals[slot] += Σ x[0, count), or with REDUCE_SQUARES totals[slot] = Σ x² (a gradient norm's square): one group of GLNET_GROUP_SIZE invocations, so the running total needs no atomics and
// the order of summation is fixed (deterministic from run to run).
// bindings: 0 x read, 1 totals read-write
// uniforms: 0 count, 1 slot
layout(local_size_x = GLNET_GROUP_SIZE) in;

layout(std430, binding = 0) readonly buffer Values { float x[]; };
layout(std430, binding = 1) buffer Totals { float totals[]; };
layout(location = 0) uniform uint count;
layout(location = 1) uniform uint slot;

shared float partial[GLNET_GROUP_SIZE];

void main() {
  uint local = gl_LocalInvocationID.x;
  float sum = 0.0;
#ifdef REDUCE_SQUARES
  for (uint i = local; i < count; i += uint(GLNET_GROUP_SIZE)) sum += x[i] * x[i];
#else
  for (uint i = local; i < count; i += uint(GLNET_GROUP_SIZE)) sum += x[i];
#endif
  partial[local] = sum;
  barrier();
  for (uint stride = uint(GLNET_GROUP_SIZE / 2); stride > 0u; stride >>= 1) {
    if (local < stride) partial[local] += partial[local + stride];
    barrier();
  }
#ifdef REDUCE_SQUARES
  if (local == 0u) totals[slot] = partial[0];
#else
  if (local == 0u) totals[slot] += partial[0];
#endif
}
