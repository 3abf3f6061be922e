// Attention of a decode step: each query head's one new row against the keys [0, keys) of its KV head in the cache
// (RotaryCache.glsl's layout: K [Hkv, context, D], then V). The keys are split into chunks of KEYS_PER_SPLIT across
// groups so that a step's few heads still fill the GPU; each group writes its chunk's unnormalized output and each
// head's maximum and exponent sum in AttentionCombine.glsl's workspace layout (partial [splits, H, Dv], then stats
// [splits, H, 2]), for `splits` = ⌈keys / KEYS_PER_SPLIT⌉, and AttentionCombine.glsl joins them. Groups past the
// last split leave at once, so the dispatch is recorded once for the whole context and replayed at every length.
// The GROUP_HEADS query heads that share a KV head (grouped-query attention) share the group, so each key and value
// is read once per group. fp32 throughout; NaN in gives NaN out (maxNaN).
// Group (x: split, y: KV head), 128 invocations.
// bindings: 0 qkv read (the row's query heads at h·D), 1 cache read, 2 workspace write
// uniforms: 0 keys, 1 splits (⌈keys / KEYS_PER_SPLIT⌉), 2 H, 3 context, 4 scale
// defines: HEAD_D (D), GROUP_HEADS (H / Hkv), KEYS_PER_SPLIT
#define THREADS 128
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
shared float weight[GROUP_HEADS][KEYS_PER_SPLIT];
shared float largest[GROUP_HEADS];

void main() {
  uint split = gl_WorkGroupID.x, kvHead = gl_WorkGroupID.y, local = gl_LocalInvocationID.x;
  if (split >= splits) return;
  uint first = split * uint(KEYS_PER_SPLIT);
  uint seen = min(keys - first, uint(KEYS_PER_SPLIT));
  uint Hkv = H / uint(GROUP_HEADS);
  uint keyBase = kvHead * context * uint(HEAD_D), valueBase = (Hkv + kvHead) * context * uint(HEAD_D);
  for (uint i = local; i < uint(GROUP_HEADS * HEAD_D); i += uint(THREADS)) {
    query[i / uint(HEAD_D)][i % uint(HEAD_D)] = scale * qkv[(kvHead * uint(GROUP_HEADS) + i / uint(HEAD_D)) * uint(HEAD_D) + i % uint(HEAD_D)];
  }
  memoryBarrierShared();
  barrier();
  for (uint i = local; i < uint(GROUP_HEADS * KEYS_PER_SPLIT); i += uint(THREADS)) {
    uint h = i / uint(KEYS_PER_SPLIT), j = i % uint(KEYS_PER_SPLIT);
    float score = uintBitsToFloat(0xff800000u);
    if (j < seen) {
      score = 0.0;
      uint at = keyBase + (first + j) * uint(HEAD_D);
      for (uint f = 0u; f < uint(HEAD_D); ++f) score = fma(query[h][f], cache[at + f], score);
    }
    weight[h][j] = score;
  }
  memoryBarrierShared();
  barrier();
  if (local < uint(GROUP_HEADS)) {
    float m = uintBitsToFloat(0xff800000u);
    for (uint j = 0u; j < seen; ++j) m = maxNaN(m, weight[local][j]);
    largest[local] = m;
  }
  memoryBarrierShared();
  barrier();
  for (uint i = local; i < uint(GROUP_HEADS * KEYS_PER_SPLIT); i += uint(THREADS)) {
    uint h = i / uint(KEYS_PER_SPLIT), j = i % uint(KEYS_PER_SPLIT);
    weight[h][j] = j < seen ? exp(weight[h][j] - largest[h]) : 0.0;
  }
  memoryBarrierShared();
  barrier();
  uint lines = H;  // one query row per head
  uint stats = splits * lines * uint(HEAD_D);
  for (uint i = local; i < uint(GROUP_HEADS * HEAD_D); i += uint(THREADS)) {
    uint h = i / uint(HEAD_D), d = i % uint(HEAD_D);
    float sum = 0.0;
    for (uint j = 0u; j < seen; ++j) sum = fma(weight[h][j], cache[valueBase + (first + j) * uint(HEAD_D) + d], sum);
    uint line = kvHead * uint(GROUP_HEADS) + h;
    partial[(split * lines + line) * uint(HEAD_D) + d] = sum;
  }
  if (local < uint(GROUP_HEADS)) {
    float total = 0.0;
    for (uint j = 0u; j < seen; ++j) total += weight[local][j];
    uint line = kvHead * uint(GROUP_HEADS) + local;
    partial[stats + 2u * (split * lines + line)] = largest[local];
    partial[stats + 2u * (split * lines + line) + 1u] = total;
  }
}
