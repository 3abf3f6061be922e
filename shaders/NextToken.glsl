// The next token of each row of logits Z [rows × V] (row r at Z[logitsOffset + r·stride]: a decode step's logits, or the
// last position's of each sequence after a prefill), chosen on the GPU so that a decode step reads back only the ids.
// A row holding a NaN gets id V, which no token has: the host refuses it.
//   NEXT_TOKEN_MODE_ARGMAX_BLOCKS: groups (blocks, rows); block b of row r takes the columns [b·chunk, (b+1)·chunk)
//     and writes its first largest (value bits, column) to partial[r·blocks + b], or with one block per row the id.
//   NEXT_TOKEN_MODE_ARGMAX_FINAL: groups (1, rows); the row's `blocks` partials combined into its id.
//   NEXT_TOKEN_MODE_SAMPLE: groups (1, rows); a row's token drawn as numbers/Sampling.h defines it, in passes over the
//     row by one group: its largest logit M (a NaN, or an M that is not finite, gives V); top-k's k-th largest logit by
//     a radix search over the logits' bits, 8 bits a pass, counting in shared memory (its first pass in M's, then up to
//     3); top-p's threshold by the same search summing the kept tokens' weights w = exp((z − M)/T) (up to 4 passes);
//     then the draw: every invocation sums the kept weights of a contiguous run of columns, and the one whose run holds
//     the target u·Σw finds the token (1 pass and one run; u = bits/2^32, bits = DRAW_BITS of (seed, step, row)).
//     Weights are summed as 64-bit fixed point (w·2^31 rounded, uvec2 with carries), so sums are exact and the same in
//     any order: a seed gives the same tokens on every run, and atomics add them in shared memory.
//     Cost per row: 2 to 9 reads of V logits (M's pass and the draw's; top-k adds up to 3, top-p up to 4, the searches
//     often stopping a pass early), the top-p passes and the draw with an exp per logit they weigh, all by one group:
//     a batch of rows fills the GPU, a single row one multiprocessor.
// The id goes to ids[idsOffset + r] (uint) and idFloats[floatOffset + r·floatStride] (the same number as an exact float: the next
// step's input, glnet's integer tensors being floats).
// bindings: 0 Z read, 1 ids write, 2 idFloats write, 3 partial (uvec2 per block) written (BLOCKS) or read (FINAL)
// uniforms: 0 V, 1 stride, 2 blocks, 3 chunk, 4 floatOffset, 5 floatStride, 12 logitsOffset, 13 idsOffset; SAMPLE: 6 temperature,
//   7 top-k (0 off), 8 top-p (1 off), 9 and 10 the seed's low and high 32 bits, 11 the step
// defines: NEXT_TOKEN_MODE; SAMPLE: DRAW_BITS (numbers/Sampling.h's GLNET_DRAW_BITS)
layout(local_size_x = LOCAL_SIZE_X) in;

layout(std430, binding = 0) readonly buffer Logits { float Z[]; };
layout(std430, binding = 1) writeonly buffer Ids { uint ids[]; };
layout(std430, binding = 2) writeonly buffer IdFloats { float idFloats[]; };
layout(std430, binding = 3) buffer Partial { uvec2 partial[]; };
layout(location = 0) uniform uint V;
layout(location = 1) uniform uint stride;
layout(location = 2) uniform uint blocks;
layout(location = 3) uniform uint chunk;
layout(location = 4) uniform uint floatOffset;
layout(location = 5) uniform uint floatStride;
layout(location = 12) uniform uint logitsOffset;
layout(location = 13) uniform uint idsOffset;
#if NEXT_TOKEN_MODE == NEXT_TOKEN_MODE_SAMPLE
layout(location = 6) uniform float temperature;
layout(location = 7) uniform uint topK;
layout(location = 8) uniform float topP;
layout(location = 9) uniform uint seedLow;
layout(location = 10) uniform uint seedHigh;
layout(location = 11) uniform uint decodeStep;
#endif

// A macro: a global const may not be initialised by a function call in GLSL 4.30 or ESSL 3.10.
#define NEGATIVE_INFINITY uintBitsToFloat(0xff800000u)

void writeId(uint row, uint id) {
  ids[idsOffset + row] = id;
  idFloats[floatOffset + row * floatStride] = float(id);
}

// Whether (value, column) replaces (best, bestColumn) as a row's choice: a larger value or an equal one further left, and
// any NaN over every number (common.glsl's beats: a NaN once chosen stays, so that the row's id becomes V).
bool replaces(float value, uint column, float best, uint bestColumn) {
  return beats(value, best) || (value == best && column < bestColumn);
}

// One row per quantity; see AxisReduce.glsl on why a combined value is read once, before anything rewrites its row.
shared float bestValues[LOCAL_SIZE_X];
shared uint bestColumns[LOCAL_SIZE_X];

// The group's choice among every invocation's (value, column); all invocations get it.
uvec2 combineGroup(float value, uint column) {
  uint local = gl_LocalInvocationID.x;
  bestValues[local] = value;
  bestColumns[local] = column;
  memoryBarrierShared();
  barrier();
  for (uint span = uint(LOCAL_SIZE_X / 2); span > 0u; span >>= 1) {
    if (local < span) {
      float other = bestValues[local + span];
      uint otherColumn = bestColumns[local + span];
      if (replaces(other, otherColumn, bestValues[local], bestColumns[local])) {
        bestValues[local] = other;
        bestColumns[local] = otherColumn;
      }
    }
    memoryBarrierShared();
    barrier();
  }
  return uvec2(floatBitsToUint(bestValues[0]), bestColumns[0]);
}

// A row's id from its choice: V for a NaN.
uint chosenId(uvec2 choice) { return isNaN(uintBitsToFloat(choice.x)) ? V : choice.y; }

#if NEXT_TOKEN_MODE == NEXT_TOKEN_MODE_SAMPLE
uint drawBits(uint row) {
  uint h = 0u;
  return DRAW_BITS;
}

// Logits as unsigned numbers in the same order (−0 as +0, so that equal logits have equal keys).
uint orderedKey(float z) {
  uint bits = z == 0.0 ? 0u : floatBitsToUint(z);
  return (bits & 0x80000000u) != 0u ? ~bits : bits | 0x80000000u;
}

// 64-bit unsigned numbers as (low, high).
uvec2 add64(uvec2 a, uvec2 b) {
  uint carry;
  uint low = uaddCarry(a.x, b.x, carry);
  return uvec2(low, a.y + b.y + carry);
}
bool less64(uvec2 a, uvec2 b) { return a.y < b.y || (a.y == b.y && a.x < b.x); }

// A kept token's weight exp((z − M)/T) ≤ 1 in units of 2^-31, rounded.
uint fixedWeight(float z, float largest) { return uint(exp((z - largest) / temperature) * 2147483648.0 + 0.5); }

// The radix search's histogram of one 8-bit digit (64-bit sums: low and high words; counts too where the sums are
// weights), its sums by sixteen digits, and per search and pass the key prefix chosen and whether the search is done
// (never rewritten: see AxisReduce.glsl). Its walks run on invocation 0, which alone keeps their running sums.
shared uint digitLow[256];
shared uint digitHigh[256];
shared uint digitCount[256];
shared uvec2 sixteenDigits[16];
shared uint chosenPrefix[8];
shared bool searchDone[8];
// The draw's runs of columns: each invocation's kept weight, their sums by sixteen runs, the run holding the target and
// where that run starts.
shared uvec2 runWeight[LOCAL_SIZE_X];
shared uvec2 sixteenRuns[LOCAL_SIZE_X / 16];
shared uint targetRun;
shared uvec2 targetRunStart;
shared uvec2 drawTarget;

uvec2 digitSum(uint d) { return uvec2(digitLow[d], digitHigh[d]); }

void clearDigits() {
  for (uint d = gl_LocalInvocationID.x; d < 256u; d += uint(LOCAL_SIZE_X)) {
    digitLow[d] = 0u;
    digitHigh[d] = 0u;
    digitCount[d] = 0u;
  }
  memoryBarrierShared();
  barrier();
}

// The key of the smallest logit among those of keys ≥ lowestKey at which a running sum from the largest logit down
// first reaches `target`: of counts (WEIGHTED false: top-k, target k, the k-th largest counting ties one by one), or
// of weights (top-p: target p·Σw rounded up, computed in the first pass; a logit stays while the weight of those above
// it is below p·Σw). 8 bits of the key a pass, from the top, up to 4 passes over the row; it stops early where every
// logit of the digit chosen is kept (top-k: the count reaches k exactly; top-p: the digit holds one logit), the key's
// lower bits then 0. `counted`: the first pass's counts are in the histogram already (main's first pass made them).
uint searchKey(uint base, float largest, uint lowestKey, bool weighted, uint search, bool counted) {
  uint local = gl_LocalInvocationID.x, prefix = 0u;
  uvec2 above = uvec2(0u), target = uvec2(topK, 0u);
  for (uint pass = 0u; pass < 4u; ++pass) {
    uint shift = 24u - 8u * pass;
    if (pass > 0u || !counted) {
      clearDigits();
      uint mask = pass == 0u ? 0u : 0xffffffffu << (shift + 8u);
      for (uint column = local; column < V; column += uint(LOCAL_SIZE_X)) {
        float z = Z[base + column];
        uint key = orderedKey(z);
        if (key >= lowestKey && (key & mask) == prefix) {
          uint d = (key >> shift) & 255u, weight = weighted ? fixedWeight(z, largest) : 1u;
          if (atomicAdd(digitLow[d], weight) > 0xffffffffu - weight) atomicAdd(digitHigh[d], 1u);
          // Counts for the early stop, after the first pass, which would pay a second atomic for every logit.
          if (weighted && pass > 0u) atomicAdd(digitCount[d], 1u);
        }
      }
      memoryBarrierShared();
      barrier();
    }
    if (local < 16u) {
      uvec2 sum = uvec2(0u);
      for (uint d = 16u * local; d < 16u * local + 16u; ++d) sum = add64(sum, digitSum(d));
      sixteenDigits[local] = sum;
    }
    memoryBarrierShared();
    barrier();
    if (local == 0u) {
      if (weighted && pass == 0u) {
        uvec2 total = uvec2(0u);
        for (uint g = 0u; g < 16u; ++g) total = add64(total, sixteenDigits[g]);
        // At least 1, so that the digit chosen holds some weight (a device that flushes a denormal p to 0 would give 0).
        float wanted = max(ceil(topP * (float(total.y) * 4294967296.0 + float(total.x))), 1.0);
        float high = floor(wanted / 4294967296.0);
        target = uvec2(uint(wanted - high * 4294967296.0), uint(high));
        if (less64(total, target)) target = total;
      }
      // From the top, sixteen digits at a time, then digit by digit; the last digit holds the target if none above does.
      uint g = 15u;
      for (; g > 0u && less64(add64(above, sixteenDigits[g]), target); --g) above = add64(above, sixteenDigits[g]);
      uint d = 16u * g + 15u;
      for (; d > 16u * g && less64(add64(above, digitSum(d)), target); --d) above = add64(above, digitSum(d));
      chosenPrefix[4u * search + pass] = prefix | (d << shift);
      searchDone[4u * search + pass] = weighted ? digitCount[d] == 1u : add64(above, digitSum(d)) == target;
    }
    memoryBarrierShared();
    barrier();
    prefix = chosenPrefix[4u * search + pass];
    if (searchDone[4u * search + pass]) break;
  }
  return prefix;
}
#endif

void main() {
  uint local = gl_LocalInvocationID.x, row = gl_WorkGroupID.y;
#if NEXT_TOKEN_MODE == NEXT_TOKEN_MODE_ARGMAX_BLOCKS
  uint block = gl_WorkGroupID.x;
  uint begin = block * chunk, end = min(begin + chunk, V);
  float best = NEGATIVE_INFINITY;
  uint bestColumn = 0xffffffffu;  // loses every tie, so a block of −inf values chooses its first
  for (uint column = begin + local; column < end; column += uint(LOCAL_SIZE_X)) {
    float value = Z[logitsOffset + row * stride + column];
    if (replaces(value, column, best, bestColumn)) {
      best = value;
      bestColumn = column;
    }
  }
  uvec2 choice = combineGroup(best, bestColumn);
  if (local == 0u) {
    if (blocks == 1u) writeId(row, chosenId(choice));
    else partial[row * blocks + block] = choice;
  }
#elif NEXT_TOKEN_MODE == NEXT_TOKEN_MODE_ARGMAX_FINAL
  float best = NEGATIVE_INFINITY;
  uint bestColumn = 0xffffffffu;
  for (uint block = local; block < blocks; block += uint(LOCAL_SIZE_X)) {
    uvec2 candidate = partial[row * blocks + block];
    if (replaces(uintBitsToFloat(candidate.x), candidate.y, best, bestColumn)) {
      best = uintBitsToFloat(candidate.x);
      bestColumn = candidate.y;
    }
  }
  uvec2 choice = combineGroup(best, bestColumn);
  if (local == 0u) writeId(row, chosenId(choice));
#elif NEXT_TOKEN_MODE == NEXT_TOKEN_MODE_SAMPLE
  uint base = logitsOffset + row * stride;
  // The largest logit, and with top-k the counts of its search's first pass, which need no M.
  bool searchTopK = topK > 0u && topK < V;
  if (searchTopK) clearDigits();
  float best = NEGATIVE_INFINITY;
  uint bestColumn = 0xffffffffu;
  for (uint column = local; column < V; column += uint(LOCAL_SIZE_X)) {
    float value = Z[base + column];
    if (replaces(value, column, best, bestColumn)) {
      best = value;
      bestColumn = column;
    }
    if (searchTopK) atomicAdd(digitLow[orderedKey(value) >> 24], 1u);
  }
  float largest = uintBitsToFloat(combineGroup(best, bestColumn).x);  // its barriers complete the counts too
  if (isNaN(largest) || isInf(largest)) {
    if (local == 0u) writeId(row, V);
    return;
  }
  uint lowestKey = searchTopK ? searchKey(base, largest, 0u, false, 0u, true) : 0u;
  // max: a top-p search that stops early gives its digit's lowest key, which may lie below top-k's.
  if (topP < 1.0) lowestKey = max(lowestKey, searchKey(base, largest, lowestKey, true, 1u, false));
  // The draw: runs of contiguous columns, so that their sums in invocation order are sums in column order.
  uint run = (V + uint(LOCAL_SIZE_X) - 1u) / uint(LOCAL_SIZE_X);
  uint begin = min(local * run, V), end = min(begin + run, V);
  uvec2 own = uvec2(0u);
  for (uint column = begin; column < end; ++column) {
    float z = Z[base + column];
    if (orderedKey(z) >= lowestKey) own = add64(own, uvec2(fixedWeight(z, largest), 0u));
  }
  runWeight[local] = own;
  memoryBarrierShared();
  barrier();
  if (local < uint(LOCAL_SIZE_X / 16)) {
    uvec2 sum = uvec2(0u);
    for (uint i = 16u * local; i < 16u * local + 16u; ++i) sum = add64(sum, runWeight[i]);
    sixteenRuns[local] = sum;
  }
  memoryBarrierShared();
  barrier();
  if (local == 0u) {
    uvec2 total = uvec2(0u);
    for (uint g = 0u; g < uint(LOCAL_SIZE_X / 16); ++g) total = add64(total, sixteenRuns[g]);
    // floor(Σw · bits / 2^32): below Σw, exact.
    uint bits = drawBits(row), lowCarry, lowProduct, high, highLow;
    umulExtended(total.x, bits, lowCarry, lowProduct);
    umulExtended(total.y, bits, high, highLow);
    uvec2 target = add64(uvec2(highLow, high), uvec2(lowCarry, 0u)), start = uvec2(0u);
    // The run holding it: sixteen runs at a time, then run by run.
    uint g = 0u;
    for (; g + 1u < uint(LOCAL_SIZE_X / 16) && !less64(target, add64(start, sixteenRuns[g])); ++g) start = add64(start, sixteenRuns[g]);
    uint i = 16u * g;
    for (; i + 1u < 16u * g + 16u && !less64(target, add64(start, runWeight[i])); ++i) start = add64(start, runWeight[i]);
    drawTarget = target;
    targetRun = i;
    targetRunStart = start;
  }
  memoryBarrierShared();
  barrier();
  // The run holding the target finds the first column whose running sum passes it.
  if (local == targetRun) {
    uvec2 target = drawTarget, running = targetRunStart;
    for (uint column = begin; column < end; ++column) {
      float z = Z[base + column];
      if (orderedKey(z) < lowestKey) continue;
      running = add64(running, uvec2(fixedWeight(z, largest), 0u));
      if (less64(target, running)) {
        writeId(row, column);
        break;
      }
    }
  }
#else
#error unknown NEXT_TOKEN_MODE
#endif
}
