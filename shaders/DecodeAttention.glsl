// Attention of a decode step: each query head's one new row against the keys [0, keys) of its KV head in the cache
// (RotaryCache.glsl's layout: K [Hkv, context, D], then V). A group takes one KV head and a chunk of KEYS_PER_SPLIT
// keys, walked in tiles of TILE keys with FlashAttention's online softmax (each head's running maximum and exponent
// sum, the accumulated output rescaled when the maximum grows); the GROUP_HEADS query heads that share the KV head
// (grouped-query attention) share the group, so each key and value is read once. A tile's keys are staged in shared
// memory by coalesced loads, then each (head, key) score is a dot product there.
//   SINGLE_PASS: one chunk holds every key (keys ≤ KEYS_PER_SPLIT); the group writes the normalized output y [H·D].
//   Otherwise: chunk `split` of ⌈keys / KEYS_PER_SPLIT⌉ (`splits`) writes its unnormalized output and each head's
//   maximum and sum in AttentionCombine.glsl's workspace layout (partial [splits, H, D], then stats [splits, H, 2]),
//   which AttentionCombine.glsl joins. Groups past the last chunk leave at once, so the dispatch is recorded once and
//   replayed at every length.
// fp32 throughout; NaN in gives NaN out (maxNaN).
// Group (x: chunk, y: KV head), THREADS invocations.
// bindings: 0 qkv read (the row's query heads at h·D), 1 cache read, 2 workspace write, or y write (SINGLE_PASS)
// uniforms: 0 keys, 1 splits (⌈keys / KEYS_PER_SPLIT⌉; 1 with SINGLE_PASS), 2 H, 3 context, 4 scale
// defines: HEAD_D (D), GROUP_HEADS (H / Hkv), KEYS_PER_SPLIT (a multiple of TILE), SINGLE_PASS
#define THREADS 128
#define TILE 32
#define OWNED ((GROUP_HEADS * HEAD_D + THREADS - 1) / THREADS)
layout(local_size_x = THREADS) in;

layout(std430, binding = 0) readonly buffer Projections { float qkv[]; };
layout(std430, binding = 1) readonly buffer Cache { float cache[]; };
layout(std430, binding = 2) writeonly buffer Workspace { float partial[]; };
layout(location = 0) uniform uint keys;
layout(location = 1) uniform uint splits;
layout(location = 2) uniform uint H;
layout(location = 3) uniform uint context;
layout(location = 4) uniform float scale;

shared float query[GROUP_HEADS][HEAD_D];
shared float keyTile[TILE][HEAD_D + 1];  // padded: a column's reads fall on distinct banks
shared float weight[GROUP_HEADS][TILE];
shared float largest[GROUP_HEADS];
shared float rescale[GROUP_HEADS];
shared float total[GROUP_HEADS];

void main() {
  uint split = gl_WorkGroupID.x, kvHead = gl_WorkGroupID.y, local = gl_LocalInvocationID.x;
  if (split >= splits) return;
  uint first = split * uint(KEYS_PER_SPLIT);
  uint end = min(keys, first + uint(KEYS_PER_SPLIT));
  uint Hkv = H / uint(GROUP_HEADS);
  uint keyBase = kvHead * context * uint(HEAD_D), valueBase = (Hkv + kvHead) * context * uint(HEAD_D);
  for (uint i = local; i < uint(GROUP_HEADS * HEAD_D); i += uint(THREADS)) {
    query[i / uint(HEAD_D)][i % uint(HEAD_D)] = scale * qkv[kvHead * uint(GROUP_HEADS * HEAD_D) + i];
  }
  if (local < uint(GROUP_HEADS)) {
    largest[local] = uintBitsToFloat(0xff800000u);
    total[local] = 0.0;
  }
  float accumulated[OWNED];
  for (int o = 0; o < OWNED; ++o) accumulated[o] = 0.0;
  for (uint tile = first; tile < end; tile += uint(TILE)) {
    uint seen = min(end - tile, uint(TILE));
    for (uint i = local; i < seen * uint(HEAD_D); i += uint(THREADS)) keyTile[i / uint(HEAD_D)][i % uint(HEAD_D)] = cache[keyBase + tile * uint(HEAD_D) + i];
    memoryBarrierShared();
    barrier();
    for (uint i = local; i < uint(GROUP_HEADS * TILE); i += uint(THREADS)) {
      uint h = i / uint(TILE), j = i % uint(TILE);
      float score = uintBitsToFloat(0xff800000u);
      if (j < seen) {
        score = 0.0;
        for (uint f = 0u; f < uint(HEAD_D); ++f) score = fma(query[h][f], keyTile[j][f], score);
      }
      weight[h][j] = score;
    }
    memoryBarrierShared();
    barrier();
    if (local < uint(GROUP_HEADS)) {
      float m = largest[local];
      for (uint j = 0u; j < seen; ++j) m = maxNaN(m, weight[local][j]);
      // The first tile: nothing accumulated yet to rescale (exp(−inf − m) is 0 anyway, but −inf − (−inf) is NaN).
      rescale[local] = largest[local] == uintBitsToFloat(0xff800000u) ? 0.0 : exp(largest[local] - m);
      largest[local] = m;
    }
    memoryBarrierShared();
    barrier();
    for (uint i = local; i < uint(GROUP_HEADS * TILE); i += uint(THREADS)) {
      uint h = i / uint(TILE), j = i % uint(TILE);
      weight[h][j] = j < seen ? exp(weight[h][j] - largest[h]) : 0.0;
    }
    memoryBarrierShared();
    barrier();
    for (int o = 0; o < OWNED; ++o) {
      uint i = local + uint(o * THREADS);
      if (i >= uint(GROUP_HEADS * HEAD_D)) break;
      uint h = i / uint(HEAD_D), d = i % uint(HEAD_D);
      float sum = accumulated[o] * rescale[h];
      for (uint j = 0u; j < seen; ++j) sum = fma(weight[h][j], cache[valueBase + (tile + j) * uint(HEAD_D) + d], sum);
      accumulated[o] = sum;
    }
    if (local < uint(GROUP_HEADS)) {
      float sum = total[local] * rescale[local];
      for (uint j = 0u; j < seen; ++j) sum += weight[local][j];
      total[local] = sum;
    }
    memoryBarrierShared();
    barrier();
  }
  for (int o = 0; o < OWNED; ++o) {
    uint i = local + uint(o * THREADS);
    if (i >= uint(GROUP_HEADS * HEAD_D)) break;
    uint h = i / uint(HEAD_D), line = kvHead * uint(GROUP_HEADS) + h;
#ifdef SINGLE_PASS
    partial[line * uint(HEAD_D) + i % uint(HEAD_D)] = accumulated[o] / total[h];
#else
    partial[(split * H + line) * uint(HEAD_D) + i % uint(HEAD_D)] = accumulated[o];
#endif
  }
#ifndef SINGLE_PASS
  if (local < uint(GROUP_HEADS)) {
    uint line = kvHead * uint(GROUP_HEADS) + local, stats = splits * H * uint(HEAD_D);
    partial[stats + 2u * (split * H + line)] = largest[local];
    partial[stats + 2u * (split * H + line) + 1u] = total[local];
  }
#endif
}
