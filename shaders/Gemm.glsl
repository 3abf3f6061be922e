// The register-blocked GEMM core shared by ForwardPass.glsl, BackwardPass.glsl and Conv2D.glsl:
// C[R×S] = Σ_t A(r,t)·B(t,s). The including shader defines gemmA(r, t), gemmB(t, s) and
// gemmStore(r, s, value) (with SPLIT_K: value is a partial sum for gemmPartialIndex) and calls
// gemmRun(R, S, T); the core keeps every access in bounds.
//
// Configuration (engine/ops/Gemm.cpp injects one of its named configurations):
//   GEMM_TILE_M × GEMM_TILE_N outputs per group, GEMM_TILE_K values of t per shared-memory stage (a multiple
//   of 4); GEMM_THREAD_M × GEMM_THREAD_N outputs per invocation (multiples of 4), so the group has
//   GEMM_INVOCATIONS = (TILE_M / THREAD_M)·(TILE_N / THREAD_N) invocations (a literal, as GL 4.3 requires).
//   GEMM_A_ALONG_ROWS / GEMM_B_ALONG_COLUMNS: the operand is contiguous along r (resp. s) rather than t.
//   GEMM_A_VEC4 / GEMM_B_VEC4: the shader also defines gemmA4(r, t) / gemmB4(t, s), the run of 4 along the
//   contiguous direction as one vec4 load. The op asks for it only when the operand's rows are a multiple of
//   4 floats long and 16-byte aligned, so a run that starts inside the matrix lies wholly inside it.
//   GEMM_A_GATHER (with GEMM_A_ALONG_ROWS): A is an implicit im2col matrix whose rows are fixed per invocation
//   and whose depth t moves: the shader describes the 4 rows of each run once per group,
//   gemmAGatherRows(r, R, base, y, x) (each row's base index and two coordinates; a row outside R gets
//   coordinates that no offset brings in range), and gemmAGather(base, y, x, t) gives the run at depth t.
//   GEMM_B_GATHER: the shader defines gemmBGather(s, t, S, tEnd), the run of 4 from (s, t) along t, zero outside
//   the matrix, computed together (an implicit im2col whose 4 neighbours share most of their index arithmetic).
//   GEMM_STORE_RUNS (with GEMM_A_ALONG_ROWS, R a multiple of 4): the shader defines gemmStoreRun(r, s, values)
//   instead of gemmStore, and receives C's rows r..r+3 of column s together (r a multiple of 4), so that it can
//   reduce them (a convolution's max pooling).
// Each operand is staged in shared memory in its own contiguous direction, in runs of 4 stored as vec4s (no
// transposition): along r (s) as tile[t][r / 4], along t as tile[r][t / 4]. An invocation reads what it
// needs as vec4s: along r, runs of 4 rows, so it owns THREAD_M / 4 runs of 4 consecutive rows strided by
// 4·(TILE_M / THREAD_M); along t, 4 values of t of single rows, so it owns THREAD_M rows strided by
// TILE_M / THREAD_M. Rows of a tile stored along t are padded by one vec4, which keeps the 8 invocations of a
// 128-bit shared load on distinct banks. Two stages alternate, so that the global loads of the next stage
// are in flight while this one is multiplied, with one barrier per stage.
// NVIDIA's compiler keeps the small fixed loops below as loops over local memory unless told to unroll them
// (dW at 1.2 instead of 42 TFLOP/s on the H100); the stage loop's trip count must then stay a run-time value,
// or it is unrolled whole.
#pragma optionNV(unroll all)

#define GEMM_THREADS_X (GEMM_TILE_N / GEMM_THREAD_N)
#define GEMM_THREADS_Y (GEMM_TILE_M / GEMM_THREAD_M)
// GL 4.3 takes only a literal for local_size_x: the op injects the invocation count as GEMM_INVOCATIONS.
#if GEMM_INVOCATIONS != GEMM_THREADS_X * GEMM_THREADS_Y
#error GEMM_INVOCATIONS must be (GEMM_TILE_M / GEMM_THREAD_M) * (GEMM_TILE_N / GEMM_THREAD_N)
#endif
#define GEMM_THREADS GEMM_INVOCATIONS
#define GEMM_A_RUNS (GEMM_TILE_M * GEMM_TILE_K / 4)
#define GEMM_B_RUNS (GEMM_TILE_N * GEMM_TILE_K / 4)
#define GEMM_A_FETCHES ((GEMM_A_RUNS + GEMM_THREADS - 1) / GEMM_THREADS)
#define GEMM_B_FETCHES ((GEMM_B_RUNS + GEMM_THREADS - 1) / GEMM_THREADS)
layout(local_size_x = GEMM_INVOCATIONS) in;

float gemmA(uint r, uint t);
float gemmB(uint t, uint s);
#ifdef GEMM_STORE_RUNS
#ifndef GEMM_A_ALONG_ROWS
#error GEMM_STORE_RUNS stores the runs of rows that GEMM_A_ALONG_ROWS gives each invocation
#endif
void gemmStoreRun(uint r, uint s, vec4 values);
#else
void gemmStore(uint r, uint s, float value);
#endif
#ifdef GEMM_A_VEC4
vec4 gemmA4(uint r, uint t);
#endif
#ifdef GEMM_B_VEC4
vec4 gemmB4(uint t, uint s);
#endif
#ifdef GEMM_A_GATHER
#ifndef GEMM_A_ALONG_ROWS
#error GEMM_A_GATHER gathers runs along the rows of A
#endif
void gemmAGatherRows(uint r, uint R, out ivec4 base, out ivec4 y, out ivec4 x);
vec4 gemmAGather(ivec4 base, ivec4 y, ivec4 x, uint t);
#endif
#ifdef GEMM_B_GATHER
vec4 gemmBGather(uint s, uint t, uint S, uint tEnd);
#endif

#ifdef GEMM_A_ALONG_ROWS
shared vec4 gemmTileA[2][GEMM_TILE_K][GEMM_TILE_M / 4];
#else
shared vec4 gemmTileA[2][GEMM_TILE_M][GEMM_TILE_K / 4 + 1];
#endif
#ifdef GEMM_B_ALONG_COLUMNS
shared vec4 gemmTileB[2][GEMM_TILE_K][GEMM_TILE_N / 4];
#else
shared vec4 gemmTileB[2][GEMM_TILE_N][GEMM_TILE_K / 4 + 1];
#endif

// Position of run q of a stage inside the tile: (r, t) of its first value, relative to the tile's corner.
uvec2 gemmRunA(uint q) {
#ifdef GEMM_A_ALONG_ROWS
  return uvec2((q % uint(GEMM_TILE_M / 4)) * 4u, q / uint(GEMM_TILE_M / 4));
#else
  return uvec2(q / uint(GEMM_TILE_K / 4), (q % uint(GEMM_TILE_K / 4)) * 4u);
#endif
}
uvec2 gemmRunB(uint q) {  // (s, t)
#ifdef GEMM_B_ALONG_COLUMNS
  return uvec2((q % uint(GEMM_TILE_N / 4)) * 4u, q / uint(GEMM_TILE_N / 4));
#else
  return uvec2(q / uint(GEMM_TILE_K / 4), (q % uint(GEMM_TILE_K / 4)) * 4u);
#endif
}

#ifndef GEMM_A_GATHER
// The 4 values of A from (r, t) along its contiguous direction, zero outside r < R, t < tEnd.
vec4 gemmFetchA(uint r, uint t, uint R, uint tEnd) {
  if (r >= R || t >= tEnd) return vec4(0.0);
#ifdef GEMM_A_VEC4
  return gemmA4(r, t);
#else
  vec4 v;
#ifdef GEMM_A_ALONG_ROWS
  for (uint i = 0u; i < 4u; ++i) v[i] = r + i < R ? gemmA(r + i, t) : 0.0;
#else
  for (uint i = 0u; i < 4u; ++i) v[i] = t + i < tEnd ? gemmA(r, t + i) : 0.0;
#endif
  return v;
#endif
}
#endif
vec4 gemmFetchB(uint s, uint t, uint S, uint tEnd) {
  if (s >= S || t >= tEnd) return vec4(0.0);
#ifdef GEMM_B_VEC4
  return gemmB4(t, s);
#elif defined(GEMM_B_GATHER)
  return gemmBGather(s, t, S, tEnd);
#else
  vec4 v;
#ifdef GEMM_B_ALONG_COLUMNS
  for (uint i = 0u; i < 4u; ++i) v[i] = s + i < S ? gemmB(t, s + i) : 0.0;
#else
  for (uint i = 0u; i < 4u; ++i) v[i] = t + i < tEnd ? gemmB(t + i, s) : 0.0;
#endif
  return v;
#endif
}

void gemmPutA(uint stage, uvec2 at, vec4 v) {
#ifdef GEMM_A_ALONG_ROWS
  gemmTileA[stage][at.y][at.x / 4u] = v;
#else
  gemmTileA[stage][at.x][at.y / 4u] = v;
#endif
}
void gemmPutB(uint stage, uvec2 at, vec4 v) {
#ifdef GEMM_B_ALONG_COLUMNS
  gemmTileB[stage][at.y][at.x / 4u] = v;
#else
  gemmTileB[stage][at.x][at.y / 4u] = v;
#endif
}

// Runs of the stage starting at t0 held in registers between the global load and the shared store.
vec4 gemmStagedA[GEMM_A_FETCHES];
vec4 gemmStagedB[GEMM_B_FETCHES];
#ifdef GEMM_A_GATHER
// The rows of this invocation's runs of A, the same in every stage: described once (gemmAGatherRows).
ivec4 gemmRowsBaseA[GEMM_A_FETCHES], gemmRowsYA[GEMM_A_FETCHES], gemmRowsXA[GEMM_A_FETCHES];

void gemmDescribeRows(uint R) {
  uint rowBase = gl_WorkGroupID.x * uint(GEMM_TILE_M);
  for (uint f = 0u; f < uint(GEMM_A_FETCHES); ++f) {
    uint q = gl_LocalInvocationIndex + f * uint(GEMM_THREADS);
    gemmAGatherRows(rowBase + gemmRunA(q).x, R, gemmRowsBaseA[f], gemmRowsYA[f], gemmRowsXA[f]);
  }
}
#endif

void gemmFetchStage(uint t0, uint R, uint S, uint tEnd) {
  uint local = gl_LocalInvocationIndex;
  uint rowBase = gl_WorkGroupID.x * uint(GEMM_TILE_M), columnBase = gl_WorkGroupID.y * uint(GEMM_TILE_N);
  for (uint f = 0u; f < uint(GEMM_A_FETCHES); ++f) {
    uint q = local + f * uint(GEMM_THREADS);
    if (GEMM_A_RUNS % GEMM_THREADS == 0 || q < uint(GEMM_A_RUNS)) {
      uvec2 at = gemmRunA(q);
#ifdef GEMM_A_GATHER
      gemmStagedA[f] = t0 + at.y < tEnd ? gemmAGather(gemmRowsBaseA[f], gemmRowsYA[f], gemmRowsXA[f], t0 + at.y) : vec4(0.0);
#else
      gemmStagedA[f] = gemmFetchA(rowBase + at.x, t0 + at.y, R, tEnd);
#endif
    }
  }
  for (uint f = 0u; f < uint(GEMM_B_FETCHES); ++f) {
    uint q = local + f * uint(GEMM_THREADS);
    if (GEMM_B_RUNS % GEMM_THREADS == 0 || q < uint(GEMM_B_RUNS)) {
      uvec2 at = gemmRunB(q);
      gemmStagedB[f] = gemmFetchB(columnBase + at.x, t0 + at.y, S, tEnd);
    }
  }
}

void gemmPutStage(uint stage) {
  uint local = gl_LocalInvocationIndex;
  for (uint f = 0u; f < uint(GEMM_A_FETCHES); ++f) {
    uint q = local + f * uint(GEMM_THREADS);
    if (GEMM_A_RUNS % GEMM_THREADS == 0 || q < uint(GEMM_A_RUNS)) gemmPutA(stage, gemmRunA(q), gemmStagedA[f]);
  }
  for (uint f = 0u; f < uint(GEMM_B_FETCHES); ++f) {
    uint q = local + f * uint(GEMM_THREADS);
    if (GEMM_B_RUNS % GEMM_THREADS == 0 || q < uint(GEMM_B_RUNS)) gemmPutB(stage, gemmRunB(q), gemmStagedB[f]);
  }
}

// Row i and column j of this invocation's block, relative to the tile's corner.
uint gemmRowInTile(uint i) {
  uint ty = gl_LocalInvocationIndex / uint(GEMM_THREADS_X);
#ifdef GEMM_A_ALONG_ROWS
  return (ty + (i / 4u) * uint(GEMM_THREADS_Y)) * 4u + i % 4u;
#else
  return ty + i * uint(GEMM_THREADS_Y);
#endif
}
uint gemmColumnInTile(uint j) {
  uint tx = gl_LocalInvocationIndex % uint(GEMM_THREADS_X);
#ifdef GEMM_B_ALONG_COLUMNS
  return (tx + (j / 4u) * uint(GEMM_THREADS_X)) * 4u + j % 4u;
#else
  return tx + j * uint(GEMM_THREADS_X);
#endif
}

// a[kk][i] = A(row i, t0 + kk) of this invocation for the 4 values of t from t0 in the stage.
void gemmReadA(uint stage, uint t0, out float a[4][GEMM_THREAD_M]) {
#ifdef GEMM_A_ALONG_ROWS
  uint ty = gl_LocalInvocationIndex / uint(GEMM_THREADS_X);
  for (uint kk = 0u; kk < 4u; ++kk)
    for (uint i = 0u; i < uint(GEMM_THREAD_M / 4); ++i) {
      vec4 run = gemmTileA[stage][t0 + kk][ty + i * uint(GEMM_THREADS_Y)];
      for (uint e = 0u; e < 4u; ++e) a[kk][i * 4u + e] = run[e];
    }
#else
  for (uint i = 0u; i < uint(GEMM_THREAD_M); ++i) {
    vec4 run = gemmTileA[stage][gemmRowInTile(i)][t0 / 4u];
    for (uint kk = 0u; kk < 4u; ++kk) a[kk][i] = run[kk];
  }
#endif
}
void gemmReadB(uint stage, uint t0, out float b[4][GEMM_THREAD_N]) {
#ifdef GEMM_B_ALONG_COLUMNS
  uint tx = gl_LocalInvocationIndex % uint(GEMM_THREADS_X);
  for (uint kk = 0u; kk < 4u; ++kk)
    for (uint j = 0u; j < uint(GEMM_THREAD_N / 4); ++j) {
      vec4 run = gemmTileB[stage][t0 + kk][tx + j * uint(GEMM_THREADS_X)];
      for (uint e = 0u; e < 4u; ++e) b[kk][j * 4u + e] = run[e];
    }
#else
  for (uint j = 0u; j < uint(GEMM_THREAD_N); ++j) {
    vec4 run = gemmTileB[stage][gemmColumnInTile(j)][t0 / 4u];
    for (uint kk = 0u; kk < 4u; ++kk) b[kk][j] = run[kk];
  }
#endif
}

// Sums over t in [tBegin, tEnd) only: with split-K each group along z takes one chunk of T.
void gemmTileRange(uint R, uint S, uint tBegin, uint tEnd, out float sum[GEMM_THREAD_M][GEMM_THREAD_N]) {
  for (uint i = 0u; i < uint(GEMM_THREAD_M); ++i)
    for (uint j = 0u; j < uint(GEMM_THREAD_N); ++j) sum[i][j] = 0.0;
  if (tBegin >= tEnd) return;
#ifdef GEMM_A_GATHER
  gemmDescribeRows(R);
#endif
  gemmFetchStage(tBegin, R, S, tEnd);
  gemmPutStage(0u);
  barrier();
  uint stage = 0u;
  for (uint t0 = tBegin; t0 < tEnd; t0 += uint(GEMM_TILE_K)) {
    bool more = t0 + uint(GEMM_TILE_K) < tEnd;
    if (more) gemmFetchStage(t0 + uint(GEMM_TILE_K), R, S, tEnd);
    for (uint k = 0u; k < uint(GEMM_TILE_K); k += 4u) {
      float a[4][GEMM_THREAD_M], b[4][GEMM_THREAD_N];
      gemmReadA(stage, k, a);
      gemmReadB(stage, k, b);
      for (uint kk = 0u; kk < 4u; ++kk)
        for (uint i = 0u; i < uint(GEMM_THREAD_M); ++i)
          for (uint j = 0u; j < uint(GEMM_THREAD_N); ++j) sum[i][j] = fma(a[kk][i], b[kk][j], sum[i][j]);
    }
    if (more) gemmPutStage(stage ^ 1u);
    barrier();
    stage ^= 1u;
  }
}

#ifdef SPLIT_K
// Split-K: group z sums t in [z·chunk, (z + 1)·chunk) and writes its partial C to slice z of a workspace;
// SplitSum.glsl adds the slices. Uniform location 15 holds the chunk (a multiple of GEMM_TILE_K).
layout(location = 15) uniform uint gemmSplitChunk;
uint gemmPartialIndex(uint r, uint s, uint R, uint S) { return gl_WorkGroupID.z * R * S + r * S + s; }
#endif

// This invocation's block of C: over all of T, or with SPLIT_K over this group's chunk of it.
void gemmSums(uint R, uint S, uint T, out float sum[GEMM_THREAD_M][GEMM_THREAD_N]) {
#ifdef SPLIT_K
  uint begin = gl_WorkGroupID.z * gemmSplitChunk;
  gemmTileRange(R, S, begin, min(T, begin + gemmSplitChunk), sum);
#else
  gemmTileRange(R, S, 0u, T, sum);
#endif
}

// Computes this invocation's block of C and stores its elements inside R × S.
void gemmRun(uint R, uint S, uint T) {
  float sum[GEMM_THREAD_M][GEMM_THREAD_N];
  gemmSums(R, S, T, sum);
  uint rowBase = gl_WorkGroupID.x * uint(GEMM_TILE_M), columnBase = gl_WorkGroupID.y * uint(GEMM_TILE_N);
#ifdef GEMM_STORE_RUNS
  // Rows i..i+3 of the block are consecutive rows of C from a multiple of 4: whole when the first is inside R.
  for (uint i = 0u; i < uint(GEMM_THREAD_M); i += 4u) {
    uint r = rowBase + gemmRowInTile(i);
    if (r >= R) continue;
    for (uint j = 0u; j < uint(GEMM_THREAD_N); ++j) {
      uint s = columnBase + gemmColumnInTile(j);
      if (s < S) gemmStoreRun(r, s, vec4(sum[i][j], sum[i + 1u][j], sum[i + 2u][j], sum[i + 3u][j]));
    }
  }
#else
  for (uint i = 0u; i < uint(GEMM_THREAD_M); ++i) {
    uint r = rowBase + gemmRowInTile(i);
    if (r >= R) continue;
    for (uint j = 0u; j < uint(GEMM_THREAD_N); ++j) {
      uint s = columnBase + gemmColumnInTile(j);
      if (s < S) gemmStore(r, s, sum[i][j]);
    }
  }
#endif
}
