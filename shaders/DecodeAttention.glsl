// Attention of a decode step: for each row (one sequence of those decoded together), each query head's one new row
// against the keys [0, positions[row] + 1) of its KV head in the row's cache (the row-th of the cache binding,
// RotaryCache.glsl's layout: K [Hkv, context, D], then V). A group takes one KV head and one chunk of CHUNK keys, so
// that even a short cache gives many groups (a decode step is latency-bound: walking a long chunk in one group left
// most of the GPU idle); the GROUP_HEADS query heads that share the KV head (grouped-query attention) share the group,
// so each key and value is read once. The chunk's keys, then its values, are staged in shared memory by coalesced
// loads; each (head, key) score is a dot product there, the maxima and sums are tree reductions.
//   SINGLE_PASS: one chunk holds every row's keys (keys ≤ CHUNK); the group writes the normalized output y [rows, H·D].
//   Otherwise: chunk `split` of `splits` (⌈keys / CHUNK⌉ of the row with the most keys) writes its unnormalized output
//   and each head's maximum and sum in AttentionCombine.glsl's workspace layout, the rows as its batch (partial
//   [splits, rows, H, D], then stats [splits, rows, H, 2]), which AttentionCombine.glsl joins. A chunk past the row's
//   last writes what joins as nothing (maximum −inf, sum and output 0), so the dispatch is recorded once and replayed
//   at every length.
// fp32 throughout; NaN in gives NaN out (maxNaN).
// Group (x: chunk, y: KV head, z: row), THREADS invocations.
// bindings: 0 qkv [rows, (H + 2·Hkv)·D] read, 1 cache read, 2 workspace write, or y write (SINGLE_PASS), 3 positions
//   (uint per row) read
// uniforms: 1 splits (1 with SINGLE_PASS), 2 H, 3 context, 4 scale
// defines: HEAD_D (D), GROUP_HEADS (H / Hkv), CHUNK (a power of two), SINGLE_PASS
#define THREADS 128
layout(local_size_x = THREADS) in;

layout(std430, binding = 0) readonly buffer Projections { float qkv[]; };
layout(std430, binding = 1) readonly buffer Cache { float cache[]; };
layout(std430, binding = 2) writeonly buffer Workspace { float partial[]; };
layout(std430, binding = 3) readonly buffer Positions { uint positions[]; };
layout(location = 1) uniform uint splits;
layout(location = 2) uniform uint H;
layout(location = 3) uniform uint context;
layout(location = 4) uniform float scale;

shared float query[GROUP_HEADS][HEAD_D];
shared float staged[CHUNK][HEAD_D + 1];  // the chunk's keys, then its values; padded: a column's reads fall on distinct banks
shared float weight[GROUP_HEADS][CHUNK];
shared float reduced[GROUP_HEADS][CHUNK];
shared float largest[GROUP_HEADS];
shared float total[GROUP_HEADS];

// Each head's maximum (combineMax) or sum of weight[h][0, seen) by a tree in `reduced`.
void reduceRows(bool combineMax, uint seen) {
  uint local = gl_LocalInvocationID.x;
  for (uint i = local; i < uint(GROUP_HEADS * CHUNK); i += uint(THREADS)) {
    uint h = i / uint(CHUNK), j = i % uint(CHUNK);
    reduced[h][j] = j < seen ? weight[h][j] : combineMax ? uintBitsToFloat(0xff800000u) : 0.0;
  }
  memoryBarrierShared();
  barrier();
  for (uint stride = uint(CHUNK / 2); stride > 0u; stride >>= 1) {
    for (uint i = local; i < uint(GROUP_HEADS) * stride; i += uint(THREADS)) {
      uint h = i / stride, j = i % stride;
      reduced[h][j] = combineMax ? maxNaN(reduced[h][j], reduced[h][j + stride]) : reduced[h][j] + reduced[h][j + stride];
    }
    memoryBarrierShared();
    barrier();
  }
}

void stage(uint base, uint first, uint seen) {
  for (uint i = gl_LocalInvocationID.x; i < seen * uint(HEAD_D); i += uint(THREADS)) {
    staged[i / uint(HEAD_D)][i % uint(HEAD_D)] = cache[base + first * uint(HEAD_D) + i];
  }
}

void main() {
  uint split = gl_WorkGroupID.x, kvHead = gl_WorkGroupID.y, row = gl_WorkGroupID.z, local = gl_LocalInvocationID.x;
  uint rows = gl_NumWorkGroups.z, lines = rows * H;
  uint keys = positions[row] + 1u;
  uint first = split * uint(CHUNK);
  if (split >= splits) return;
#ifndef SINGLE_PASS
  if (first >= keys) {
    for (uint i = local; i < uint(GROUP_HEADS * HEAD_D); i += uint(THREADS)) {
      uint line = row * H + kvHead * uint(GROUP_HEADS) + i / uint(HEAD_D);
      partial[(split * lines + line) * uint(HEAD_D) + i % uint(HEAD_D)] = 0.0;
    }
    for (uint h = local; h < uint(GROUP_HEADS); h += uint(THREADS)) {
      uint line = row * H + kvHead * uint(GROUP_HEADS) + h, stats = splits * lines * uint(HEAD_D);
      partial[stats + 2u * (split * lines + line)] = uintBitsToFloat(0xff800000u);
      partial[stats + 2u * (split * lines + line) + 1u] = 0.0;
    }
    return;
  }
#endif
  uint seen = min(keys - first, uint(CHUNK));
  uint Hkv = H / uint(GROUP_HEADS);
  uint rowCache = row * 2u * Hkv * context * uint(HEAD_D);
  uint keyBase = rowCache + kvHead * context * uint(HEAD_D), valueBase = rowCache + (Hkv + kvHead) * context * uint(HEAD_D);
  uint queries = row * (H + 2u * Hkv) * uint(HEAD_D) + kvHead * uint(GROUP_HEADS * HEAD_D);
  for (uint i = local; i < uint(GROUP_HEADS * HEAD_D); i += uint(THREADS)) {
    query[i / uint(HEAD_D)][i % uint(HEAD_D)] = scale * qkv[queries + i];
  }
  stage(keyBase, first, seen);
  memoryBarrierShared();
  barrier();
  for (uint i = local; i < uint(GROUP_HEADS * CHUNK); i += uint(THREADS)) {
    uint h = i / uint(CHUNK), j = i % uint(CHUNK);
    float score = 0.0;
    if (j < seen) {
      for (uint f = 0u; f < uint(HEAD_D); ++f) score = fma(query[h][f], staged[j][f], score);
    }
    weight[h][j] = score;
  }
  memoryBarrierShared();
  barrier();
  // The values replace the keys while the maxima reduce.
  stage(valueBase, first, seen);
  reduceRows(true, seen);
  for (uint h = local; h < uint(GROUP_HEADS); h += uint(THREADS)) largest[h] = reduced[h][0];
  memoryBarrierShared();
  barrier();
  for (uint i = local; i < uint(GROUP_HEADS * CHUNK); i += uint(THREADS)) {
    uint h = i / uint(CHUNK), j = i % uint(CHUNK);
    weight[h][j] = j < seen ? exp(weight[h][j] - largest[h]) : 0.0;
  }
  memoryBarrierShared();
  barrier();
  reduceRows(false, seen);
  for (uint h = local; h < uint(GROUP_HEADS); h += uint(THREADS)) total[h] = reduced[h][0];
  memoryBarrierShared();
  barrier();
  for (uint i = local; i < uint(GROUP_HEADS * HEAD_D); i += uint(THREADS)) {
    uint h = i / uint(HEAD_D), d = i % uint(HEAD_D), line = row * H + kvHead * uint(GROUP_HEADS) + h;
    float sum = 0.0;
    for (uint j = 0u; j < seen; ++j) sum = fma(weight[h][j], staged[j][d], sum);
#ifdef SINGLE_PASS
    partial[line * uint(HEAD_D) + d] = sum / total[h];
#else
    partial[(split * lines + line) * uint(HEAD_D) + d] = sum;
#endif
  }
#ifndef SINGLE_PASS
  for (uint h = local; h < uint(GROUP_HEADS); h += uint(THREADS)) {
    uint line = row * H + kvHead * uint(GROUP_HEADS) + h, stats = splits * lines * uint(HEAD_D);
    partial[stats + 2u * (split * lines + line)] = largest[h];
    partial[stats + 2u * (split * lines + line) + 1u] = total[h];
  }
#endif
}
