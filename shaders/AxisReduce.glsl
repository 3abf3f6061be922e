// Functions along one axis of a tensor seen as [outer, axis, inner]: one work group per line (outer, inner),
// its invocations striding along the axis and combining through shared memory.
//   AXIS_OP (engine/numbers/AxisKinds.h): SOFTMAX, LOG_SOFTMAX, LAYER_NORMALIZATION (y = (x − mean)/sqrt(var +
//   epsilon)·gamma + beta, gamma and beta along the axis), RMS_NORMALIZATION (y = x/sqrt(mean(x²) + epsilon)·gamma,
//   Llama's RMSNorm): y has x's shape; MEAN, SUM, MAX, MIN, INVERSE_DEVIATION
//   1/sqrt(var + epsilon), L1 Σ|x|, L2 sqrt(Σx²), SUM_SQUARE Σx², LOG_SUM log Σx, LOG_SUM_EXP log Σ exp x, PRODUCT Πx:
//   y [outer, inner]; HARDMAX (1 at the line's first largest value, 0 elsewhere; NaN throughout a line holding one):
//   y has x's shape
// bindings: 0 x read, 1 gamma read (LAYER_NORMALIZATION, RMS_NORMALIZATION; x again otherwise), 2 beta read (LAYER_NORMALIZATION; x
//   again otherwise), 3 y write,
//   4 r read (RESIDUAL: LAYER_NORMALIZATION of x + r, a residual connection's sum that is never stored)
// uniforms: 0 lines (outer·inner), 1 axis length, 2 inner, 3 epsilon (LAYER_NORMALIZATION, RMS_NORMALIZATION, INVERSE_DEVIATION)
// Training a layer normalization (graph/BatchNormOps.cpp's LayerNorm):
//   STATISTICS (LAYER_NORMALIZATION): also writes each line's mean and 1/sqrt(var + epsilon) to stats[2·line] and
//   stats[2·line + 1] (binding 5), which the backward passes read instead of recomputing them
//   LAYER_NORMALIZATION_GRADIENT (AXIS_OP LAYER_NORMALIZATION): dx = invstd·(g − mean(g) − x̂·mean(g·x̂)), g = dy·gamma,
//   x̂ = (x − mean)·invstd; binding 2 dy in place of beta, 3 dx (written, or added when uniform 4 is 1), 5 stats read
// defines: LINE_GROUP, the invocations per line (a power of two up to GLNET_GROUP_SIZE, its default): short axes
// take small groups, so that most invocations have elements to read (a global pool over 7x7 ran at a tenth of
// the memory's speed with 256 invocations per line).
#ifndef LINE_GROUP
#define LINE_GROUP GLNET_GROUP_SIZE
#endif
layout(local_size_x = LINE_GROUP) in;

#if (defined(STATISTICS) || defined(LAYER_NORMALIZATION_GRADIENT)) && AXIS_OP != AXIS_OP_LAYER_NORMALIZATION
#error STATISTICS and LAYER_NORMALIZATION_GRADIENT serve layer normalization
#endif
layout(std430, binding = 0) readonly buffer Source { float x[]; };
layout(std430, binding = 1) readonly buffer Gamma { float gamma[]; };
#ifdef LAYER_NORMALIZATION_GRADIENT
layout(std430, binding = 2) readonly buffer OutputGradient { float dy[]; };
layout(std430, binding = 3) buffer InputGradient { float dx[]; };
layout(std430, binding = 5) readonly buffer Statistics { vec2 stats[]; };
layout(location = 4) uniform uint added;
#else
layout(std430, binding = 2) readonly buffer Beta { float beta[]; };
layout(std430, binding = 3) writeonly buffer Result { float y[]; };
#endif
#ifdef STATISTICS
layout(std430, binding = 5) writeonly buffer Statistics { vec2 stats[]; };
#endif
#ifdef RESIDUAL
layout(std430, binding = 4) readonly buffer Residual { float r[]; };
float source(uint i) { return x[i] + r[i]; }
#else
float source(uint i) { return x[i]; }
#endif
layout(location = 0) uniform uint lines;
layout(location = 1) uniform uint axis;
layout(location = 2) uniform uint inner;
layout(location = 3) uniform float epsilon;

// One row per combination a line makes in turn (the largest value, then the exponent sum; the mean, then the squared
// deviations), never written again once read: NVIDIA's compiler (580.159.04) re-reads a combined value from shared
// memory where it is used, after later barriers, so a row reused by the next combination gave softmax the sum in
// place of the largest value on some invocations (1001 values, 256 invocations per line).
shared float partial[2][LINE_GROUP];

// Every invocation's `value` combined (kind 0 sum, 1 max, 2 min, 3 product) in partial[row]; all get the result.
float combineGroup(float value, int kind, int row) {
  uint local = gl_LocalInvocationID.x;
  partial[row][local] = value;
  memoryBarrierShared();
  barrier();
  for (uint stride = uint(LINE_GROUP / 2); stride > 0u; stride >>= 1) {
    if (local < stride) {
      float other = partial[row][local + stride];
      float own = partial[row][local];
      partial[row][local] = kind == 0 ? own + other : kind == 1 ? maxNaN(own, other) : kind == 2 ? minNaN(own, other) : own * other;
    }
    memoryBarrierShared();
    barrier();
  }
  return partial[row][0];
}

// The line's largest value and Σ exp(x − largest), the parts of softmax and log-sum-exp that cannot overflow.
float exponentSum(uint base, uint local, uint step, out float largest) {
  largest = uintBitsToFloat(0xff800000u);
  for (uint k = local; k < axis; k += step) largest = maxNaN(largest, x[base + k * inner]);
  largest = combineGroup(largest, 1, 0);
  float sum = 0.0;
  for (uint k = local; k < axis; k += step) sum += exp(x[base + k * inner] - largest);
  return combineGroup(sum, 0, 1);
}

// The line's mean (two passes: the mean, then the squared deviations from it) and 1/sqrt(variance + epsilon).
float inverseDeviation(uint base, uint local, uint step, out float mean) {
  float sum = 0.0;
  for (uint k = local; k < axis; k += step) sum += source(base + k * inner);
  mean = combineGroup(sum, 0, 0) / float(axis);
  float squares = 0.0;
  for (uint k = local; k < axis; k += step) {
    float d = source(base + k * inner) - mean;
    squares += d * d;
  }
  return inversesqrt(combineGroup(squares, 0, 1) / float(axis) + epsilon);
}

void main() {
  uint line = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  // Whole groups leave together: the barriers in combineGroup need every invocation of the group.
  if (line >= lines) return;
  uint local = gl_LocalInvocationID.x, step = uint(LINE_GROUP);
  uint base = (line / inner) * axis * inner + line % inner;
#ifdef LAYER_NORMALIZATION_GRADIENT
  float mean = stats[line].x, scale = stats[line].y;
  float sumG = 0.0, sumGX = 0.0;
  for (uint k = local; k < axis; k += step) {
    float g = dy[base + k * inner] * gamma[k];
    sumG += g;
    sumGX += g * (x[base + k * inner] - mean) * scale;
  }
  float meanG = combineGroup(sumG, 0, 0) / float(axis), meanGX = combineGroup(sumGX, 0, 1) / float(axis);
  for (uint k = local; k < axis; k += step) {
    uint i = base + k * inner;
    float value = scale * (dy[i] * gamma[k] - meanG - (x[i] - mean) * scale * meanGX);
    dx[i] = (added != 0u ? dx[i] : 0.0) + value;
  }
#elif AXIS_OP == AXIS_OP_SOFTMAX || AXIS_OP == AXIS_OP_LOG_SOFTMAX
  float largest;
  float sum = exponentSum(base, local, step, largest);
#if AXIS_OP == AXIS_OP_SOFTMAX
  for (uint k = local; k < axis; k += step) y[base + k * inner] = exp(x[base + k * inner] - largest) / sum;
#else
  float logSum = log(sum);
  for (uint k = local; k < axis; k += step) y[base + k * inner] = x[base + k * inner] - largest - logSum;
#endif
#elif AXIS_OP == AXIS_OP_HARDMAX
  float largest = uintBitsToFloat(0xff800000u);
  for (uint k = local; k < axis; k += step) largest = maxNaN(largest, x[base + k * inner]);
  largest = combineGroup(largest, 1, 0);
  // The first index holding it, as a float (exact below 2^24 values along the axis).
  float first = float(axis);
  for (uint k = local; k < axis; k += step) first = x[base + k * inner] == largest ? min(first, float(k)) : first;
  first = combineGroup(first, 2, 1);
  for (uint k = local; k < axis; k += step) y[base + k * inner] = isNaN(largest) ? largest : float(k) == first ? 1.0 : 0.0;
#elif AXIS_OP == AXIS_OP_LAYER_NORMALIZATION
  float mean;
  float scale = inverseDeviation(base, local, step, mean);
  for (uint k = local; k < axis; k += step) y[base + k * inner] = (source(base + k * inner) - mean) * scale * gamma[k] + beta[k];
#ifdef STATISTICS
  if (local == 0u) stats[line] = vec2(mean, scale);
#endif
#elif AXIS_OP == AXIS_OP_RMS_NORMALIZATION
  float squares = 0.0;
  for (uint k = local; k < axis; k += step) squares = fma(source(base + k * inner), source(base + k * inner), squares);
  float scale = inversesqrt(combineGroup(squares, 0, 0) / float(axis) + epsilon);
  for (uint k = local; k < axis; k += step) y[base + k * inner] = source(base + k * inner) * scale * gamma[k];
#elif AXIS_OP == AXIS_OP_INVERSE_DEVIATION
  float mean;
  float value = inverseDeviation(base, local, step, mean);
  if (local == 0u) y[line] = value;
#elif AXIS_OP == AXIS_OP_LOG_SUM_EXP
  float largest;
  float sum = exponentSum(base, local, step, largest);
  if (local == 0u) y[line] = largest + log(sum);
#elif AXIS_OP == AXIS_OP_PRODUCT
  float value = 1.0;
  for (uint k = local; k < axis; k += step) value *= x[base + k * inner];
  value = combineGroup(value, 3, 0);
  if (local == 0u) y[line] = value;
#elif AXIS_OP == AXIS_OP_L1 || AXIS_OP == AXIS_OP_L2 || AXIS_OP == AXIS_OP_SUM_SQUARE || AXIS_OP == AXIS_OP_LOG_SUM
  float value = 0.0;
  for (uint k = local; k < axis; k += step) {
    float v = x[base + k * inner];
#if AXIS_OP == AXIS_OP_L1
    value += abs(v);
#elif AXIS_OP == AXIS_OP_LOG_SUM
    value += v;
#else
    value += v * v;
#endif
  }
  value = combineGroup(value, 0, 0);
#if AXIS_OP == AXIS_OP_L2
  value = sqrt(value);
#elif AXIS_OP == AXIS_OP_LOG_SUM
  value = log(value);
#endif
  if (local == 0u) y[line] = value;
#elif AXIS_OP == AXIS_OP_MAX || AXIS_OP == AXIS_OP_MIN || AXIS_OP == AXIS_OP_SUM || AXIS_OP == AXIS_OP_MEAN
#if AXIS_OP == AXIS_OP_MAX
  float value = uintBitsToFloat(0xff800000u);
  for (uint k = local; k < axis; k += step) value = maxNaN(value, x[base + k * inner]);
  value = combineGroup(value, 1, 0);
#elif AXIS_OP == AXIS_OP_MIN
  float value = uintBitsToFloat(0x7f800000u);
  for (uint k = local; k < axis; k += step) value = minNaN(value, x[base + k * inner]);
  value = combineGroup(value, 2, 0);
#else
  float value = 0.0;
  for (uint k = local; k < axis; k += step) value += x[base + k * inner];
  value = combineGroup(value, 0, 0);
#if AXIS_OP == AXIS_OP_MEAN
  value /= float(axis);
#endif
#endif
  if (local == 0u) y[line] = value;
#else
#error unknown AXIS_OP
#endif
}
