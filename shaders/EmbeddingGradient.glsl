// The gradient of an embedding table (graph/SequenceOps.cpp): y[p] = table[ids[p]] for P positions, so
//   dTable[v][e] = Σ dY[p][e] over the positions p whose id is v
// in a fixed order (the same ids and dY give the same bits, unlike atomic adds). One work group per vocabulary row v:
// it walks the ids in chunks of EMBEDDING_GROUP, each invocation comparing one, and sums only the chunks that hold v.
// The group's invocations are LANES lanes of FEATURE_THREADS (at least a warp each): lane l sums the chunk's
// positions l, l + LANES, ..., invocation t of a lane features t, t + FEATURE_THREADS, ... (FEATURES_PER_INVOCATION of
// them); at the end the lanes' sums are added in lane order. A row that most positions name (padding, [CLS]) thus
// keeps LANES · FEATURES_PER_INVOCATION loads in flight per invocation instead of walking its positions one by one.
// A row no id names gets 0; an id that is NaN, fractional or outside the table names none (its forward output is NaN);
// a negative id names the row V + id, as the forward gather (ONNX's Gather) reads it.
// Work groups along z take runs of `segmentPositions` positions each, group z writing its sums to table z of binding 2
// (SequenceOps.cpp adds the tables in order, SplitSum.glsl); with one run, the table gradient itself.
// bindings: 0 ids [P] (floats) read, 1 dY [P, E] read, 2 dTable [runs, V, E] (added to what is there when `added` is 1)
// uniforms: 0 P, 1 E, 2 V, 3 added, 4 segmentPositions (a multiple of EMBEDDING_GROUP)
// defines: EMBEDDING_GROUP, FEATURE_THREADS (dividing it), FEATURES_PER_INVOCATION (E / FEATURE_THREADS rounded up)
// NVIDIA's compiler keeps the small fixed loops as loops over local memory unless told to unroll them (see Gemm.glsl).
#pragma optionNV(unroll all)
#define LANES (EMBEDDING_GROUP / FEATURE_THREADS)
layout(local_size_x = EMBEDDING_GROUP) in;

layout(std430, binding = 0) readonly buffer Ids { float ids[]; };
layout(std430, binding = 1) readonly buffer OutputGradient { float dY[]; };
layout(std430, binding = 2) buffer TableGradient { float dTable[]; };
layout(location = 0) uniform uint P;
layout(location = 1) uniform uint E;
layout(location = 2) uniform uint V;
layout(location = 3) uniform uint added;
layout(location = 4) uniform uint segmentPositions;

shared uint matches[EMBEDDING_GROUP];
shared uint anyMatch;
#if LANES > 1
// Sum k of invocation t at k · EMBEDDING_GROUP + t (consecutive invocations, distinct banks).
shared float laneSums[FEATURES_PER_INVOCATION * EMBEDDING_GROUP];
#endif

void main() {
  // V may pass the 65 535 groups of one axis; the row is the same for the whole group, so all leave together.
  uint row = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  if (row >= V) return;
  uint t = gl_LocalInvocationID.x, lane = t / uint(FEATURE_THREADS), feature = t % uint(FEATURE_THREADS);
  float id = float(row);
  float sums[FEATURES_PER_INVOCATION];
  for (uint k = 0u; k < uint(FEATURES_PER_INVOCATION); ++k) sums[k] = 0.0;
  uint first = gl_WorkGroupID.z * segmentPositions, end = min(P, first + segmentPositions);
  for (uint chunk = first; chunk < end; chunk += uint(EMBEDDING_GROUP)) {
    if (t == 0u) anyMatch = 0u;
    barrier();
    uint p = chunk + t;
    float given = p < end ? ids[p] : -1.0;
    bool match = p < end && (given < 0.0 ? given + float(V) : given) == id;
    matches[t] = match ? 1u : 0u;
    if (match) atomicOr(anyMatch, 1u);
    barrier();
    if (anyMatch != 0u) {
      // Every step loads, a position of another id (or a feature past E) reading row 0 (in cache after the first)
      // and adding 0: a load under a branch would wait for the sum before it, one position at a time.
      for (uint step = 0u; step < uint(EMBEDDING_GROUP / LANES); ++step) {
        uint j = step * uint(LANES) + lane;
        bool take = matches[j] != 0u;  // false past the run
        uint base = (chunk + j) * E;
        for (uint k = 0u; k < uint(FEATURES_PER_INVOCATION); ++k) {
          uint e = min(feature + k * uint(FEATURE_THREADS), E - 1u);
          bool summed = take && feature + k * uint(FEATURE_THREADS) < E;
          float value = dY[summed ? base + e : e];
          sums[k] += summed ? value : 0.0;
        }
      }
    }
    barrier();  // before the next chunk overwrites the flags
  }
#if LANES > 1
  for (uint k = 0u; k < uint(FEATURES_PER_INVOCATION); ++k) laneSums[k * uint(EMBEDDING_GROUP) + t] = sums[k];
  barrier();
  if (lane != 0u) return;
  for (uint other = 1u; other < uint(LANES); ++other) {
    for (uint k = 0u; k < uint(FEATURES_PER_INVOCATION); ++k) sums[k] += laneSums[k * uint(EMBEDDING_GROUP) + other * uint(FEATURE_THREADS) + t];
  }
#endif
  for (uint k = 0u; k < uint(FEATURES_PER_INVOCATION); ++k) {
    uint e = feature + k * uint(FEATURE_THREADS);
    if (e >= E) continue;
    uint at = (gl_WorkGroupID.z * V + row) * E + e;
    dTable[at] = (added != 0u ? dTable[at] : 0.0) + sums[k];
  }
}
