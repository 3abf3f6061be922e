// The backward pass of trainable self-attention (graph/SelfAttentionOps.cpp): qkv [B, S, 3, H, D] holds
// each position's queries, keys and values of H heads of D features (PyTorch's MultiheadAttention in-projection),
// O = softmax(scale·Q·Kᵀ)·V per (batch, head), stored [B, S, H, D]. The scores are recomputed, never stored (as
// memory-efficient attention does), in blocks as FlashAttention-2's backward pass computes them:
//   ATTENTION_GRADIENT_QUERIES, a work group per (b, h) and block of OWN_ROWS queries: Δ_i = Σ dO_i·O_i, then over the
//     keys in tiles of OTHER_ROWS each query's log-sum-exp L_i (kept with Δ_i in stats[(b·H + h)·S + i] for the second
//     pass), then over the tiles again dS_ij = P_ij·(dO_i·V_j − Δ_i) and dQ_i = scale·Σ_j dS_ij·K_j
//   ATTENTION_GRADIENT_KEYS, a work group per (b, h) and block of OWN_ROWS keys: over the queries in tiles of OTHER_ROWS,
//     dV_j = Σ_i P_ij·dO_i and dK_j = scale·Σ_i dS_ij·Q_i
// with P_ij = exp(scale·Q_i·K_j + mask_j − L_i). Each tile's scores are a small matrix product of rows staged in shared
// memory; every invocation owns some of its entries, then some of the block's accumulators (rows × features).
// CAUSAL: key j is hidden from query i < j. KEY_MASK: mask [B, S] is added to every query's score for key j (0 or −inf
// for padding), else 0. NaN in gives NaN out; a query that sees no key gives NaN.
// bindings: 0 qkv read, 1 O read, 2 dO read, 3 dqkv (its Q part written by QUERIES, its K and V parts by KEYS; added
//   to what is there when `added` is 1), 4 stats [B·H·S] (L, Δ) written by QUERIES, read by KEYS, 5 mask (KEY_MASK)
// uniforms: 0 B·H, 1 S, 2 H, 3 scale, 4 added
// defines: HEAD_D (D), OWN_ROWS, OTHER_ROWS, ATTENTION_GRADIENT_QUERIES or ATTENTION_GRADIENT_KEYS, CAUSAL, KEY_MASK
// Work groups: x the blocks of OWN_ROWS rows along S, y·(z + 1) the (b, h) pairs (y at most 65 535). Shared memory:
// 2·OWN_ROWS·(D + 1) + 2·OTHER_ROWS·(D + 1) + 2·OWN_ROWS·OTHER_ROWS floats and a few rows (SelfAttentionOps.cpp keeps it
// under 32 KiB, OpenGL's minimum).
// NVIDIA's compiler keeps the small fixed loops as loops over local memory unless told to unroll them (see Gemm.glsl).
#pragma optionNV(unroll all)
#define GROUP 128
layout(local_size_x = GROUP) in;

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

// Rows of D features padded to an odd count, so that invocations reading one feature of consecutive rows hit distinct
// banks (the host reserves D + 1).
#define ROW_FLOATS (HEAD_D | 1)
#define PITCH uint(ROW_FLOATS)
#if OWN_ROWS > GROUP || OTHER_ROWS > GROUP || OWN_ROWS % OTHER_ROWS != 0
#error OWN_ROWS and OTHER_ROWS are at most GROUP, OTHER_ROWS dividing OWN_ROWS
#endif
// The block's own rows (Q and dO for QUERIES, K and V for KEYS) and a tile of the other side's (K and V, or Q and dO).
shared float ownA[OWN_ROWS * ROW_FLOATS];
shared float ownB[OWN_ROWS * ROW_FLOATS];
shared float otherA[OTHER_ROWS * ROW_FLOATS];
shared float otherB[OTHER_ROWS * ROW_FLOATS];
// The tile's matrices [other][own] (KEYS: P and dS) or [own][other + 1] (QUERIES: scores, then dS).
#define TILE_ENTRIES (OWN_ROWS * (OTHER_ROWS + 1))
shared float tileP[TILE_ENTRIES];
shared float tileDS[TILE_ENTRIES];
// Per row of the tile (KEYS: L and Δ of its queries; QUERIES: the keys' masks) and of the block (QUERIES: L and Δ).
shared vec2 otherRows[OTHER_ROWS];
shared vec2 ownRows[OWN_ROWS];

#define NEGATIVE_INFINITY uintBitsToFloat(0xff800000u)
// The accumulators an invocation owns: entries t, t + GROUP, ... of OWN_ROWS × D, row-major (a warp's consecutive
// features of one row: its writes are consecutive).
#define OWNED ((OWN_ROWS * HEAD_D + GROUP - 1) / GROUP)

uint E, projection, outputs;
// Feature f of part 0 (Q), 1 (K) or 2 (V) of position p, and of O and dO.
float part(uint p, uint which, uint f) { return qkv[projection + p * 3u * E + which * E + f]; }

void main() {
  uint pair = gl_WorkGroupID.z * gl_NumWorkGroups.y + gl_WorkGroupID.y;
  if (pair >= pairs) return;  // the same for the whole group
  uint t = gl_LocalInvocationID.x;
  uint head = pair % H, batch = pair / H;
  E = H * uint(HEAD_D);
  projection = batch * S * 3u * E + head * uint(HEAD_D);
  outputs = batch * S * E + head * uint(HEAD_D);
  uint lines = pair * S;  // the (b, h) block of stats
  uint firstOwn = gl_WorkGroupID.x * uint(OWN_ROWS);
  float sums[OWNED], sums2[OWNED];
  for (uint j = 0u; j < uint(OWNED); ++j) {
    sums[j] = 0.0;
    sums2[j] = 0.0;
  }
#ifdef ATTENTION_GRADIENT_QUERIES
  // The block's queries and their output gradients; Δ per query.
  for (uint at = t; at < uint(OWN_ROWS * HEAD_D); at += uint(GROUP)) {
    uint row = at / uint(HEAD_D), f = at % uint(HEAD_D), query = firstOwn + row;
    ownA[row * PITCH + f] = query < S ? part(query, 0u, f) : 0.0;
    ownB[row * PITCH + f] = query < S ? dO[outputs + query * E + f] : 0.0;
  }
  barrier();
  if (t < uint(OWN_ROWS)) {
    uint query = firstOwn + t;
    float delta = 0.0;
    for (uint f = 0u; f < uint(HEAD_D) && query < S; ++f) delta += ownB[t * PITCH + f] * O[outputs + query * E + f];
    ownRows[t] = vec2(0.0, delta);
  }
#ifdef CAUSAL
  uint keys = min(firstOwn + uint(OWN_ROWS), S);  // the block's last query sees keys up to itself
#else
  uint keys = S;
#endif
  // Walk 0: each query's largest score and Σ exp(score − largest), online, by the invocation of its row; walk 1: dS
  // and dQ.
  float largest = NEGATIVE_INFINITY, total = 0.0;
  for (uint walk = 0u; walk < 2u; ++walk) {
    for (uint first = 0u; first < keys; first += uint(OTHER_ROWS)) {
      barrier();  // the previous tile is read by every invocation
      for (uint at = t; at < uint(OTHER_ROWS * HEAD_D); at += uint(GROUP)) {
        uint row = at / uint(HEAD_D), f = at % uint(HEAD_D), key = first + row;
        otherA[row * PITCH + f] = key < S ? part(key, 1u, f) : 0.0;
        if (walk == 1u) otherB[row * PITCH + f] = key < S ? part(key, 2u, f) : 0.0;
      }
      if (t < uint(OTHER_ROWS)) otherRows[t] = vec2(first + t < S ? KEY_MASK_AT(batch, first + t) : NEGATIVE_INFINITY, 0.0);
      barrier();
      for (uint at = t; at < uint(OWN_ROWS * OTHER_ROWS); at += uint(GROUP)) {
        uint row = at / uint(OTHER_ROWS), column = at % uint(OTHER_ROWS), query = firstOwn + row, key = first + column;
        float score = 0.0, product = 0.0;
        for (uint f = 0u; f < uint(HEAD_D); ++f) score += ownA[row * PITCH + f] * otherA[column * PITCH + f];
        for (uint f = 0u; f < uint(HEAD_D) && walk == 1u; ++f) product += ownB[row * PITCH + f] * otherB[column * PITCH + f];
        score = scale * score + otherRows[column].x;
#ifdef CAUSAL
        if (key > query) score = NEGATIVE_INFINITY;
#endif
        uint entry = row * uint(OTHER_ROWS + 1) + column;
        if (walk == 0u) {
          tileP[entry] = score;
        } else {
          // A hidden key (or one past S) has weight 0, however large dO·V is, unless the query sees no key at all
          // (L = −inf): then NaN, as the forward pass gives.
          float logSum = ownRows[row].x;
          float p = score == NEGATIVE_INFINITY && logSum != NEGATIVE_INFINITY ? 0.0 : exp(score - logSum);
          tileDS[entry] = p * (product - ownRows[row].y);
        }
      }
      barrier();
      if (walk == 0u) {
        if (t < uint(OWN_ROWS)) {
          for (uint column = 0u; column < uint(OTHER_ROWS); ++column) {
            float score = tileP[t * uint(OTHER_ROWS + 1) + column];
            if (score == NEGATIVE_INFINITY) continue;  // −inf − (−inf) would make the running sum NaN
            float next = maxNaN(largest, score);
            total = total * exp(largest - next) + exp(score - next);
            largest = next;
          }
        }
      } else {
        for (uint j = 0u; j < uint(OWNED); ++j) {
          uint at = t + j * uint(GROUP), row = at / uint(HEAD_D), f = at % uint(HEAD_D);
          if (row >= uint(OWN_ROWS)) continue;
          for (uint column = 0u; column < uint(OTHER_ROWS); ++column) {
            float term = tileDS[row * uint(OTHER_ROWS + 1) + column] * otherA[column * PITCH + f];
#ifdef CAUSAL
            // A key the query does not see adds nothing, not 0·K (NaN for a NaN in K).
            term = first + column > firstOwn + row ? 0.0 : term;
#endif
            sums[j] += term;
          }
        }
      }
    }
    if (walk == 0u && t < uint(OWN_ROWS)) {
      // A query that sees no key: L = −inf, and every P of its row NaN below, as the forward pass gives NaN.
      float logSum = total == 0.0 ? NEGATIVE_INFINITY : largest + log(total);  // log(0) is undefined in GLSL
      ownRows[t].x = logSum;
      if (firstOwn + t < S) stats[lines + firstOwn + t] = vec2(logSum, ownRows[t].y);
    }
  }
  for (uint j = 0u; j < uint(OWNED); ++j) {
    uint at = t + j * uint(GROUP), row = at / uint(HEAD_D), f = at % uint(HEAD_D), query = firstOwn + row;
    if (row >= uint(OWN_ROWS) || query >= S) continue;
    uint to = projection + query * 3u * E + f;
    dqkv[to] = (added != 0u ? dqkv[to] : 0.0) + scale * sums[j];
  }
#else
  // The block's keys and values, and each key's mask (−inf past S).
  for (uint at = t; at < uint(OWN_ROWS * HEAD_D); at += uint(GROUP)) {
    uint row = at / uint(HEAD_D), f = at % uint(HEAD_D), key = firstOwn + row;
    ownA[row * PITCH + f] = key < S ? part(key, 1u, f) : 0.0;
    ownB[row * PITCH + f] = key < S ? part(key, 2u, f) : 0.0;
  }
  if (t < uint(OWN_ROWS)) ownRows[t] = vec2(firstOwn + t < S ? KEY_MASK_AT(batch, firstOwn + t) : NEGATIVE_INFINITY, 0.0);
#ifdef CAUSAL
  uint firstQuery = firstOwn / uint(OTHER_ROWS) * uint(OTHER_ROWS);  // queries before the block's first key see none of it
#else
  uint firstQuery = 0u;
#endif
  for (uint first = firstQuery; first < S; first += uint(OTHER_ROWS)) {
    barrier();
    for (uint at = t; at < uint(OTHER_ROWS * HEAD_D); at += uint(GROUP)) {
      uint row = at / uint(HEAD_D), f = at % uint(HEAD_D), query = first + row;
      otherA[row * PITCH + f] = query < S ? part(query, 0u, f) : 0.0;
      otherB[row * PITCH + f] = query < S ? dO[outputs + query * E + f] : 0.0;
    }
    if (t < uint(OTHER_ROWS)) otherRows[t] = first + t < S ? stats[lines + first + t] : vec2(0.0);
    barrier();
    for (uint at = t; at < uint(OTHER_ROWS * OWN_ROWS); at += uint(GROUP)) {
      uint row = at / uint(OWN_ROWS), column = at % uint(OWN_ROWS), query = first + row, key = firstOwn + column;
      float score = 0.0, product = 0.0;
      for (uint f = 0u; f < uint(HEAD_D); ++f) {
        score += otherA[row * PITCH + f] * ownA[column * PITCH + f];
        product += otherB[row * PITCH + f] * ownB[column * PITCH + f];
      }
      bool hidden = query >= S;
#ifdef CAUSAL
      hidden = hidden || key > query;
#endif
      vec2 line = otherRows[row];
      // A masked key gives exp(−inf − L) = 0, or NaN when its query sees no key at all (L = −inf).
      float p = hidden ? 0.0 : exp(scale * score + ownRows[column].x - line.x);
      uint entry = row * uint(OWN_ROWS) + column;
      tileP[entry] = p;
      tileDS[entry] = hidden ? 0.0 : p * (product - line.y);
    }
    barrier();
    for (uint j = 0u; j < uint(OWNED); ++j) {
      uint at = t + j * uint(GROUP), column = at / uint(HEAD_D), f = at % uint(HEAD_D);
      if (column >= uint(OWN_ROWS)) continue;
      for (uint row = 0u; row < uint(OTHER_ROWS); ++row) {
        float value = tileP[row * uint(OWN_ROWS) + column] * otherB[row * PITCH + f];  // dV
        float key = tileDS[row * uint(OWN_ROWS) + column] * otherA[row * PITCH + f];   // dK
#ifdef CAUSAL
        // A query that does not see the key adds nothing, not 0·Q (NaN for a NaN in Q).
        bool unseen = first + row < firstOwn + column;
        value = unseen ? 0.0 : value;
        key = unseen ? 0.0 : key;
#endif
        sums[j] += value;
        sums2[j] += key;
      }
    }
  }
  for (uint j = 0u; j < uint(OWNED); ++j) {
    uint at = t + j * uint(GROUP), column = at / uint(HEAD_D), f = at % uint(HEAD_D), key = firstOwn + column;
    if (column >= uint(OWN_ROWS) || key >= S) continue;
    uint keyAt = projection + key * 3u * E + E + f, valueAt = keyAt + E;
    dqkv[keyAt] = (added != 0u ? dqkv[keyAt] : 0.0) + scale * sums2[j];
    dqkv[valueAt] = (added != 0u ? dqkv[valueAt] : 0.0) + sums[j];
  }
#endif
}
