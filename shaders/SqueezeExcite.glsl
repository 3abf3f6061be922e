// A squeeze-excite block's gate, one work group per image: the mean of each channel over its plane, a 1x1
// convolution to R channels and SE_HIDDEN, a 1x1 convolution back to C channels and POINTWISE (Pointwise.glsl: the
// gate's function, hard sigmoid or sigmoid in torchvision's networks). The block's multiply stays with
// ChannelAffine.glsl. At a batch of a few images: one dispatch instead of a pooling and two GEMMs of one row each,
// which at a batch of one cost a dependent dispatch apiece (8-11 us on the H100) for a few microseconds of work.
// X [N, C, plane], W1 [R, C], b1 [R], W2 [C, R], b2 [C], gate [N, C].
// bindings: 0 X read, 1 W1 read, 2 b1 read, 3 gate write, 4 W2 read, 5 b2 read
// uniforms: 0 plane
// defines: SE_CHANNELS (C), SE_REDUCED (R), SE_HIDDEN (0 none, 1 ReLU, 2 SiLU), SE_POOL_LANES, SE_REDUCE_LANES,
// SE_EXPAND_LANES (invocations per sum in each stage: powers of two dividing the group), SE_VEC4 (the plane a
// multiple of 4 and X 16-byte aligned: X read as vec4s)
layout(local_size_x = GLNET_GROUP_SIZE) in;

#ifdef SE_VEC4
layout(std430, binding = 0) readonly buffer Input { vec4 x4[]; };
#else
layout(std430, binding = 0) readonly buffer Input { float x[]; };
#endif
layout(std430, binding = 1) readonly buffer ReduceWeight { float w1[]; };
layout(std430, binding = 2) readonly buffer ReduceBias { float b1[]; };
layout(std430, binding = 3) writeonly buffer Gate { float gate[]; };
layout(std430, binding = 4) readonly buffer ExpandWeight { float w2[]; };
layout(std430, binding = 5) readonly buffer ExpandBias { float b2[]; };
layout(location = 0) uniform uint plane;

#define C SE_CHANNELS
#define R SE_REDUCED
shared float means[C];
shared float hidden[R];
shared float partial[GLNET_GROUP_SIZE];

// Adds the partial sums of each run of `lanes` invocations into the run's first: afterwards partial[t] holds the
// total of the sum that invocation t took part in, for t a multiple of `lanes`. Every invocation calls it.
void addLanes(uint lanes) {
  uint t = gl_LocalInvocationIndex;
  for (uint width = lanes / 2u; width > 0u; width /= 2u) {
    memoryBarrierShared();
    barrier();
    if (t % lanes < width) partial[t] += partial[t + width];
  }
  memoryBarrierShared();
  barrier();
}

float hiddenFunction(float v) {
#if SE_HIDDEN == 1
  return max(v, 0.0);
#elif SE_HIDDEN == 2
  return v / (1.0 + exp(-v));
#else
  return v;
#endif
}

void main() {
  uint t = gl_LocalInvocationIndex, image = gl_WorkGroupID.x;
  // Each stage gives every sum `lanes` invocations that read it in strides (coalesced), in rounds of
  // GLNET_GROUP_SIZE / lanes sums; the loops' bounds are the same for every invocation, so barriers stay uniform.
  uint lane = t % uint(SE_POOL_LANES);
  for (uint first = 0u; first < uint(C); first += uint(GLNET_GROUP_SIZE / SE_POOL_LANES)) {
    uint c = first + t / uint(SE_POOL_LANES);
    float sum = 0.0;
    if (c < uint(C)) {
#ifdef SE_VEC4
      uint base = (image * uint(C) + c) * (plane / 4u);
      vec4 sums = vec4(0.0);
      for (uint j = lane; j < plane / 4u; j += uint(SE_POOL_LANES)) sums += x4[base + j];
      sum = (sums.x + sums.y) + (sums.z + sums.w);
#else
      uint base = (image * uint(C) + c) * plane;
      for (uint j = lane; j < plane; j += uint(SE_POOL_LANES)) sum += x[base + j];
#endif
    }
    partial[t] = sum;
    addLanes(uint(SE_POOL_LANES));
    if (lane == 0u && c < uint(C)) means[c] = partial[t] / float(plane);
  }
  memoryBarrierShared();
  barrier();
  lane = t % uint(SE_REDUCE_LANES);
  for (uint first = 0u; first < uint(R); first += uint(GLNET_GROUP_SIZE / SE_REDUCE_LANES)) {
    uint r = first + t / uint(SE_REDUCE_LANES);
    float sum = 0.0;
    if (r < uint(R)) {
      for (uint j = lane; j < uint(C); j += uint(SE_REDUCE_LANES)) sum = fma(w1[r * uint(C) + j], means[j], sum);
    }
    partial[t] = sum;
    addLanes(uint(SE_REDUCE_LANES));
    if (lane == 0u && r < uint(R)) hidden[r] = hiddenFunction(partial[t] + b1[r]);
  }
  memoryBarrierShared();
  barrier();
  lane = t % uint(SE_EXPAND_LANES);
  for (uint first = 0u; first < uint(C); first += uint(GLNET_GROUP_SIZE / SE_EXPAND_LANES)) {
    uint c = first + t / uint(SE_EXPAND_LANES);
    float sum = 0.0;
    if (c < uint(C)) {
      for (uint j = lane; j < uint(R); j += uint(SE_EXPAND_LANES)) sum = fma(w2[c * uint(R) + j], hidden[j], sum);
    }
    partial[t] = sum;
    addLanes(uint(SE_EXPAND_LANES));
    if (lane == 0u && c < uint(C)) gate[image * uint(C) + c] = pointwise(partial[t] + b2[c]);
  }
}
