// The tiled GEMM core shared by ForwardPass.glsl, BackwardPass.glsl and Conv2D.glsl: C[R×S] = Σ_t A(r,t)·B(t,s),
// where the including shader defines gemmA(r, t), gemmB(t, s) and gemmStore(r, s, value) (with SPLIT_K:
// value is a partial sum for gemmPartialIndex) and calls gemmRun(R, S, T); the core keeps every access in bounds.
// A 16×16 group computes a 64×64 tile of C, each invocation a 4×4 block strided by 16 so that neighbouring
// invocations own neighbouring columns; A and B go through shared memory 16 values of t at a time.
// GEMM_A_ALONG_ROWS / GEMM_B_ALONG_COLUMNS: the operand is contiguous along r (resp. s) rather than t, so
// tiles load with neighbouring invocations reading neighbouring addresses either way.
#define GEMM_TILE 64
#define GEMM_TILE_K 16
#define GEMM_THREADS 16
#define GEMM_PER_THREAD 4
layout(local_size_x = GEMM_THREADS, local_size_y = GEMM_THREADS) in;

float gemmA(uint r, uint t);
float gemmB(uint t, uint s);
void gemmStore(uint r, uint s, float value);

shared float gemmTileA[GEMM_TILE_K][GEMM_TILE];
shared float gemmTileB[GEMM_TILE_K][GEMM_TILE];

// Row tiles run along x, whose group-count limit is the largest (2^31 − 1 on NVIDIA): rows are batch × pixels.
uint gemmRow(int i) { return gl_WorkGroupID.x * GEMM_TILE + gl_LocalInvocationID.y + GEMM_THREADS * uint(i); }
uint gemmColumn(int j) { return gl_WorkGroupID.y * GEMM_TILE + gl_LocalInvocationID.x + GEMM_THREADS * uint(j); }

// Sums over t in [tBegin, tEnd) only: with split-K each group along z takes one chunk of T.
void gemmTileRange(uint R, uint S, uint tBegin, uint tEnd, out float sum[GEMM_PER_THREAD][GEMM_PER_THREAD]) {
  uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
  uint local = ty * GEMM_THREADS + tx;
  uint rowBase = gl_WorkGroupID.x * GEMM_TILE, columnBase = gl_WorkGroupID.y * GEMM_TILE;
  for (int i = 0; i < GEMM_PER_THREAD; ++i)
    for (int j = 0; j < GEMM_PER_THREAD; ++j) sum[i][j] = 0.0;
  for (uint t0 = tBegin; t0 < tEnd; t0 += GEMM_TILE_K) {
    for (uint e = local; e < GEMM_TILE * GEMM_TILE_K; e += GEMM_THREADS * GEMM_THREADS) {
#ifdef GEMM_A_ALONG_ROWS
      uint r = e % GEMM_TILE, c = e / GEMM_TILE;
#else
      uint r = e / GEMM_TILE_K, c = e % GEMM_TILE_K;
#endif
      uint row = rowBase + r, t = t0 + c;
      gemmTileA[c][r] = (row < R && t < tEnd) ? gemmA(row, t) : 0.0;
#ifdef GEMM_B_ALONG_COLUMNS
      r = e % GEMM_TILE; c = e / GEMM_TILE;
#else
      r = e / GEMM_TILE_K; c = e % GEMM_TILE_K;
#endif
      uint column = columnBase + r;
      t = t0 + c;
      gemmTileB[c][r] = (column < S && t < tEnd) ? gemmB(t, column) : 0.0;
    }
    barrier();
    for (uint k = 0u; k < GEMM_TILE_K; ++k) {
      float a[GEMM_PER_THREAD], b[GEMM_PER_THREAD];
      for (int i = 0; i < GEMM_PER_THREAD; ++i) a[i] = gemmTileA[k][ty + GEMM_THREADS * uint(i)];
      for (int j = 0; j < GEMM_PER_THREAD; ++j) b[j] = gemmTileB[k][tx + GEMM_THREADS * uint(j)];
      for (int i = 0; i < GEMM_PER_THREAD; ++i)
        for (int j = 0; j < GEMM_PER_THREAD; ++j) sum[i][j] = fma(a[i], b[j], sum[i][j]);
    }
    barrier();
  }
}

#ifdef SPLIT_K
// Split-K: group z sums t in [z·chunk, (z + 1)·chunk) and writes its partial C to slice z of a workspace;
// SplitSum.glsl adds the slices. Uniform location 15 holds the chunk (a multiple of GEMM_TILE_K).
layout(location = 15) uniform uint gemmSplitChunk;
uint gemmPartialIndex(uint r, uint s, uint R, uint S) { return gl_WorkGroupID.z * R * S + r * S + s; }
#endif

// This invocation's block of C: over all of T, or with SPLIT_K over this group's chunk of it.
void gemmSums(uint R, uint S, uint T, out float sum[GEMM_PER_THREAD][GEMM_PER_THREAD]) {
#ifdef SPLIT_K
  uint begin = gl_WorkGroupID.z * gemmSplitChunk;
  gemmTileRange(R, S, begin, min(T, begin + gemmSplitChunk), sum);
#else
  gemmTileRange(R, S, 0u, T, sum);
#endif
}

// Computes this invocation's block of C and stores its elements inside R × S.
void gemmRun(uint R, uint S, uint T) {
  float sum[GEMM_PER_THREAD][GEMM_PER_THREAD];
  gemmSums(R, S, T, sum);
  for (int i = 0; i < GEMM_PER_THREAD; ++i) {
    uint r = gemmRow(i);
    if (r >= R) continue;
    for (int j = 0; j < GEMM_PER_THREAD; ++j) {
      uint s = gemmColumn(j);
      if (s < S) gemmStore(r, s, sum[i][j]);
    }
  }
}
