// A 2-D convolution computed directly, one invocation per output: any stride, dilation, padding and groups (depthwise
// included), with the bias and a pointwise function fused (POINTWISE, Pointwise.glsl). Convolutions with
// stride 1, one group and even padding take Conv2D.glsl's implicit GEMM instead.
// bindings: 0 X [N, C, H, W], 1 W [OC, C/groups, KH, KW], 2 b [OC], 3 Y [N, OC, OH, OW]
// uniforms: 0 N
// defines (uint literals): CONV_CHANNELS, CONV_HEIGHT, CONV_WIDTH, CONV_OUT_CHANNELS, CONV_OUT_HEIGHT,
// CONV_OUT_WIDTH, CONV_KERNEL_HEIGHT, CONV_KERNEL_WIDTH, CONV_GROUPS; (int literals) CONV_STRIDE_H,
// CONV_STRIDE_W, CONV_DILATION_H, CONV_DILATION_W, CONV_PAD_TOP, CONV_PAD_LEFT (named by GroupedConvGeometry.glsl)
// With TILE_WIDTH (a depthwise convolution, groups = C = OC, stride 1): one work group per tile of TILE_HEIGHT ×
// TILE_WIDTH outputs of TILE_PLANES consecutive planes (n, c), which first copies the tile's input windows (zeros
// outside the image) into shared memory with reads along rows; each invocation then computes a run of TILE_RUN
// outputs along a row of one plane from there (1 or 4; with 4, each window value a run needs is read once for its 4
// sums). Every input element is read from memory once per tile instead of KH·KW times through the cache. Defines
// (int literals) TILE_HEIGHT, TILE_WIDTH (a multiple of TILE_RUN), TILE_RUN, TILE_PLANES, TILE_INVOCATIONS
// (TILE_PLANES · TILE_HEIGHT · TILE_WIDTH / TILE_RUN: GL 4.3 takes a literal for the group size); STORE_VEC4 with
// runs of 4 where OW is a multiple of 4 and Y's binding 16-byte aligned (each run one vec4 store). The groups form a
// 1-D grid (the plan may fold it into x and y), the tiles of the first planes first.
#ifdef TILE_WIDTH
layout(local_size_x = TILE_INVOCATIONS) in;
#else
layout(local_size_x = LOCAL_SIZE_X) in;
#endif

layout(std430, binding = 0) readonly buffer Input { float x[]; };
layout(std430, binding = 1) readonly buffer Weight { float w[]; };
layout(std430, binding = 2) readonly buffer Bias { float b[]; };
#ifdef STORE_VEC4
layout(std430, binding = 3) writeonly buffer Result { vec4 y[]; };
#else
layout(std430, binding = 3) writeonly buffer Result { float y[]; };
#endif
layout(location = 0) uniform uint N;

#ifdef TILE_WIDTH
#define TILES_ACROSS ((OW + uint(TILE_WIDTH) - 1u) / uint(TILE_WIDTH))
#define TILES_DOWN ((OH + uint(TILE_HEIGHT) - 1u) / uint(TILE_HEIGHT))
// Stride 1: a tile's window is the tile grown by the dilated kernel.
#define WINDOW_HEIGHT (TILE_HEIGHT + (int(KH) - 1) * CONV_DILATION_H)
#define WINDOW_WIDTH (TILE_WIDTH + (int(KW) - 1) * CONV_DILATION_W)

#define WINDOW_SIZE (WINDOW_HEIGHT * WINDOW_WIDTH)
#define PLANE_INVOCATIONS (TILE_INVOCATIONS / TILE_PLANES)
#define PLANES (N * C)

shared float window[TILE_PLANES * WINDOW_SIZE];

void main() {
  uint group = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  // Whole groups leave together: the barrier below needs every invocation of the group.
  uint planeGroups = (PLANES + uint(TILE_PLANES) - 1u) / uint(TILE_PLANES);
  if (group >= planeGroups * TILES_ACROSS * TILES_DOWN) return;
  uint firstPlane = (group / (TILES_ACROSS * TILES_DOWN)) * uint(TILE_PLANES), tile = group % (TILES_ACROSS * TILES_DOWN);
  uint local = gl_LocalInvocationID.x;
  int firstRow = int((tile / TILES_ACROSS) * uint(TILE_HEIGHT)), firstColumn = int((tile % TILES_ACROSS) * uint(TILE_WIDTH));
  int top = firstRow - CONV_PAD_TOP, left = firstColumn - CONV_PAD_LEFT;
  for (uint k = local; k < uint(TILE_PLANES * WINDOW_SIZE); k += uint(TILE_INVOCATIONS)) {
    // One plane per group (the usual case) needs neither the division nor the check: constants the compiler folds.
    uint plane = firstPlane + (TILE_PLANES == 1 ? 0u : k / uint(WINDOW_SIZE)), at = TILE_PLANES == 1 ? k : k % uint(WINDOW_SIZE);
    int ih = top + int(at / uint(WINDOW_WIDTH)), iw = left + int(at % uint(WINDOW_WIDTH));
    bool inside = (TILE_PLANES == 1 || plane < PLANES) && ih >= 0 && ih < int(H) && iw >= 0 && iw < int(W);
    window[k] = inside ? x[plane * H * W + uint(ih) * W + uint(iw)] : 0.0;
  }
  memoryBarrierShared();
  barrier();
  int ownPlane = TILE_PLANES == 1 ? 0 : int(local) / PLANE_INVOCATIONS, own = TILE_PLANES == 1 ? int(local) : int(local) % PLANE_INVOCATIONS;
  int row = own / (TILE_WIDTH / TILE_RUN), column = (own % (TILE_WIDTH / TILE_RUN)) * TILE_RUN;
  uint plane = firstPlane + uint(ownPlane), channel = plane % C;
  uint oh = uint(firstRow + row), ow = uint(firstColumn + column);
  if ((TILE_PLANES > 1 && plane >= PLANES) || oh >= OH || ow >= OW) return;
  float sum[TILE_RUN];
  for (int r = 0; r < TILE_RUN; ++r) sum[r] = b[channel];
  uint weights = channel * KH * KW;
  for (int kh = 0; kh < int(KH); ++kh) {
    int at = ownPlane * WINDOW_SIZE + (row + kh * CONV_DILATION_H) * WINDOW_WIDTH + column;
    for (int kw = 0; kw < int(KW); ++kw) {
      float weight = w[weights + uint(kh) * KW + uint(kw)];
      for (int r = 0; r < TILE_RUN; ++r) sum[r] = fma(window[at + kw * CONV_DILATION_W + r], weight, sum[r]);
    }
  }
  uint first = plane * OH * OW + oh * OW + ow;
#ifdef STORE_VEC4
  y[first / 4u] = vec4(pointwise(sum[0]), pointwise(sum[1]), pointwise(sum[2]), pointwise(sum[3]));
#else
  for (int r = 0; r < TILE_RUN && ow + uint(r) < OW; ++r) y[first + uint(r)] = pointwise(sum[r]);
#endif
}
#else
void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i >= N * OC * OH * OW) return;
  uint ow = i % OW, oh = (i / OW) % OH, oc = (i / (OW * OH)) % OC, n = i / (OW * OH * OC);
  uint firstChannel = (oc / GROUP_OUT) * GROUP_IN;
  int top = int(oh) * CONV_STRIDE_H - CONV_PAD_TOP, left = int(ow) * CONV_STRIDE_W - CONV_PAD_LEFT;
  float sum = b[oc];
  for (uint c = 0u; c < GROUP_IN; ++c) {
    uint plane = (n * C + firstChannel + c) * H * W, weights = (oc * GROUP_IN + c) * KH * KW;
    for (uint kh = 0u; kh < KH; ++kh) {
      int ih = top + int(kh) * CONV_DILATION_H;
      if (ih < 0 || ih >= int(H)) continue;
      for (uint kw = 0u; kw < KW; ++kw) {
        int iw = left + int(kw) * CONV_DILATION_W;
        if (iw >= 0 && iw < int(W)) sum = fma(x[plane + uint(ih) * W + uint(iw)], w[weights + kh * KW + kw], sum);
      }
    }
  }
  y[i] = pointwise(sum);
}
#endif
