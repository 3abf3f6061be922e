// The next token of each row of logits Z [rows × V] (row r at Z[r·stride]), chosen on the GPU so that a decode step
// reads back only the ids. A row holding a NaN gets id V, which no token has: the host refuses it.
//   NEXT_TOKEN_MODE_ARGMAX_BLOCKS: groups (blocks, rows); block b of row r takes the columns [b·chunk, (b+1)·chunk)
//     and writes its first largest (value bits, column) to partial[r·blocks + b], or with one block per row the id.
//   NEXT_TOKEN_MODE_ARGMAX_FINAL: groups (1, rows); the row's `blocks` partials combined into its id.
//   NEXT_TOKEN_MODE_SAMPLE: groups (1, rows); a row's token drawn as numbers/Sampling.h defines it, in passes over the row
//     by one group: its largest logit M (a NaN, or an M that is not finite, gives V); top-k's k-th largest logit by a
//     radix search over the logits' bits, 8 bits a pass, counting in shared memory (4 passes); top-p's threshold by the
//     same search over the kept tokens' weights w = exp((z − M)/T) (4 passes); then the draw: every invocation sums the
//     kept weights of a contiguous run of columns, and the one whose run holds the target u·Σw finds the token (2
//     passes). Weights are summed as 64-bit fixed point (w·2^31 rounded, uvec2 with carries), so sums are exact and
//     the same in any order: a seed gives the same tokens on every run, and atomics add them in shared memory.
//     Cost per row: up to 11 reads of V logits, 7 of them with an exp, by one group.
// The id goes to ids[r] (uint) and idFloats[floatOffset + r·floatStride] (the same number as an exact float: the next
// step's input, glnet's integer tensors being floats).
// bindings: 0 Z read, 1 ids write, 2 idFloats write, 3 partial (uvec2 per block) written (BLOCKS) or read (FINAL)
// uniforms: 0 V, 1 stride, 2 blocks, 3 chunk, 4 floatOffset, 5 floatStride; SAMPLE: 6 temperature, 7 top-k (0 off), 8 top-p
//   (1 off), 9 and 10 the seed's low and high 32 bits, 11 the step
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
#if NEXT_TOKEN_MODE == NEXT_TOKEN_MODE_SAMPLE
layout(location = 6) uniform float temperature;
layout(location = 7) uniform uint topK;
layout(location = 8) uniform float topP;
layout(location = 9) uniform uint seedLow;
layout(location = 10) uniform uint seedHigh;
layout(location = 11) uniform uint decodeStep;
#endif

const float negativeInfinity = uintBitsToFloat(0xff800000u);

void writeId(uint row, uint id) {
  ids[row] = id;
  idFloats[floatOffset + row * floatStride] = float(id);
}

// Whether (value, column) replaces (best, bestColumn) as a row's choice: a larger value or an equal one further left, and
// any NaN over every number (a NaN once chosen stays, so that the row's id becomes V).
bool replaces(float value, uint column, float best, uint bestColumn) {
  if (isNaN(best)) return false;
  return isNaN(value) || value > best || (value == best && column < bestColumn);
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

// The radix searches' histogram of one 8-bit digit: counts (top-k) or weight sums (top-p, 64 bits: low and high
// words), and the key prefix its walk chose, one entry per search and level (never rewritten: see AxisReduce.glsl).
// The walks run on invocation 0, which alone keeps their running sums.
shared uint digitLow[256];
shared uint digitHigh[256];
shared uint chosenPrefix[8];
// The draw's runs of columns: each invocation's kept weight and where its run starts; the total; the target.
shared uvec2 runWeight[LOCAL_SIZE_X];
shared uvec2 runStart[LOCAL_SIZE_X];
shared uvec2 drawTarget;

void clearDigits() {
  for (uint d = gl_LocalInvocationID.x; d < 256u; d += uint(LOCAL_SIZE_X)) {
    digitLow[d] = 0u;
    digitHigh[d] = 0u;
  }
  memoryBarrierShared();
  barrier();
}

// The key of the k-th largest logit of the row (ties counted one by one), 8 bits a pass from the top.
uint topKKey(uint base) {
  uint prefix = 0u, rest = topK;
  for (int level = 0; level < 4; ++level) {
    clearDigits();
    uint shift = uint(24 - 8 * level);
    uint mask = level == 0 ? 0u : 0xffffffffu << (shift + 8u);
    for (uint column = gl_LocalInvocationID.x; column < V; column += uint(LOCAL_SIZE_X)) {
      uint key = orderedKey(Z[base + column]);
      if ((key & mask) == prefix) atomicAdd(digitLow[(key >> shift) & 255u], 1u);
    }
    memoryBarrierShared();
    barrier();
    if (gl_LocalInvocationID.x == 0u) {
      uint above = 0u, d = 255u;
      for (; d > 0u && above + digitLow[d] < rest; --d) above += digitLow[d];
      chosenPrefix[level] = prefix | (d << shift);
      rest -= above;
    }
    memoryBarrierShared();
    barrier();
    prefix = chosenPrefix[level];
  }
  return prefix;
}

// The key of the smallest logit that top-p keeps among those of keys ≥ lowestKey: the one at which the weight of the
// logits above it, plus its own, first reaches p·Σw (a logit stays while the weight above it is below p·Σw).
uint topPKey(uint base, float largest, uint lowestKey) {
  uint prefix = 0u;
  uvec2 above = uvec2(0u), target = uvec2(0u);
  for (int level = 0; level < 4; ++level) {
    clearDigits();
    uint shift = uint(24 - 8 * level);
    uint mask = level == 0 ? 0u : 0xffffffffu << (shift + 8u);
    for (uint column = gl_LocalInvocationID.x; column < V; column += uint(LOCAL_SIZE_X)) {
      float z = Z[base + column];
      uint key = orderedKey(z);
      if (key >= lowestKey && (key & mask) == prefix) {
        uint d = (key >> shift) & 255u, weight = fixedWeight(z, largest);
        if (atomicAdd(digitLow[d], weight) > 0xffffffffu - weight) atomicAdd(digitHigh[d], 1u);
      }
    }
    memoryBarrierShared();
    barrier();
    if (gl_LocalInvocationID.x == 0u) {
      if (level == 0) {
        // p·Σw rounded up (a weight above it is an integer), at least 1 so that a chosen digit holds some weight.
        uvec2 total = uvec2(0u);
        for (uint d = 0u; d < 256u; ++d) total = add64(total, uvec2(digitLow[d], digitHigh[d]));
        float wanted = ceil(topP * (float(total.y) * 4294967296.0 + float(total.x)));
        float high = floor(wanted / 4294967296.0);
        target = uvec2(uint(wanted - high * 4294967296.0), uint(high));
        if (less64(total, target)) target = total;
        if (target == uvec2(0u)) target = uvec2(1u, 0u);
      }
      uint d = 255u;
      for (; d > 0u; --d) {
        uvec2 reached = add64(above, uvec2(digitLow[d], digitHigh[d]));
        if (!less64(reached, target)) break;
        above = reached;
      }
      chosenPrefix[4 + level] = prefix | (d << shift);
    }
    memoryBarrierShared();
    barrier();
    prefix = chosenPrefix[4 + level];
  }
  return prefix;
}
#endif

void main() {
  uint local = gl_LocalInvocationID.x, row = gl_WorkGroupID.y;
#if NEXT_TOKEN_MODE == NEXT_TOKEN_MODE_ARGMAX_BLOCKS
  uint block = gl_WorkGroupID.x;
  uint begin = block * chunk, end = min(begin + chunk, V);
  float best = negativeInfinity;
  uint bestColumn = 0xffffffffu;  // loses every tie, so a block of −inf values chooses its first
  for (uint column = begin + local; column < end; column += uint(LOCAL_SIZE_X)) {
    float value = Z[row * stride + column];
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
  float best = negativeInfinity;
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
  uint base = row * stride;
  float best = negativeInfinity;
  uint bestColumn = 0xffffffffu;
  for (uint column = local; column < V; column += uint(LOCAL_SIZE_X)) {
    float value = Z[base + column];
    if (replaces(value, column, best, bestColumn)) {
      best = value;
      bestColumn = column;
    }
  }
  float largest = uintBitsToFloat(combineGroup(best, bestColumn).x);
  if (isNaN(largest) || isInf(largest)) {
    if (local == 0u) writeId(row, V);
    return;
  }
  uint lowestKey = topK > 0u && topK < V ? topKKey(base) : 0u;
  if (topP < 1.0) lowestKey = topPKey(base, largest, lowestKey);
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
  if (local == 0u) {
    uvec2 total = uvec2(0u);
    for (uint i = 0u; i < uint(LOCAL_SIZE_X); ++i) {
      runStart[i] = total;
      total = add64(total, runWeight[i]);
    }
    // floor(Σw · bits / 2^32): below Σw, exact.
    uint bits = drawBits(row), lowCarry, lowProduct, high, highLow;
    umulExtended(total.x, bits, lowCarry, lowProduct);
    umulExtended(total.y, bits, high, highLow);
    drawTarget = add64(uvec2(highLow, high), uvec2(lowCarry, 0u));
  }
  memoryBarrierShared();
  barrier();
  uvec2 target = drawTarget, running = runStart[local];
  // The one run holding the target finds the first column whose running sum passes it.
  if (!less64(target, running) && less64(target, add64(running, own))) {
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
