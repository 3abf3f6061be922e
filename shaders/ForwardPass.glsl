// The dense layer Y = act(X·Wᵀ + b) for a batch, as a tiled GEMM with bias and activation fused.
// X [M×K], W [N×K] (PyTorch's [out, in]), b [N], Y [M×N], all row-major float.
// bindings: 0 X read, 1 W read, 2 b read, 3 Y write
// uniforms: 0 M (rows), 1 N (outputs), 2 K (inputs)
// defines: ACTIVATION (see common.glsl)
// A 16×16 group computes a 64×64 tile of Y, each invocation a 4×4 block strided by 16 so that neighbouring
// invocations store neighbouring columns; X and W tiles go through shared memory 16 columns of K at a time.
#define TILE 64
#define TILE_K 16
#define THREADS 16
#define PER_THREAD 4
layout(local_size_x = THREADS, local_size_y = THREADS) in;

layout(std430, binding = 0) readonly buffer Input { float X[]; };
layout(std430, binding = 1) readonly buffer Weight { float W[]; };
layout(std430, binding = 2) readonly buffer Bias { float b[]; };
layout(std430, binding = 3) writeonly buffer Output { float Y[]; };
layout(location = 0) uniform uint M;
layout(location = 1) uniform uint N;
layout(location = 2) uniform uint K;

shared float tileX[TILE_K][TILE];
shared float tileW[TILE_K][TILE];

void main() {
  uint tx = gl_LocalInvocationID.x;
  uint ty = gl_LocalInvocationID.y;
  uint local = ty * THREADS + tx;
  uint rowBase = gl_WorkGroupID.y * TILE;
  uint columnBase = gl_WorkGroupID.x * TILE;

  float sum[PER_THREAD][PER_THREAD];
  for (int i = 0; i < PER_THREAD; ++i)
    for (int j = 0; j < PER_THREAD; ++j) sum[i][j] = 0.0;

  for (uint k0 = 0u; k0 < K; k0 += TILE_K) {
    for (uint e = local; e < TILE * TILE_K; e += THREADS * THREADS) {
      uint r = e / TILE_K, c = e % TILE_K;
      uint row = rowBase + r, column = columnBase + r, k = k0 + c;
      tileX[c][r] = (row < M && k < K) ? X[row * K + k] : 0.0;
      tileW[c][r] = (column < N && k < K) ? W[column * K + k] : 0.0;
    }
    barrier();
    for (uint kk = 0u; kk < TILE_K; ++kk) {
      float x[PER_THREAD], w[PER_THREAD];
      for (int i = 0; i < PER_THREAD; ++i) x[i] = tileX[kk][ty + THREADS * i];
      for (int j = 0; j < PER_THREAD; ++j) w[j] = tileW[kk][tx + THREADS * j];
      for (int i = 0; i < PER_THREAD; ++i)
        for (int j = 0; j < PER_THREAD; ++j) sum[i][j] = fma(x[i], w[j], sum[i][j]);
    }
    barrier();
  }

  for (int i = 0; i < PER_THREAD; ++i) {
    uint row = rowBase + ty + THREADS * i;
    if (row >= M) continue;
    for (int j = 0; j < PER_THREAD; ++j) {
      uint column = columnBase + tx + THREADS * j;
      if (column < N) Y[row * N + column] = activate(sum[i][j] + b[column]);
    }
  }
}
