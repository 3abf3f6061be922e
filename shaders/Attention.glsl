// Fused scaled dot-product attention (graph/AttentionOps.cpp): O = softmax(scale·Q·Kᵀ + mask)·V for every (batch,
// head), Q [Sq, D], K [Sk, D], V [Sk, Dv], O [Sq, Dv], each operand at any strides of its 4 axes (batch, head,
// sequence, feature), so that transposed and head-split tensors are read in place. The Sq × Sk scores never reach
// memory: a group takes BLOCK_M queries (scale·Q staged in shared memory once) and walks the keys BLOCK_N at a time,
// K's tile then V's tile staged in one shared array, with FlashAttention's online softmax (each row's running maximum
// and exponent sum, the accumulated output rescaled when the maximum grows). fp32 throughout.
//   Keys hidden by CAUSAL (key j > query i + Sk − Sq, a query block at the end of a cache) are left out, as
//   flash attention does (they are never read); a key the mask makes −inf gets weight 0 (0·V: a NaN in V there still
//   reaches the output, as through PyTorch's unfused softmax and product). A row with every key hidden or −inf
//   outputs 0 (PyTorch's exports write Where(IsNaN(softmax), 0, softmax)); a finite very negative mask (finfo.min)
//   is plain softmax. NaN in gives NaN out (maxNaN: GLSL's max may drop it).
// Group (x: query block, y: head, z: batch), 128 invocations (what OpenGL ES guarantees): THREADS_ROW × THREADS_COL,
// invocation (ty, tx) owning queries ty + i·THREADS_ROW (i < TM), keys tx + j·THREADS_COL of each tile (j < TN) and
// output features tx + j·THREADS_COL (j < TD); strided so that each shared read below is a broadcast or lands on
// distinct banks (rows padded by one float).
// bindings: 0 Q read, 1 K read, 2 V read, 3 mask read (HAS_MASK), 4 O write
// uniforms: 0 Sq, 1 Sk, 2 scale, 3 the causal offset Sk − Sq (int, CAUSAL), 4-7 Q's strides (batch, head, sequence,
// feature; elements), 8-11 K's, 12-15 V's, 16-19 O's, 20-23 the mask's (batch, head, query, key; 0 along
// broadcast axes; HAS_MASK)
// defines: HEAD_D (D), HEAD_DV (Dv), KV_WIDTH (the larger of the two), BLOCK_M (a multiple of THREADS_ROW), BLOCK_N
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
#define TD ((HEAD_DV + THREADS_COL - 1) / THREADS_COL)
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
layout(std430, binding = 4) writeonly buffer Output { float O[]; };
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

shared float queries[BLOCK_M][HEAD_D + 1];  // scale·Q of the group's queries
shared float keysValues[BLOCK_N][KV_WIDTH + 1];  // the tile's K, then its V
shared float scores[BLOCK_M][BLOCK_N + 1];  // the tile's scores, then exp(score − running maximum)
shared float rowMax[BLOCK_M];
shared float rowSum[BLOCK_M];
shared float rowRescale[BLOCK_M];

#define NEGATIVE_INFINITY uintBitsToFloat(0xff800000u)

// The element at (sequence, feature) of an operand whose (batch, head) corner is `base`, as
// `count` = rows × width elements walked by the group's invocations in the order of its contiguous axis.
#define OPERAND_INDEX(q, rows, width, alongSequence, row, feature) \
  if (alongSequence) {                                              \
    row = (q) % uint(rows);                                         \
    feature = (q) / uint(rows);                                     \
  } else {                                                          \
    row = (q) / uint(width);                                        \
    feature = (q) % uint(width);                                    \
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

void main() {
  uint local = gl_LocalInvocationIndex;
  uint ty = local / uint(THREADS_COL), tx = local % uint(THREADS_COL);
  uint head = gl_WorkGroupID.y, batch = gl_WorkGroupID.z;
  uint q0 = gl_WorkGroupID.x * uint(BLOCK_M);
  uint qBase = batch * qStrides[0] + head * qStrides[1];
  uint kBase = batch * kStrides[0] + head * kStrides[1];
  uint vBase = batch * vStrides[0] + head * vStrides[1];
  uint oBase = batch * oStrides[0] + head * oStrides[1];
#ifdef HAS_MASK
  uint maskBase = batch * maskStrides[0] + head * maskStrides[1];
#endif

  for (uint q = local; q < uint(BLOCK_M * HEAD_D); q += 128u) {
    uint r, d;
    OPERAND_INDEX(q, BLOCK_M, HEAD_D, qAlongSequence, r, d)
    queries[r][d] = q0 + r < Sq ? scale * Q[qBase + (q0 + r) * qStrides[2] + d * qStrides[3]] : 0.0;
  }
  if (local < uint(BLOCK_M)) {
    rowMax[local] = NEGATIVE_INFINITY;
    rowSum[local] = 0.0;
  }
  memoryBarrierShared();
  barrier();

  // The keys any query of the group sees: up to the last one's causal limit.
  uint keyEnd = Sk;
#ifdef CAUSAL
  keyEnd = uint(clamp(int(min(Sq, q0 + uint(BLOCK_M))) + causalOffset, 0, int(Sk)));
#endif

  float o[TM][TD];
  for (uint i = 0u; i < uint(TM); ++i)
    for (uint j = 0u; j < uint(TD); ++j) o[i][j] = 0.0;

  for (uint k0 = 0u; k0 < keyEnd; k0 += uint(BLOCK_N)) {
    // K's tile, zero past Sk.
    for (uint q = local; q < uint(BLOCK_N * HEAD_D); q += 128u) {
      uint c, d;
      OPERAND_INDEX(q, BLOCK_N, HEAD_D, kAlongSequence, c, d)
      keysValues[c][d] = k0 + c < Sk ? K[kBase + (k0 + c) * kStrides[2] + d * kStrides[3]] : 0.0;
    }
    memoryBarrierShared();
    barrier();

    float s[TM][TN];
    for (uint i = 0u; i < uint(TM); ++i)
      for (uint j = 0u; j < uint(TN); ++j) s[i][j] = 0.0;
    for (uint d = 0u; d < uint(HEAD_D); ++d) {
      float a[TM], b[TN];
      for (uint i = 0u; i < uint(TM); ++i) a[i] = queries[ty + i * uint(THREADS_ROW)][d];
      for (uint j = 0u; j < uint(TN); ++j) b[j] = keysValues[tx + j * uint(THREADS_COL)][d];
      for (uint i = 0u; i < uint(TM); ++i)
        for (uint j = 0u; j < uint(TN); ++j) s[i][j] = fma(a[i], b[j], s[i][j]);
    }
    for (uint i = 0u; i < uint(TM); ++i) {
      uint r = ty + i * uint(THREADS_ROW), row = q0 + r;
      for (uint j = 0u; j < uint(TN); ++j) {
        uint c = tx + j * uint(THREADS_COL), key = k0 + c;
        bool visible = key < Sk;
#ifdef CAUSAL
        visible = visible && int(key) <= int(row) + causalOffset;
#endif
        float score = s[i][j];
#ifdef HAS_MASK
        if (visible && row < Sq) score += mask[maskBase + row * maskStrides[2] + key * maskStrides[3]];
#endif
        scores[r][c] = visible ? score : NEGATIVE_INFINITY;
      }
    }
    memoryBarrierShared();
    barrier();

    // Each row's running maximum and sum (one invocation per row), while every invocation stages V's tile where K's
    // was (all have read K by the barrier above).
    if (local < uint(BLOCK_M)) {
      uint r = local;
      float previous = rowMax[r], largest = previous;
      for (uint c = 0u; c < uint(BLOCK_N); ++c) largest = maxNaN(largest, scores[r][c]);
      // Nothing but −inf so far: every weight is 0 (exp(−inf − 0)), not NaN (exp(−inf + inf)).
      float shift = largest == NEGATIVE_INFINITY ? 0.0 : largest;
      float rescale = exp(previous - shift);
      float sum = 0.0;
      for (uint c = 0u; c < uint(BLOCK_N); ++c) {
        float p = exp(scores[r][c] - shift);
        scores[r][c] = p;
        sum += p;
      }
      rowSum[r] = rowSum[r] * rescale + sum;
      rowMax[r] = largest;
      rowRescale[r] = rescale;
    }
    for (uint q = local; q < uint(BLOCK_N * HEAD_DV); q += 128u) {
      uint c, d;
      OPERAND_INDEX(q, BLOCK_N, HEAD_DV, vAlongSequence, c, d)
      keysValues[c][d] = k0 + c < Sk ? V[vBase + (k0 + c) * vStrides[2] + d * vStrides[3]] : 0.0;
    }
    memoryBarrierShared();
    barrier();

    for (uint i = 0u; i < uint(TM); ++i) {
      float rescale = rowRescale[ty + i * uint(THREADS_ROW)];
      for (uint j = 0u; j < uint(TD); ++j) o[i][j] *= rescale;
    }
    bool wholeTileVisible = true;
#ifdef CAUSAL
    // Some query of the group hides some key of the tile: those keys must add nothing, not 0·V.
    wholeTileVisible = int(k0) + BLOCK_N - 1 <= int(q0) + causalOffset;
#endif
    if (wholeTileVisible) {
      for (uint c = 0u; c < uint(BLOCK_N); ++c) {
        float p[TM], v[TD];
        for (uint i = 0u; i < uint(TM); ++i) p[i] = scores[ty + i * uint(THREADS_ROW)][c];
        for (uint j = 0u; j < uint(TD); ++j) {
          uint d = tx + j * uint(THREADS_COL);
          v[j] = d < uint(HEAD_DV) ? keysValues[c][d] : 0.0;
        }
        for (uint i = 0u; i < uint(TM); ++i)
          for (uint j = 0u; j < uint(TD); ++j) o[i][j] = fma(p[i], v[j], o[i][j]);
      }
    } else {
#ifdef CAUSAL
      for (uint c = 0u; c < uint(BLOCK_N); ++c) {
        float p[TM], v[TD];
        for (uint i = 0u; i < uint(TM); ++i) p[i] = scores[ty + i * uint(THREADS_ROW)][c];
        for (uint j = 0u; j < uint(TD); ++j) {
          uint d = tx + j * uint(THREADS_COL);
          v[j] = d < uint(HEAD_DV) ? keysValues[c][d] : 0.0;
        }
        for (uint i = 0u; i < uint(TM); ++i) {
          bool hidden = int(k0 + c) > int(q0 + ty + i * uint(THREADS_ROW)) + causalOffset;
          for (uint j = 0u; j < uint(TD); ++j) o[i][j] = hidden ? o[i][j] : fma(p[i], v[j], o[i][j]);
        }
      }
#endif
    }
    // The next tile overwrites keysValues and scores.
    barrier();
  }

  for (uint i = 0u; i < uint(TM); ++i) {
    uint r = ty + i * uint(THREADS_ROW), row = q0 + r;
    if (row >= Sq) continue;
    // A row whose weights are all 0 keeps its sum of 0·V: 0, or NaN from a NaN in V.
    float total = rowSum[r];
    float inverse = total != 0.0 ? 1.0 / total : 1.0;
    for (uint j = 0u; j < uint(TD); ++j) {
      uint d = tx + j * uint(THREADS_COL);
      if (d < uint(HEAD_DV)) O[oBase + row * oStrides[2] + d * oStrides[3]] = o[i][j] * inverse;
    }
  }
}
