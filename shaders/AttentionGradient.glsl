// The backward pass of trainable self-attention (graph/SelfAttentionOps.cpp): qkv [B, S, 3, H, D] holds
// each position's queries, keys and values of H heads of D features (PyTorch's MultiheadAttention in-projection),
// O = softmax(scale·Q·Kᵀ)·V per (batch, head), stored [B, S, H, D]. The scores are recomputed, never stored (as
// memory-efficient attention does), from each query row's log-sum-exp L_i, which the first pass finds:
//   ATTENTION_GRADIENT_QUERIES, one invocation per (b, h, query i): L_i and Δ_i = Σ dO_i·O_i, kept in
//     stats[(b·H + h)·S + i] for the second pass, and dQ_i = scale·Σ_j P_ij·(dO_i·V_j − Δ_i)·K_j
//   ATTENTION_GRADIENT_KEYS, one invocation per (b, h, key j): dV_j = Σ_i P_ij·dO_i and
//     dK_j = scale·Σ_i P_ij·(dO_i·V_j − Δ_i)·Q_i
// with P_ij = exp(scale·Q_i·K_j + mask_j − L_i). CAUSAL: key j is hidden from query i < j. KEY_MASK: mask [B, S] is
// added to every query's score for key j (0 or −inf for padding), else 0. NaN in gives NaN out.
// A work group holds GROUP_ROWS rows of one (b, h) and walks the other side's rows in tiles of TILE rows staged in
// shared memory by the whole group (K and V for QUERIES; Q, dO, L and Δ for KEYS), which every invocation then reads
// at the same address (a broadcast) instead of each loading them from memory.
// bindings: 0 qkv read, 1 O read, 2 dO read, 3 dqkv (its Q part written by QUERIES, its K and V parts by KEYS; added
//   to what is there when `added` is 1), 4 stats [B·H·S] (L, Δ) written by QUERIES, read by KEYS, 5 mask (KEY_MASK)
// uniforms: 0 B·H, 1 S, 2 H, 3 scale, 4 added
// defines: HEAD_D (D), TILE, ATTENTION_GRADIENT_QUERIES or ATTENTION_GRADIENT_KEYS, CAUSAL, KEY_MASK
// Work groups: x the blocks of GROUP_ROWS rows along S, y·(z + 1) the (b, h) pairs (y at most 65 535).
// NVIDIA's compiler keeps the small fixed loops as loops over local memory unless told to unroll them (see Gemm.glsl).
#pragma optionNV(unroll all)
#define GROUP_ROWS 64
layout(local_size_x = GROUP_ROWS) in;

layout(std430, binding = 0) readonly buffer Projections { float qkv[]; };
layout(std430, binding = 1) readonly buffer Output { float O[]; };
layout(std430, binding = 2) readonly buffer OutputGradient { float dO[]; };
layout(std430, binding = 3) buffer ProjectionGradient { float dqkv[]; };
#ifdef ATTENTION_GRADIENT_QUERIES
layout(std430, binding = 4) writeonly buffer RowStatistics { vec2 stats[]; };
#elif defined(ATTENTION_GRADIENT_KEYS)
layout(std430, binding = 4) readonly buffer RowStatistics { vec2 stats[]; };
#else
#error ATTENTION_GRADIENT_QUERIES or ATTENTION_GRADIENT_KEYS
#endif
#ifdef KEY_MASK
layout(std430, binding = 5) readonly buffer KeyMask { float mask[]; };
#define KEY_MASK_AT(batch, key) mask[(batch) * S + (key)]
#else
#define KEY_MASK_AT(batch, key) 0.0
#endif
layout(location = 0) uniform uint pairs;
layout(location = 1) uniform uint S;
layout(location = 2) uniform uint H;
layout(location = 3) uniform float scale;
layout(location = 4) uniform uint added;

// The tile of the other side's rows: two vectors of D features each (K and V, or Q and dO), and per row a number
// (the key's mask for QUERIES) or two (L and Δ for KEYS).
shared float tileA[TILE][HEAD_D];
shared float tileB[TILE][HEAD_D];
shared vec2 tileRow[TILE];

void main() {
  uint pair = gl_WorkGroupID.z * gl_NumWorkGroups.y + gl_WorkGroupID.y;
  if (pair >= pairs) return;  // the same for the whole group
  uint local = gl_LocalInvocationID.x;
  uint own = gl_WorkGroupID.x * uint(GROUP_ROWS) + local;
  bool inside = own < S;
  uint head = pair % H, batch = pair / H;
  uint E = H * uint(HEAD_D);
  // Feature f of head `head` at position p: part 0 (Q), 1 (K) or 2 (V) at projection + p·3E + part·E + f, and O and
  // dO at outputs + p·E + f.
  uint projection = batch * S * 3u * E + head * uint(HEAD_D), outputs = batch * S * E + head * uint(HEAD_D);
  uint lines = pair * S;  // the (b, h) block of stats
  uint groupLast = min(gl_WorkGroupID.x * uint(GROUP_ROWS) + uint(GROUP_ROWS), S) - 1u;  // the group's last row
#ifdef ATTENTION_GRADIENT_QUERIES
  float q[HEAD_D], g[HEAD_D], sum[HEAD_D];
  float delta = 0.0;
  for (uint f = 0u; f < uint(HEAD_D); ++f) {
    q[f] = inside ? scale * qkv[projection + own * 3u * E + f] : 0.0;
    g[f] = inside ? dO[outputs + own * E + f] : 0.0;
    delta += inside ? g[f] * O[outputs + own * E + f] : 0.0;
    sum[f] = 0.0;
  }
#ifdef CAUSAL
  uint keys = own + 1u, groupKeys = groupLast + 1u;
#else
  uint keys = S, groupKeys = S;
#endif
  // Two walks over the keys: the row's largest score and Σ exp(score − largest), online; then dQ.
  float largest = uintBitsToFloat(0xff800000u), total = 0.0, logSum = 0.0;
  for (uint walk = 0u; walk < 2u; ++walk) {
    for (uint first = 0u; first < groupKeys; first += uint(TILE)) {
      barrier();  // the previous tile is read by every invocation
      for (uint at = local; at < uint(TILE) * uint(HEAD_D); at += uint(GROUP_ROWS)) {
        uint row = at / uint(HEAD_D), f = at % uint(HEAD_D), key = first + row;
        tileA[row][f] = key < S ? qkv[projection + key * 3u * E + E + f] : 0.0;
        tileB[row][f] = key < S && walk == 1u ? qkv[projection + key * 3u * E + 2u * E + f] : 0.0;
      }
      if (local < uint(TILE)) tileRow[local] = vec2(first + local < S ? KEY_MASK_AT(batch, first + local) : 0.0, 0.0);
      barrier();
      uint count = min(uint(TILE), keys > first ? keys - first : 0u);
      for (uint j = 0u; j < count; ++j) {
        float score = tileRow[j].x, product = 0.0;
        for (uint f = 0u; f < uint(HEAD_D); ++f) score += q[f] * tileA[j][f];
        if (walk == 0u) {
          if (score == uintBitsToFloat(0xff800000u)) continue;  // a hidden key: −inf − (−inf) would make the running sum NaN
          float next = maxNaN(largest, score);
          total = total * exp(largest - next) + exp(score - next);
          largest = next;
        } else {
          for (uint f = 0u; f < uint(HEAD_D); ++f) product += g[f] * tileB[j][f];
          float weight = exp(score - logSum) * (product - delta);
          for (uint f = 0u; f < uint(HEAD_D); ++f) sum[f] += weight * tileA[j][f];
        }
      }
    }
    logSum = largest + log(total);
  }
  if (!inside) return;
  for (uint f = 0u; f < uint(HEAD_D); ++f) {
    uint at = projection + own * 3u * E + f;
    dqkv[at] = (added != 0u ? dqkv[at] : 0.0) + scale * sum[f];
  }
  stats[lines + own] = vec2(logSum, delta);
#else
  float k[HEAD_D], v[HEAD_D], dk[HEAD_D], dv[HEAD_D];
  float keyMask = inside ? KEY_MASK_AT(batch, own) : 0.0;
  for (uint f = 0u; f < uint(HEAD_D); ++f) {
    k[f] = inside ? qkv[projection + own * 3u * E + E + f] : 0.0;
    v[f] = inside ? qkv[projection + own * 3u * E + 2u * E + f] : 0.0;
    dk[f] = 0.0;
    dv[f] = 0.0;
  }
#ifdef CAUSAL
  // Queries before the group's first key see none of its keys.
  uint groupFirst = gl_WorkGroupID.x * uint(GROUP_ROWS);
  uint firstQuery = own;
#else
  uint groupFirst = 0u;
  uint firstQuery = 0u;
#endif
  for (uint first = groupFirst; first < S; first += uint(TILE)) {
    barrier();
    for (uint at = local; at < uint(TILE) * uint(HEAD_D); at += uint(GROUP_ROWS)) {
      uint row = at / uint(HEAD_D), f = at % uint(HEAD_D), query = first + row;
      tileA[row][f] = query < S ? qkv[projection + query * 3u * E + f] : 0.0;
      tileB[row][f] = query < S ? dO[outputs + query * E + f] : 0.0;
    }
    if (local < uint(TILE)) tileRow[local] = first + local < S ? stats[lines + first + local] : vec2(0.0);
    barrier();
    if (!inside) continue;
    uint from = firstQuery > first ? firstQuery - first : 0u, to = min(uint(TILE), S - first);
    for (uint i = from; i < to; ++i) {
      float score = 0.0, product = 0.0;
      for (uint f = 0u; f < uint(HEAD_D); ++f) {
        score += tileA[i][f] * k[f];
        product += tileB[i][f] * v[f];
      }
      vec2 line = tileRow[i];
      float p = exp(scale * score + keyMask - line.x), weight = p * (product - line.y);
      for (uint f = 0u; f < uint(HEAD_D); ++f) {
        dv[f] += p * tileB[i][f];
        dk[f] += weight * tileA[i][f];
      }
    }
  }
  if (!inside) return;
  for (uint f = 0u; f < uint(HEAD_D); ++f) {
    uint key = projection + own * 3u * E + E + f, value = key + E;
    dqkv[key] = (added != 0u ? dqkv[key] : 0.0) + scale * dk[f];
    dqkv[value] = (added != 0u ? dqkv[value] : 0.0) + dv[f];
  }
#endif
}
