// Fused scaled dot-product attention (graph/AttentionOps.cpp): O = softmax(scale·Q·Kᵀ + mask)·V for every (batch,
// head), Q [Sq, D], K [Sk, D], V [Sk, Dv], O [Sq, Dv], each operand at any strides of its 4 axes (batch, head,
// sequence, feature), so that transposed and head-split tensors are read in place. The Sq × Sk scores never reach
// memory: a group takes BLOCK_M queries (scale·Q staged in shared memory once) and walks the keys BLOCK_N at a time,
// K's tile then V's tile staged in one shared array, with FlashAttention's online softmax (each row's running maximum
// and exponent sum, the accumulated output rescaled when the maximum grows). fp32 throughout. Every invocation takes
// part in the softmax: it keeps its own scores in registers, a row's maximum is joined from the THREADS_COL
// invocations that share the row through shared memory, and each of them sums the row's weights as it reads them for
// the product with V (one invocation per row walking the tile left most of the group waiting at the next barrier).
//   Keys hidden by CAUSAL (key j > query i + Sk − Sq, a query block at the end of a cache) are left out, as
//   flash attention does (they are never read); a key the mask makes −inf gets weight 0 (0·V: a NaN in V there still
//   reaches the output, as through PyTorch's unfused softmax and product). A row with every key hidden or −inf
//   outputs 0 (PyTorch's exports write Where(IsNaN(softmax), 0, softmax)); a finite very negative mask (finfo.min)
//   is plain softmax. NaN in gives NaN out (maxNaN: GLSL's max may drop it).
// Group (x: query block, y: head, z: batch), 128 invocations (what OpenGL ES guarantees): THREADS_ROW × THREADS_COL,
// invocation (ty, tx) owning queries ty + i·THREADS_ROW (i < TM), keys tx + j·THREADS_COL of each tile (j < TN) and
// output features in runs of 4 from 4·(tx + j·THREADS_COL) (j < TD4). Q, K and V are staged as runs of 4 features
// (vec4, zero past D or Dv), rows padded by one vec4, so that the products read 128 bits per shared load and the
// THREADS_COL rows or runs a warp's load touches lie on distinct banks (NVIDIA's shared memory serves one 128-byte
// wavefront per cycle, its FMA units 4 warp instructions: scalar loads left the products load-bound).
// With SPLIT_KEYS (few groups over long key ranges: a decode step's one query), group z = batch·splits + split takes
// only keys [split·keysPerSplit, (split + 1)·keysPerSplit) and writes its unnormalized output and each row's maximum
// and sum to the workspace (partial [splits, B, H, Sq, Dv], then stats [splits, B, H, Sq, 2]); AttentionCombine.glsl
// joins the splits.
// bindings: 0 Q read, 1 K read, 2 V read, 3 mask read (HAS_MASK), 4 O write (5 the workspace with SPLIT_KEYS)
// uniforms: 0 Sq, 1 Sk, 2 scale, 3 the causal offset Sk − Sq (int, CAUSAL), 4-7 Q's strides (batch, head, sequence,
// feature; elements), 8-11 K's, 12-15 V's, 16-19 O's, 20-23 the mask's (batch, head, query, key; 0 along
// broadcast axes; HAS_MASK), 24-26 Q's, K's and V's first elements, 27 keysPerSplit (a multiple of BLOCK_N) and
// 28 splits (SPLIT_KEYS), 29 query heads per K and V head (grouped-query attention; 1: as many), 30 the mask's batch
// entries, which batch b reads at b mod this (NumPy broadcast: 1 or B; Swin's windows: their count; HAS_MASK)
// defines: HEAD_D (D), HEAD_DV (Dv), KV_RUNS (the larger of ⌈D/4⌉ and ⌈Dv/4⌉), BLOCK_M (a multiple of THREADS_ROW), BLOCK_N
// (a multiple of THREADS_COL), CAUSAL, HAS_MASK, and Q_ALONG_SEQUENCE / K_ALONG_SEQUENCE / V_ALONG_SEQUENCE where the
// operand's sequence axis has the smaller stride (K given transposed): the order of the global loads, so that
// neighbouring invocations read neighbouring floats.
// NVIDIA's compiler keeps the small fixed loops as loops over local memory unless told to unroll them (see Gemm.glsl);
// the tile loop's trip count is a run-time value.
#pragma optionNV(unroll all)

#define THREADS_ROW 16
#define THREADS_COL 8
#define TM (BLOCK_M / THREADS_ROW)
#define TN (BLOCK_N / THREADS_COL)
#define D_RUNS ((HEAD_D + 3) / 4)
#define DV_RUNS ((HEAD_DV + 3) / 4)
#define TD4 ((DV_RUNS + THREADS_COL - 1) / THREADS_COL)
#if BLOCK_M % THREADS_ROW != 0 || BLOCK_N % THREADS_COL != 0
#error BLOCK_M must be a multiple of THREADS_ROW and BLOCK_N one of THREADS_COL
#endif
layout(local_size_x = 128) in;

layout(std430, binding = 0) readonly buffer Queries { float Q[]; };
layout(std430, binding = 1) readonly buffer Keys { float K[]; };
layout(std430, binding = 2) readonly buffer Values { float V[]; };
#ifdef HAS_MASK
layout(std430, binding = 3) readonly buffer Mask { float mask[]; };
#endif
#ifdef SPLIT_KEYS
layout(std430, binding = 5) writeonly buffer Workspace { float partial[]; };
#else
layout(std430, binding = 4) writeonly buffer Output { float O[]; };
#endif
layout(location = 0) uniform uint Sq;
layout(location = 1) uniform uint Sk;
layout(location = 2) uniform float scale;
#ifdef CAUSAL
layout(location = 3) uniform int causalOffset;
#endif
layout(location = 4) uniform uint qStrides[4];
layout(location = 8) uniform uint kStrides[4];
layout(location = 12) uniform uint vStrides[4];
layout(location = 16) uniform uint oStrides[4];
#ifdef HAS_MASK
layout(location = 20) uniform uint maskStrides[4];
#endif
layout(location = 24) uniform uint offsets[3];
layout(location = 29) uniform uint headsPerKvHead;
#ifdef HAS_MASK
layout(location = 30) uniform uint maskBatches;
#endif
#ifdef SPLIT_KEYS
layout(location = 27) uniform uint keysPerSplit;
layout(location = 28) uniform uint splits;
#endif

shared vec4 queries[BLOCK_M][D_RUNS + 1];  // scale·Q of the group's queries
shared vec4 keysValues[BLOCK_N][KV_RUNS + 1];  // the tile's K, then its V
// Per row: the tile's weights exp(score − running maximum) in runs of 4 keys (the product with V reads 4 keys' weights
// per shared load), then 2 runs holding each invocation's maximum over its keys of the tile (the THREADS_COL sharing
// the row), read while other invocations write the weights. 2 runs past the weights also put the rows that a warp's
// writes touch on distinct banks.
#if THREADS_COL != 8
#error the partial maxima take 2 runs of 4 per row
#endif
#define MAXIMA_RUN uint(BLOCK_N / 4)
shared vec4 weights[BLOCK_M][BLOCK_N / 4 + 2];

#define NEGATIVE_INFINITY uintBitsToFloat(0xff800000u)

// Run (row, run) of `runs` runs of 4 features per row, for the q-th of `rows` × `runs` visited by the group's
// invocations in turn: consecutive invocations take consecutive runs of a row, or with `alongSequence` (the operand
// contiguous along its sequence) the same run of consecutive rows, so that their global loads are coalesced.
#define RUN_AT(q, rows, runs, alongSequence, row, run) \
  if (alongSequence) {                                 \
    row = (q) % uint(rows);                            \
    run = (q) / uint(rows);                            \
  } else {                                             \
    row = (q) / uint(runs);                            \
    run = (q) % uint(runs);                            \
  }
// The 4 features from 4·run of row `row` (of `rows` present) of an operand, zero outside; a macro because a buffer's
// array cannot be passed to a function.
#define LOAD_RUN(buffer, base, strides, row, rows, run, width, result)                                    \
  result = vec4(0.0);                                                                                     \
  if ((row) < (rows)) {                                                                                   \
    uint at = (base) + (row) * strides[2] + 4u * (run) * strides[3];                                     \
    for (uint e = 0u; e < 4u; ++e) result[e] = 4u * (run) + e < uint(width) ? buffer[at + e * strides[3]] : 0.0; \
  }

#ifdef Q_ALONG_SEQUENCE
const bool qAlongSequence = true;
#else
const bool qAlongSequence = false;
#endif
#ifdef K_ALONG_SEQUENCE
const bool kAlongSequence = true;
#else
const bool kAlongSequence = false;
#endif
#ifdef V_ALONG_SEQUENCE
const bool vAlongSequence = true;
#else
const bool vAlongSequence = false;
#endif

// The output accumulated over the keys so far, unnormalized: this invocation's rows and runs of features; and per row
// the running maximum and exponent sum, the same in each invocation sharing the row.
vec4 o[TM][TD4];
float rowMax[TM], rowSum[TM];

// Adds the weighted V of the staged tile (the weights in `weights`) to o, and the weights to rowSum (in the same order
// in every invocation sharing a row); `guarded` (a constant in each call, so that
// each is compiled on its own): keys hidden by CAUSAL add nothing, not 0·V.
void accumulateTile(bool guarded, uint k0, uint q0, uint ty, uint tx) {
  for (uint c4 = 0u; c4 < uint(BLOCK_N / 4); ++c4) {
    vec4 p[TM];
    for (uint i = 0u; i < uint(TM); ++i) {
      p[i] = weights[ty + i * uint(THREADS_ROW)][c4];
      rowSum[i] += (p[i].x + p[i].y) + (p[i].z + p[i].w);
    }
    for (uint e = 0u; e < 4u; ++e) {
      uint c = 4u * c4 + e;
      vec4 v[TD4];
      for (uint j = 0u; j < uint(TD4); ++j) {
        uint run = tx + j * uint(THREADS_COL);
        v[j] = DV_RUNS % THREADS_COL == 0 || run < uint(DV_RUNS) ? keysValues[c][run] : vec4(0.0);
      }
      for (uint i = 0u; i < uint(TM); ++i) {
        bool hidden = false;
#ifdef CAUSAL
        hidden = guarded && int(k0 + c) > int(q0 + ty + i * uint(THREADS_ROW)) + causalOffset;
#endif
        for (uint j = 0u; j < uint(TD4); ++j) o[i][j] = hidden ? o[i][j] : fma(vec4(p[i][e]), v[j], o[i][j]);
      }
    }
  }
}

// The runs of K's or V's tile from key `first` that this invocation stages (zero past Sk), fetched into registers a
// phase before they are stored to keysValues, so that their global loads' latency passes while the group computes
// (V's during the scores, the next tile's K during the product with V) rather than at a barrier; macros because a
// buffer's array cannot be passed to a function.
#define K_FETCHES ((BLOCK_N * D_RUNS + 127) / 128)
#define V_FETCHES ((BLOCK_N * DV_RUNS + 127) / 128)
#define FETCH_TILE(buffer, base, strides, runs, width, alongSequence, fetches, into, first) \
  for (uint l = 0u; l < uint(fetches); ++l) {                                               \
    uint q = local + 128u * l, c, run;                                                      \
    RUN_AT(q, BLOCK_N, runs, alongSequence, c, run)                                         \
    into[l] = vec4(0.0);                                                                    \
    if (q < uint(BLOCK_N * (runs))) {                                                       \
      LOAD_RUN(buffer, base, strides, (first) + c, Sk, run, width, into[l])                 \
    }                                                                                       \
  }
#define STORE_TILE(runs, alongSequence, fetches, from)   \
  for (uint l = 0u; l < uint(fetches); ++l) {            \
    uint q = local + 128u * l, c, run;                   \
    RUN_AT(q, BLOCK_N, runs, alongSequence, c, run)      \
    if (q < uint(BLOCK_N * (runs))) keysValues[c][run] = from[l]; \
  }

void main() {
  uint local = gl_LocalInvocationIndex;
  uint ty = local / uint(THREADS_COL), tx = local % uint(THREADS_COL);
  uint head = gl_WorkGroupID.y, batch = gl_WorkGroupID.z;
#ifdef SPLIT_KEYS
  uint split = batch % splits;
  batch /= splits;
#endif
  uint q0 = gl_WorkGroupID.x * uint(BLOCK_M);
  uint qBase = offsets[0] + batch * qStrides[0] + head * qStrides[1];
  uint kBase = offsets[1] + batch * kStrides[0] + head / headsPerKvHead * kStrides[1];
  uint vBase = offsets[2] + batch * vStrides[0] + head / headsPerKvHead * vStrides[1];
#ifndef SPLIT_KEYS
  uint oBase = batch * oStrides[0] + head * oStrides[1];
#endif
#ifdef HAS_MASK
  uint maskBase = batch % maskBatches * maskStrides[0] + head * maskStrides[1];
#endif

  for (uint q = local; q < uint(BLOCK_M * D_RUNS); q += 128u) {
    uint r, run;
    RUN_AT(q, BLOCK_M, D_RUNS, qAlongSequence, r, run)
    vec4 v;
    LOAD_RUN(Q, qBase, qStrides, q0 + r, Sq, run, HEAD_D, v)
    queries[r][run] = scale * v;
  }
  memoryBarrierShared();
  barrier();

  // The keys any query of the group sees: up to the last one's causal limit.
  uint keyBegin = 0u, keyEnd = Sk;
#ifdef CAUSAL
  keyEnd = uint(clamp(int(min(Sq, q0 + uint(BLOCK_M))) + causalOffset, 0, int(Sk)));
#endif
#ifdef SPLIT_KEYS
  keyBegin = split * keysPerSplit;
  keyEnd = min(keyEnd, keyBegin + keysPerSplit);
#endif

  for (uint i = 0u; i < uint(TM); ++i) {
    rowMax[i] = NEGATIVE_INFINITY;
    rowSum[i] = 0.0;
    for (uint j = 0u; j < uint(TD4); ++j) o[i][j] = vec4(0.0);
  }

  vec4 kFetched[K_FETCHES], vFetched[V_FETCHES];
  FETCH_TILE(K, kBase, kStrides, D_RUNS, HEAD_D, kAlongSequence, K_FETCHES, kFetched, keyBegin)
  for (uint k0 = keyBegin; k0 < keyEnd; k0 += uint(BLOCK_N)) {
    STORE_TILE(D_RUNS, kAlongSequence, K_FETCHES, kFetched)
    memoryBarrierShared();
    barrier();
    FETCH_TILE(V, vBase, vStrides, DV_RUNS, HEAD_DV, vAlongSequence, V_FETCHES, vFetched, k0)

    float s[TM][TN];
    for (uint i = 0u; i < uint(TM); ++i)
      for (uint j = 0u; j < uint(TN); ++j) s[i][j] = 0.0;
    for (uint run = 0u; run < uint(D_RUNS); ++run) {
      vec4 a[TM], b[TN];
      for (uint i = 0u; i < uint(TM); ++i) a[i] = queries[ty + i * uint(THREADS_ROW)][run];
      for (uint j = 0u; j < uint(TN); ++j) b[j] = keysValues[tx + j * uint(THREADS_COL)][run];
      for (uint i = 0u; i < uint(TM); ++i)
        for (uint j = 0u; j < uint(TN); ++j)
          s[i][j] = fma(a[i].w, b[j].w, fma(a[i].z, b[j].z, fma(a[i].y, b[j].y, fma(a[i].x, b[j].x, s[i][j]))));
    }
    for (uint i = 0u; i < uint(TM); ++i) {
      uint r = ty + i * uint(THREADS_ROW), row = q0 + r;
      float largest = NEGATIVE_INFINITY;
      for (uint j = 0u; j < uint(TN); ++j) {
        uint key = k0 + tx + j * uint(THREADS_COL);
        bool visible = key < Sk;
#ifdef CAUSAL
        visible = visible && int(key) <= int(row) + causalOffset;
#endif
#ifdef HAS_MASK
        if (visible && row < Sq) s[i][j] += mask[maskBase + row * maskStrides[2] + key * maskStrides[3]];
#endif
        s[i][j] = visible ? s[i][j] : NEGATIVE_INFINITY;
        largest = maxNaN(largest, s[i][j]);
      }
      weights[r][MAXIMA_RUN + (tx >> 2)][tx & 3u] = largest;
    }
    memoryBarrierShared();
    barrier();

    // Each row's new maximum from the partial ones; this invocation's weights; the output so far and the sum
    // rescaled. Every invocation has read K by the barrier above, so V's tile goes where K's was.
    for (uint i = 0u; i < uint(TM); ++i) {
      uint r = ty + i * uint(THREADS_ROW);
      vec4 first = weights[r][MAXIMA_RUN], second = weights[r][MAXIMA_RUN + 1u];
      float largest = maxNaN(maxNaN(maxNaN(rowMax[i], first.x), maxNaN(first.y, first.z)),
                             maxNaN(maxNaN(first.w, second.x), maxNaN(maxNaN(second.y, second.z), second.w)));
      // Nothing but −inf so far: every weight is 0 (exp(−inf − 0)), not NaN (exp(−inf + inf)).
      float shift = largest == NEGATIVE_INFINITY ? 0.0 : largest;
      float rescale = exp(rowMax[i] - shift);
      rowMax[i] = largest;
      rowSum[i] *= rescale;
      for (uint j = 0u; j < uint(TD4); ++j) o[i][j] *= rescale;
      for (uint j = 0u; j < uint(TN); ++j) {
        uint c = tx + j * uint(THREADS_COL);
        weights[r][c >> 2][c & 3u] = exp(s[i][j] - shift);
      }
    }
    STORE_TILE(DV_RUNS, vAlongSequence, V_FETCHES, vFetched)
    memoryBarrierShared();
    barrier();
    if (k0 + uint(BLOCK_N) < keyEnd) {
      FETCH_TILE(K, kBase, kStrides, D_RUNS, HEAD_D, kAlongSequence, K_FETCHES, kFetched, k0 + uint(BLOCK_N))
    }

#ifdef CAUSAL
    // Some query of the group hides some key of the tile: those keys must add nothing, not 0·V.
    if (int(k0) + BLOCK_N - 1 > int(q0) + causalOffset) {
      accumulateTile(true, k0, q0, ty, tx);
    } else {
      accumulateTile(false, k0, q0, ty, tx);
    }
#else
    accumulateTile(false, k0, q0, ty, tx);
#endif
    // The next tile overwrites keysValues and weights.
    barrier();
  }

  for (uint i = 0u; i < uint(TM); ++i) {
    uint r = ty + i * uint(THREADS_ROW), row = q0 + r;
    if (row >= Sq) continue;
#ifdef SPLIT_KEYS
    // This split's share, unnormalized; a split past every key the row sees leaves 0 and (−inf, 0).
    uint batches = gl_NumWorkGroups.z / splits;
    uint line = ((split * batches + batch) * gl_NumWorkGroups.y + head) * Sq + row;
    for (uint j = 0u; j < uint(TD4); ++j) {
      uint run = tx + j * uint(THREADS_COL);
      for (uint e = 0u; e < 4u; ++e) {
        uint d = 4u * run + e;
        if (d < uint(HEAD_DV)) partial[line * uint(HEAD_DV) + d] = o[i][j][e];
      }
    }
    if (tx == 0u) {
      uint stats = splits * batches * gl_NumWorkGroups.y * Sq * uint(HEAD_DV) + 2u * line;
      partial[stats] = rowMax[i];
      partial[stats + 1u] = rowSum[i];
    }
#else
    // A row whose weights are all 0 keeps its sum of 0·V: 0, or NaN from a NaN in V.
    float total = rowSum[i];
#ifdef EMPTY_ROWS_NAN
    // A row that sees no key is NaN, as softmax over nothing but −inf is.
    float inverse = total != 0.0 ? 1.0 / total : uintBitsToFloat(0x7fc00000u);
#else
    float inverse = total != 0.0 ? 1.0 / total : 1.0;
#endif
    for (uint j = 0u; j < uint(TD4); ++j) {
      uint run = tx + j * uint(THREADS_COL);
      for (uint e = 0u; e < 4u; ++e) {
        uint d = 4u * run + e;
        if (d < uint(HEAD_DV)) O[oBase + row * oStrides[2] + d * oStrides[3]] = o[i][j][e] * inverse;
      }
    }
#endif
  }
}
