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
// bindings: 0 qkv read, 1 O read, 2 dO read, 3 dqkv (its Q part written by QUERIES, its K and V parts by KEYS; added
//   to what is there when `added` is 1), 4 stats [B·H·S] (L, Δ) written by QUERIES, read by KEYS, 5 mask (KEY_MASK)
// uniforms: 0 rows (B·H·S), 1 S, 2 H, 3 scale, 4 added
// defines: HEAD_D (D), ATTENTION_GRADIENT_QUERIES or ATTENTION_GRADIENT_KEYS, CAUSAL, KEY_MASK
// NVIDIA's compiler keeps the small fixed loops as loops over local memory unless told to unroll them (see Gemm.glsl).
#pragma optionNV(unroll all)
layout(local_size_x = LOCAL_SIZE_X) in;

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
layout(location = 0) uniform uint rows;
layout(location = 1) uniform uint S;
layout(location = 2) uniform uint H;
layout(location = 3) uniform float scale;
layout(location = 4) uniform uint added;

void main() {
  uint row = LINEAR_INVOCATION_INDEX;
  if (row >= rows) return;
  uint own = row % S, head = (row / S) % H, batch = row / (S * H);
  uint E = H * uint(HEAD_D);
  // Feature f of head `head` at position p: part 0 (Q), 1 (K) or 2 (V) at projection + p·3E + part·E + f, and O and
  // dO at outputs + p·E + f.
  uint projection = batch * S * 3u * E + head * uint(HEAD_D), outputs = batch * S * E + head * uint(HEAD_D);
  uint lines = (row / S) * S;  // the (b, h) block of stats
#ifdef ATTENTION_GRADIENT_QUERIES
  float q[HEAD_D], g[HEAD_D], sum[HEAD_D];
  float delta = 0.0;
  for (uint f = 0u; f < uint(HEAD_D); ++f) {
    q[f] = scale * qkv[projection + own * 3u * E + f];
    g[f] = dO[outputs + own * E + f];
    delta += g[f] * O[outputs + own * E + f];
    sum[f] = 0.0;
  }
#ifdef CAUSAL
  uint keys = own + 1u;
#else
  uint keys = S;
#endif
  // The row's largest score and Σ exp(score − largest), online.
  float largest = uintBitsToFloat(0xff800000u), total = 0.0;
  for (uint j = 0u; j < keys; ++j) {
    float score = 0.0;
    for (uint f = 0u; f < uint(HEAD_D); ++f) score += q[f] * qkv[projection + j * 3u * E + E + f];
    score += KEY_MASK_AT(batch, j);
    if (score == uintBitsToFloat(0xff800000u)) continue;  // a hidden key: −inf − (−inf) would make the running sum NaN
    float next = maxNaN(largest, score);
    total = total * exp(largest - next) + exp(score - next);
    largest = next;
  }
  float logSum = largest + log(total);
  for (uint j = 0u; j < keys; ++j) {
    float score = 0.0, product = 0.0;
    for (uint f = 0u; f < uint(HEAD_D); ++f) {
      score += q[f] * qkv[projection + j * 3u * E + E + f];
      product += g[f] * qkv[projection + j * 3u * E + 2u * E + f];
    }
    float weight = exp(score + KEY_MASK_AT(batch, j) - logSum) * (product - delta);
    for (uint f = 0u; f < uint(HEAD_D); ++f) sum[f] += weight * qkv[projection + j * 3u * E + E + f];
  }
  for (uint f = 0u; f < uint(HEAD_D); ++f) {
    uint at = projection + own * 3u * E + f;
    dqkv[at] = (added != 0u ? dqkv[at] : 0.0) + scale * sum[f];
  }
  stats[row] = vec2(logSum, delta);
#else
  float k[HEAD_D], v[HEAD_D], dk[HEAD_D], dv[HEAD_D];
  float keyMask = KEY_MASK_AT(batch, own);
  for (uint f = 0u; f < uint(HEAD_D); ++f) {
    k[f] = qkv[projection + own * 3u * E + E + f];
    v[f] = qkv[projection + own * 3u * E + 2u * E + f];
    dk[f] = 0.0;
    dv[f] = 0.0;
  }
#ifdef CAUSAL
  uint first = own;
#else
  uint first = 0u;
#endif
  for (uint i = first; i < S; ++i) {
    float score = 0.0, product = 0.0;
    for (uint f = 0u; f < uint(HEAD_D); ++f) {
      score += qkv[projection + i * 3u * E + f] * k[f];
      product += dO[outputs + i * E + f] * v[f];
    }
    vec2 line = stats[lines + i];
    float p = exp(scale * score + keyMask - line.x), weight = p * (product - line.y);
    for (uint f = 0u; f < uint(HEAD_D); ++f) {
      dv[f] += p * dO[outputs + i * E + f];
      dk[f] += weight * qkv[projection + i * 3u * E + f];
    }
  }
  for (uint f = 0u; f < uint(HEAD_D); ++f) {
    uint key = projection + own * 3u * E + E + f, value = key + E;
    dqkv[key] = (added != 0u ? dqkv[key] : 0.0) + scale * dk[f];
    dqkv[value] = (added != 0u ? dqkv[value] : 0.0) + dv[f];
  }
#endif
}
