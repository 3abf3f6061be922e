// The second pass of a split-K GEMM: out[i] = Σ_z partial[z·count + i], written or added (accumulate);
// with BIAS_ACTIVATION (a dense layer's or a convolution's forward pass) out[i] = act(Σ + b[(i / plane) mod columns])
// (then POINTWISE, Pointwise.glsl included, unpooled; with RESIDUAL the element of binding 3 added before act),
// plane 1 for a dense layer's [rows × columns], OH·OW for a convolution's [N, OC, OH, OW]; with POOL as well
// (a convolution followed by 2×2 max pooling, stride 2, odd edges dropped) out is [N, OC, OH/2, OW/2] and each
// element the largest of its window's 4 sums, the slices being [N, OC, OH, OW]; with TAIL the slices
// are count + tailCount long and their last tailCount sums go to a second buffer (a convolution's bias gradient
// computed with its weight gradient).
// bindings: 0 partial [splits × count] read (TAIL: [splits × (count + tailCount)]), 1 out read-write,
//           2 b [columns] read (BIAS_ACTIVATION) or tail [tailCount] read-write (TAIL)
// uniforms: 0 count, 1 splits, 2 accumulate, 3 columns, 4 tailCount, 5 plane; POOL: 6 the convolution's output
// height OH, 7 its width OW, 8 the slice (N·OC·OH·OW); count is then out's length
// SUM_LANES (plain sums and TAIL): few sums of many slices (a weight gradient's hundreds), each shared by SUM_LANES
// invocations that add every SUM_LANES-th slice, then meet in shared memory: one invocation looping over every slice
// of a few thousand sums leaves most of the GPU idle.
#ifdef SUM_LANES
#if defined(BIAS_ACTIVATION) || defined(POOL)
#error SUM_LANES takes plain sums only
#endif
#define SUM_GROUP 128
#define SUM_ELEMENTS (SUM_GROUP / SUM_LANES)
layout(local_size_x = SUM_GROUP) in;
shared float laneSums[SUM_GROUP];
#else
layout(local_size_x = LOCAL_SIZE_X) in;
#endif

layout(std430, binding = 0) readonly buffer Partial { float partial[]; };
layout(std430, binding = 1) buffer Result { float result[]; };
layout(location = 0) uniform uint count;
layout(location = 1) uniform uint splits;
layout(location = 2) uniform uint accumulate;
layout(location = 3) uniform uint columns;
#ifdef BIAS_ACTIVATION
layout(std430, binding = 2) readonly buffer Bias { float b[]; };
layout(location = 5) uniform uint plane;
#endif
#ifdef RESIDUAL
layout(std430, binding = 3) readonly buffer Residual { float residual[]; };
#endif
#ifdef POOL
layout(location = 6) uniform uint height;
layout(location = 7) uniform uint width;
layout(location = 8) uniform uint slice;
#endif
#ifdef TAIL
layout(std430, binding = 2) buffer Tail { float tail[]; };
layout(location = 4) uniform uint tailCount;
#define SLICE (count + tailCount)
#else
#define SLICE count
#endif

void main() {
#ifdef SUM_LANES
  uint local = gl_LocalInvocationID.x, lane = local / uint(SUM_ELEMENTS);
  uint i = (gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x) * uint(SUM_ELEMENTS) + local % uint(SUM_ELEMENTS);
  float mine = 0.0;
  if (i < SLICE) {
    for (uint z = lane; z < splits; z += uint(SUM_LANES)) mine += partial[z * SLICE + i];
  }
  laneSums[local] = mine;
  memoryBarrierShared();
  barrier();
  if (lane != 0u || i >= SLICE) return;
  float sum = 0.0;
  for (uint other = 0u; other < uint(SUM_LANES); ++other) sum += laneSums[other * uint(SUM_ELEMENTS) + local];
#else
  uint i = LINEAR_INVOCATION_INDEX;
#ifdef POOL
  // The activation never falls as its argument rises, so the window's largest sum gives its largest output.
  if (i >= count) return;
  uint pooledWidth = width / 2u, pooledPlane = (height / 2u) * pooledWidth;
  uint image = i / pooledPlane, pixel = i % pooledPlane;
  uint first = image * height * width + 2u * (pixel / pooledWidth) * width + 2u * (pixel % pooledWidth);
  float best = -3.402823466e38;
  for (uint k = 0u; k < 4u; ++k) {
    uint at = first + (k / 2u) * width + k % 2u;
    float sum = 0.0;
    for (uint z = 0u; z < splits; ++z) sum += partial[z * slice + at];
    best = maxNaN(best, sum);
  }
  result[i] = activate(best + b[image % columns]);
  return;
#endif
  if (i >= SLICE) return;
  float sum = 0.0;
  for (uint z = 0u; z < splits; ++z) sum += partial[z * SLICE + i];
#endif
#ifdef BIAS_ACTIVATION
#ifdef RESIDUAL
  result[i] = finishOutput(sum + b[(i / plane) % columns] + residual[i]);
#else
  result[i] = finishOutput(sum + b[(i / plane) % columns]);
#endif
#else
#ifdef TAIL
  if (i >= count) {
    uint j = i - count;
    tail[j] = accumulate != 0u ? tail[j] + sum : sum;
    return;
  }
#endif
  result[i] = accumulate != 0u ? result[i] + sum : sum;
#endif
}
