// A decode step's dense layer for ROWS rows (one per sequence decoded together), y[r, n] = after(Σ_k W[n, k]·x'[r, k] +
// b[n] (+ res[r, n])), with what feeds it fused into its read of x, so that a layer and the norm or gate before it are
// one dispatch: INPUT (engine/ops/Decoding.cpp)
//   INPUT_PLAIN        x' = x
//   INPUT_LAYER_NORM   x' = (x − mean)/sqrt(var + epsilon)·gamma + beta over the K values (GPT-2's LayerNorm)
//   INPUT_RMS_NORM     x' = x/sqrt(mean(x²) + epsilon)·gamma (Llama's RMSNorm)
//   INPUT_SWIGLU       x' = silu(x[k])·x[K + k] (Llama's gate and up projections, one fused [2K] row)
// Each group first computes the norm's statistics over x itself (x is a few thousand floats, read from the cache by
// every group; two passes, the mean then the squared deviations). Then each output n is taken by TEAMS_PER_ROW teams
// of 32 invocations, which read W's row in coalesced vec4 runs (PyTorch's [out, in], contiguous along K), the
// layer's only traffic from memory, each team every TEAMS_PER_ROW-th run of 32; their partial sums meet in shared
// memory (ROWS ≤ 32: a lane per row adds them up). Every row is multiplied by each weight as it is read, so that W is
// read once for all ROWS (the norms take one row: their statistics would be read by every group). Few outputs over a
// long K (a projection back to the hidden size) take several teams per row, so that the dispatch still has enough
// groups to keep the memory busy. K must be a multiple of 4. WEIGHTS F16 or BF16: W holds
// two 16-bit weights per uint (the even-indexed one in the low half), read 4 at a time and widened to float32 (half
// the bytes of F32, the arithmetic unchanged).
// CACHE_APPEND (a decode step's q/k/v layer without rotary positions, GPT-2's): outputs [QW, QW + KVW) are also the
// row's key and [QW + KVW, QW + 2·KVW) its value, written into row r's KV cache (the r-th of the cache binding,
// RotaryCache.glsl's layout) at positions[r], so that no dispatch of its own appends them.
// bindings: 0 x [ROWS, K] read, 1 W read, 2 b read, 3 y [ROWS, N] write, 4 res read (RESIDUAL), 5 gamma read (norms),
//   6 beta read (LAYER_NORM), 7 cache write and 8 positions (uint per row) read (CACHE_APPEND)
// uniforms: 0 N (outputs), 1 K (inputs), 2 epsilon (norms); CACHE_APPEND: 4 context, 5 QW (query heads × D),
//   6 KVW (KV heads × D), 7 D
// defines: INPUT, WEIGHTS (F32, F16, BF16), ROWS, TEAMS_PER_ROW (1, 2, 4 or 8), RESIDUAL, ACTIVATION and POINTWISE
//   (common.glsl's finishOutput)
#if INPUT != INPUT_PLAIN && INPUT != INPUT_LAYER_NORM && INPUT != INPUT_RMS_NORM && INPUT != INPUT_SWIGLU
#error unknown INPUT
#endif
#if ROWS > 1 && (INPUT == INPUT_LAYER_NORM || INPUT == INPUT_RMS_NORM)
#error a normed input takes one row
#endif
#define TEAM 32
#define TEAMS (LOCAL_SIZE_X / TEAM)
layout(local_size_x = LOCAL_SIZE_X) in;

layout(std430, binding = 0) readonly buffer Input { vec4 x4[]; };
#if WEIGHTS == WEIGHTS_F32
layout(std430, binding = 1) readonly buffer Weight { vec4 W4[]; };
vec4 weights(uint run) { return W4[run]; }
#elif WEIGHTS == WEIGHTS_F16
layout(std430, binding = 1) readonly buffer Weight { uvec2 W2[]; };
vec4 weights(uint run) {
  uvec2 pair = W2[run];
  return vec4(unpackHalf2x16(pair.x), unpackHalf2x16(pair.y));
}
#elif WEIGHTS == WEIGHTS_BF16
layout(std430, binding = 1) readonly buffer Weight { uvec2 W2[]; };
vec4 weights(uint run) {
  uvec2 pair = W2[run];
  return vec4(uintBitsToFloat(pair.x << 16), uintBitsToFloat(pair.x & 0xffff0000u), uintBitsToFloat(pair.y << 16),
              uintBitsToFloat(pair.y & 0xffff0000u));
}
#else
#error unknown WEIGHTS
#endif
layout(std430, binding = 2) readonly buffer Bias { float b[]; };
layout(std430, binding = 3) writeonly buffer Output { float y[]; };
#ifdef RESIDUAL
layout(std430, binding = 4) readonly buffer Residual { float res[]; };
#endif
#if INPUT == INPUT_LAYER_NORM || INPUT == INPUT_RMS_NORM
layout(std430, binding = 5) readonly buffer Gamma { vec4 gamma4[]; };
#endif
#if INPUT == INPUT_LAYER_NORM
layout(std430, binding = 6) readonly buffer Beta { vec4 beta4[]; };
#endif
#ifdef CACHE_APPEND
layout(std430, binding = 7) writeonly buffer Cache { float cache[]; };
layout(std430, binding = 8) readonly buffer Positions { uint positions[]; };
layout(location = 4) uniform uint context;
layout(location = 5) uniform uint queryWidth;
layout(location = 6) uniform uint kvWidth;
layout(location = 7) uniform uint headSize;
#endif
layout(location = 0) uniform uint N;
layout(location = 1) uniform uint K;
layout(location = 2) uniform float epsilon;

// One array per combination (see AxisReduce.glsl: NVIDIA's compiler re-reads a combined value after later barriers).
shared float teamPartial[ROWS][LOCAL_SIZE_X];

#if INPUT == INPUT_LAYER_NORM || INPUT == INPUT_RMS_NORM
shared float meanPartial[LOCAL_SIZE_X];
shared float deviationPartial[LOCAL_SIZE_X];

float groupSum(float value, bool deviations) {
  uint local = gl_LocalInvocationID.x;
  if (deviations) deviationPartial[local] = value; else meanPartial[local] = value;
  memoryBarrierShared();
  barrier();
  for (uint stride = uint(LOCAL_SIZE_X / 2); stride > 0u; stride >>= 1) {
    if (local < stride) {
      if (deviations) deviationPartial[local] += deviationPartial[local + stride];
      else meanPartial[local] += meanPartial[local + stride];
    }
    memoryBarrierShared();
    barrier();
  }
  return deviations ? deviationPartial[0] : meanPartial[0];
}
#endif

void main() {
  uint local = gl_LocalInvocationID.x, team = local / uint(TEAM), lane = local % uint(TEAM);
  uint runs = K / 4u;
#if INPUT == INPUT_LAYER_NORM || INPUT == INPUT_RMS_NORM
  float mean = 0.0;
#if INPUT == INPUT_LAYER_NORM
  float sum = 0.0;
  for (uint k = local; k < runs; k += uint(LOCAL_SIZE_X)) sum += dot(x4[k], vec4(1.0));
  mean = groupSum(sum, false) / float(K);
#endif
  float squares = 0.0;
  for (uint k = local; k < runs; k += uint(LOCAL_SIZE_X)) {
    vec4 d = x4[k] - mean;
    squares += dot(d, d);
  }
  float scale = inversesqrt(groupSum(squares, true) / float(K) + epsilon);
#endif
  // Groups beyond the device's x limit fold into y (a linear dispatch).
  uint n = (gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x) * uint(TEAMS / TEAMS_PER_ROW) + team / uint(TEAMS_PER_ROW);
  uint part = team % uint(TEAMS_PER_ROW);
  // x's rows are 2K apart for the gate and up halves of SWIGLU.
  uint xRuns = INPUT == INPUT_SWIGLU ? 2u * runs : runs;
  float total[ROWS];
  for (uint r = 0u; r < uint(ROWS); ++r) total[r] = 0.0;
  if (n < N) {
    uint row = n * runs;
    for (uint k = part * uint(TEAM) + lane; k < runs; k += uint(TEAM * TEAMS_PER_ROW)) {
      vec4 w = weights(row + k);
      for (uint r = 0u; r < uint(ROWS); ++r) {
        uint at = r * xRuns + k;
#if INPUT == INPUT_LAYER_NORM
        vec4 value = (x4[at] - mean) * scale * gamma4[k] + beta4[k];
#elif INPUT == INPUT_RMS_NORM
        vec4 value = x4[at] * scale * gamma4[k];
#elif INPUT == INPUT_SWIGLU
        vec4 gate = x4[at];
        vec4 value = gate / (1.0 + exp(-gate)) * x4[at + runs];
#else
        vec4 value = x4[at];
#endif
        total[r] += dot(w, value);
      }
    }
  }
  for (uint r = 0u; r < uint(ROWS); ++r) teamPartial[r][local] = total[r];
  memoryBarrierShared();
  barrier();
  // The output's teams meet in two steps, so that no invocation adds more than 32 partials: each lane of its first
  // team adds its own lane's partials of the other teams, then lane r adds row r's 32.
  if (part == 0u) {
    for (uint r = 0u; r < uint(ROWS); ++r) {
      float value = teamPartial[r][local];
      for (uint i = 1u; i < uint(TEAMS_PER_ROW); ++i) value += teamPartial[r][local + i * uint(TEAM)];
      teamPartial[r][local] = value;
    }
  }
  memoryBarrierShared();
  barrier();
  if (part == 0u && lane < uint(ROWS) && n < N) {
    uint r = lane, first = local - lane;
    float value = 0.0;
    for (uint i = 0u; i < uint(TEAM); ++i) value += teamPartial[r][first + i];
    value += b[n];
#ifdef RESIDUAL
    value += res[r * N + n];
#endif
    value = finishOutput(value);
    y[r * N + n] = value;
#ifdef CACHE_APPEND
    if (n >= queryWidth) {
      uint m = n - queryWidth, values = m >= kvWidth ? 1u : 0u;
      m -= values * kvWidth;
      uint rowCache = r * 2u * kvWidth * context;
      cache[rowCache + values * kvWidth * context + ((m / headSize) * context + positions[r]) * headSize + m % headSize] = value;
    }
#endif
  }
}
