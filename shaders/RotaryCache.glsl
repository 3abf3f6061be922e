// A decoder layer's new keys and values appended to its KV cache, with rotary position embeddings (ROTARY: Llama's,
// in Hugging Face's rotate-half convention) applied to the queries in place and to the keys as they are written.
// qkv holds per row the H query heads, then the Hkv key heads, then the Hkv value heads, D features each (one fused
// projection); the cache holds K [Hkv, context, D] and then V [Hkv, context, D], so that each head's keys lie along
// the sequence for the attention that reads them. Row r is at position first + r of one sequence (a prompt), or with
// ROW_POSITIONS each row is a sequence of its own (a decode step of several): row r at positions[r], written into the
// r-th cache of the binding.
// Rotation of a head vector x at position p, halfSize = D/2, i < halfSize:
//   x'[i] = x[i]·cos(p, i) − x[i + halfSize]·sin(p, i),  x'[i + halfSize] = x[i + halfSize]·cos(p, i) + x[i]·sin(p, i)
// with the angles' cosines and sines from tables computed on the host in float64 (the config's theta and scaling).
// Invocations: first (ROTARY) one per (row, query or key head, i < halfSize), rotating the pair; then one per (row, KV
// head, feature) copying the value and, without ROTARY, the key.
// bindings: 0 qkv [rows, (H + 2·Hkv)·D] read-write, 1 cache write, 2 cos [context, halfSize] read, 3 sin [context, halfSize] read
//   (ROTARY), 4 positions (uint per row) read (ROW_POSITIONS)
// uniforms: 0 count (all invocations), 1 rows, 2 H, 3 Hkv, 4 D, 5 the first row's position (without ROW_POSITIONS),
// 6 context (the cache's positions per head)
layout(local_size_x = LOCAL_SIZE_X) in;

layout(std430, binding = 0) buffer Projections { float qkv[]; };
layout(std430, binding = 1) writeonly buffer Cache { float cache[]; };
#ifdef ROTARY
layout(std430, binding = 2) readonly buffer Cosines { float cosines[]; };
layout(std430, binding = 3) readonly buffer Sines { float sines[]; };
#endif
#ifdef ROW_POSITIONS
layout(std430, binding = 4) readonly buffer Positions { uint positions[]; };
#endif
layout(location = 0) uniform uint count;
layout(location = 1) uniform uint rows;
layout(location = 2) uniform uint H;
layout(location = 3) uniform uint Hkv;
layout(location = 4) uniform uint D;
layout(location = 5) uniform uint firstPosition;
layout(location = 6) uniform uint context;

// Row r's position, and where its cache starts.
uint positionOf(uint row) {
#ifdef ROW_POSITIONS
  return positions[row];
#else
  return firstPosition + row;
#endif
}
uint cacheOf(uint row) {
#ifdef ROW_POSITIONS
  return row * 2u * Hkv * context * D;
#else
  return 0u;
#endif
}

void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i >= count) return;
  uint width = (H + 2u * Hkv) * D;
  uint values = Hkv * context * D;  // where V starts in the cache
#ifdef ROTARY
  uint halfSize = D / 2u;
  uint pairs = rows * (H + Hkv) * halfSize;
  if (i < pairs) {
    uint row = i / ((H + Hkv) * halfSize), head = (i / halfSize) % (H + Hkv), k = i % halfSize;
    uint position = positionOf(row);
    uint at = row * width + head * D + k;
    float c = cosines[position * halfSize + k], s = sines[position * halfSize + k];
    float low = qkv[at], high = qkv[at + halfSize];
    float rotatedLow = low * c - high * s, rotatedHigh = high * c + low * s;
    if (head < H) {
      qkv[at] = rotatedLow;
      qkv[at + halfSize] = rotatedHigh;
    } else {
      uint slot = cacheOf(row) + ((head - H) * context + position) * D + k;
      cache[slot] = rotatedLow;
      cache[slot + halfSize] = rotatedHigh;
    }
    return;
  }
  i -= pairs;
#endif
  uint row = i / (Hkv * D), head = (i / D) % Hkv, d = i % D;
  uint slot = cacheOf(row) + (head * context + positionOf(row)) * D + d;
  uint at = row * width + H * D + head * D + d;
  cache[values + slot] = qkv[at + Hkv * D];
#ifndef ROTARY
  cache[slot] = qkv[at];
#endif
}
