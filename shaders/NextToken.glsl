// The next token of each row of logits Z [rows × V] (row r at Z[r·stride]), chosen on the GPU so that a decode step
// reads back only the ids. A row holding a NaN gets id V, which no token has: the host refuses it.
//   NEXT_TOKEN_MODE_ARGMAX_BLOCKS: groups (blocks, rows); block b of row r takes the columns [b·chunk, (b+1)·chunk)
//     and writes its first largest (value bits, column) to partial[r·blocks + b], or with one block per row the id.
//   NEXT_TOKEN_MODE_ARGMAX_FINAL: groups (1, rows); the row's `blocks` partials combined into its id.
// The id goes to ids[r] (uint) and idFloats[floatOffset + r·floatStride] (the same number as an exact float: the next
// step's input, glnet's integer tensors being floats).
// bindings: 0 Z read, 1 ids write, 2 idFloats write, 3 partial (uvec2 per block) written (BLOCKS) or read (FINAL)
// uniforms: 0 V, 1 stride, 2 blocks, 3 chunk, 4 floatOffset, 5 floatStride
// defines: NEXT_TOKEN_MODE
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
#else
#error unknown NEXT_TOKEN_MODE
#endif
}
