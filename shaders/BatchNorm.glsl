// Batch normalization over x [N, C, S] (S the spatial size, 1 for [N, C]), per channel c over its M = N·S values,
// which the training modes split into `chunks` runs of `chunk` values each (the last shorter), one work group per
// (chunk, channel), so that a few channels of many values still fill the GPU:
//   BN_MODE_FORWARD_PARTIALS: each chunk's mean and Σ(x − mean)² (two passes: a large mean does not cancel)
//   BN_MODE_FORWARD_STATISTICS, one work group per channel: the chunks combined (Chan et al.'s rule), stats[c] = mean
//            and stats[C + c] = 1/sqrt(var + ε) (biased) kept for the backward pass, and the running statistics moved
//            towards the batch's (PyTorch's rule: the variance unbiased, M/(M − 1))
//   BN_MODE_FORWARD: y = act((x − mean)·invstd·gamma + beta) with the batch's statistics
//   BN_MODE_INFERENCE: y = act((x − running mean)/sqrt(running var + ε)·gamma + beta)
//   BN_MODE_BACKWARD_PARTIALS: each chunk's Σg and Σg·x̂, x̂ = (x − mean)·invstd, g = dy·act'(y)
//   BN_MODE_BACKWARD_TOTALS, one work group per channel: dgamma = Σg·x̂, dbeta = Σg (written or added), and both sums
//            kept in the workspace for BACKWARD
//   BN_MODE_BACKWARD: dx = gamma·invstd·(g − Σg/M − x̂·Σ(g·x̂)/M), written or added
// act: the activation fused after the normalization (ACTIVATION; none when absent). The backward passes recompute y
// from x with the forward pass's own expression (normalized()) instead of reading it: one stream less each, and the
// same ReLU kinks as the forward pass.
// bindings (at most 8, OpenGL ES 3.1's minimum): 0 x, 1 partials [chunks·C pairs], 2 running mean (FORWARD_STATISTICS,
//   INFERENCE) or totals [2C] (written in BACKWARD_TOTALS, read in BACKWARD), 3 running var (read-write in
//   FORWARD_STATISTICS), dgamma (BACKWARD_TOTALS) or beta (the backward passes with an activation), 4 stats [2C] (written
//   in FORWARD_STATISTICS), 5 gamma or dbeta (BACKWARD_TOTALS), 6 beta or dy (BACKWARD_PARTIALS, BACKWARD), 7 y or dx
//   (BACKWARD)
// uniforms: 0 N, 1 C, 2 S, 3 ε, 4 momentum, 5 chunk, 6 chunks, 7 what is added rather than written (bit 0 dx, bit 1
//   dgamma, bit 2 dbeta), 8 what is wanted at all (same bits)
// ROW_STATISTICS (BACKWARD_PARTIALS, with S = 1 and no activation): the statistics are each row's, stats[2n] and
//   stats[2n + 1], not each channel's: the sums of a layer normalization's dgamma and dbeta over the rows of x [N, C] (graph/BatchNormOps.cpp)
#ifndef BN_GROUP
#define BN_GROUP 256
#endif
// The invocations that combine one channel's chunks (at most 128 of them, graph/BatchNormOps.cpp).
#define BN_COMBINE_GROUP 64
#ifdef ACTIVATION
#if ACTIVATION != ACTIVATION_NONE && (BN_MODE == BN_MODE_BACKWARD_PARTIALS || BN_MODE == BN_MODE_BACKWARD)
#define RECOMPUTES_OUTPUT 1
#endif
#endif
#if BN_MODE == BN_MODE_FORWARD_PARTIALS || BN_MODE == BN_MODE_BACKWARD_PARTIALS
layout(local_size_x = BN_GROUP) in;
#elif BN_MODE == BN_MODE_FORWARD_STATISTICS || BN_MODE == BN_MODE_BACKWARD_TOTALS
layout(local_size_x = BN_COMBINE_GROUP) in;
#else
layout(local_size_x = LOCAL_SIZE_X) in;
#endif

#if BN_MODE != BN_MODE_FORWARD_STATISTICS && BN_MODE != BN_MODE_BACKWARD_TOTALS
layout(std430, binding = 0) readonly buffer Source { float x[]; };
#endif
#if BN_MODE == BN_MODE_FORWARD_PARTIALS || BN_MODE == BN_MODE_FORWARD_STATISTICS || BN_MODE == BN_MODE_BACKWARD_PARTIALS || BN_MODE == BN_MODE_BACKWARD_TOTALS
layout(std430, binding = 1) buffer Partials { vec2 partials[]; };
#endif
#if BN_MODE == BN_MODE_FORWARD_STATISTICS || BN_MODE == BN_MODE_INFERENCE
layout(std430, binding = 2) buffer RunningMean { float runningMean[]; };
layout(std430, binding = 3) buffer RunningVar { float runningVar[]; };
#endif
#if BN_MODE == BN_MODE_BACKWARD_TOTALS || BN_MODE == BN_MODE_BACKWARD
layout(std430, binding = 2) buffer Totals { float totals[]; };
#endif
#if BN_MODE == BN_MODE_BACKWARD_TOTALS
layout(std430, binding = 3) buffer GammaGradient { float dgamma[]; };
layout(std430, binding = 5) buffer BetaGradient { float dbeta[]; };
#endif
#if BN_MODE == BN_MODE_FORWARD_STATISTICS || BN_MODE == BN_MODE_FORWARD || BN_MODE == BN_MODE_BACKWARD_PARTIALS || BN_MODE == BN_MODE_BACKWARD
layout(std430, binding = 4) buffer Stats { float stats[]; };
#endif
#if BN_MODE == BN_MODE_FORWARD || BN_MODE == BN_MODE_INFERENCE || BN_MODE == BN_MODE_BACKWARD || defined(RECOMPUTES_OUTPUT)
layout(std430, binding = 5) readonly buffer Gamma { float gamma[]; };
#endif
#ifdef RECOMPUTES_OUTPUT
layout(std430, binding = 3) readonly buffer Beta { float beta[]; };
#endif
#if BN_MODE == BN_MODE_FORWARD || BN_MODE == BN_MODE_INFERENCE
layout(std430, binding = 6) readonly buffer Beta { float beta[]; };
layout(std430, binding = 7) writeonly buffer Result { float y[]; };
#endif
#if BN_MODE == BN_MODE_BACKWARD_PARTIALS || BN_MODE == BN_MODE_BACKWARD
layout(std430, binding = 6) readonly buffer OutputGradient { float dy[]; };
#endif
#if BN_MODE == BN_MODE_BACKWARD
layout(std430, binding = 7) buffer InputGradient { float dx[]; };
#endif
layout(location = 0) uniform uint N;
layout(location = 1) uniform uint C;
layout(location = 2) uniform uint S;
layout(location = 3) uniform float epsilon;
layout(location = 4) uniform float momentum;
layout(location = 5) uniform uint chunk;
layout(location = 6) uniform uint chunks;
layout(location = 7) uniform uint added;
layout(location = 8) uniform uint wanted;

// Element k (of M) of channel c.
uint at(uint c, uint k) { return ((k / S) * C + c) * S + k % S; }

#if BN_MODE == BN_MODE_FORWARD || defined(RECOMPUTES_OUTPUT)
// x of channel c normalized with the batch's statistics, scaled and shifted: the activation's argument.
float normalized(float value, uint c) { return (value - stats[c]) * (stats[C + c] * gamma[c]) + beta[c]; }
#endif

#if BN_MODE == BN_MODE_BACKWARD_PARTIALS || BN_MODE == BN_MODE_BACKWARD
// dy through the fused activation: dy·act'(y), y recomputed from x.
float activationGradient(float dyValue, float xValue, uint c) {
#ifdef RECOMPUTES_OUTPUT
  return dyValue * activationDerivative(activate(normalized(xValue, c)));
#else
  return dyValue;
#endif
}
#endif

#if BN_MODE == BN_MODE_FORWARD_PARTIALS || BN_MODE == BN_MODE_BACKWARD_PARTIALS
// A row per sum a group makes (the mean, then the squared deviations; or the two gradient sums), never written again
// once read: NVIDIA's compiler may re-read a summed value from shared memory after later barriers (AxisReduce.glsl).
shared float partial[2][BN_GROUP];

// The group's values summed in partial[row]; every invocation gets the total.
float groupSum(float value, int row) {
  uint local = gl_LocalInvocationID.x;
  partial[row][local] = value;
  memoryBarrierShared();
  barrier();
  for (uint stride = uint(BN_GROUP / 2); stride > 0u; stride >>= 1) {
    if (local < stride) partial[row][local] += partial[row][local + stride];
    memoryBarrierShared();
    barrier();
  }
  return partial[row][0];
}

void main() {
  uint piece = gl_WorkGroupID.x, c = gl_WorkGroupID.y, local = gl_LocalInvocationID.x;
  uint first = piece * chunk, last = min(first + chunk, N * S);
#if BN_MODE == BN_MODE_FORWARD_PARTIALS
  float sum = 0.0;
  for (uint k = first + local; k < last; k += uint(BN_GROUP)) sum += x[at(c, k)];
  float mean = groupSum(sum, 0) / float(last - first);
  float squares = 0.0;
  for (uint k = first + local; k < last; k += uint(BN_GROUP)) {
    float d = x[at(c, k)] - mean;
    squares += d * d;
  }
  squares = groupSum(squares, 1);
  if (local == 0u) partials[c * chunks + piece] = vec2(mean, squares);
#else
#ifndef ROW_STATISTICS
  float mean = stats[c], invstd = stats[C + c];
#endif
  float sumDy = 0.0, sumDyXhat = 0.0;
  for (uint k = first + local; k < last; k += uint(BN_GROUP)) {
    uint i = at(c, k);
#ifdef ROW_STATISTICS
    float mean = stats[2u * k], invstd = stats[2u * k + 1u];
#endif
    float g = activationGradient(dy[i], x[i], c);
    sumDy += g;
    sumDyXhat += g * (x[i] - mean) * invstd;
  }
  sumDy = groupSum(sumDy, 0);
  sumDyXhat = groupSum(sumDyXhat, 1);
  if (local == 0u) partials[c * chunks + piece] = vec2(sumDy, sumDyXhat);
#endif
}
#elif BN_MODE == BN_MODE_FORWARD_STATISTICS || BN_MODE == BN_MODE_BACKWARD_TOTALS
#if BN_MODE == BN_MODE_FORWARD_STATISTICS
// Count, mean and Σ(x − mean)² of a run of values.
struct Moments {
  float count, mean, squares;
};

// Two runs' moments as one (Chan et al.); an empty run changes nothing.
Moments combine(Moments a, Moments b) {
  if (b.count == 0.0) return a;
  if (a.count == 0.0) return b;
  float total = a.count + b.count, delta = b.mean - a.mean;
  return Moments(total, a.mean + delta * b.count / total, a.squares + b.squares + delta * delta * a.count * b.count / total);
}

shared Moments combined[BN_COMBINE_GROUP];
#else
shared vec2 combined[BN_COMBINE_GROUP];
#endif

void main() {
  uint c = gl_WorkGroupID.y, local = gl_LocalInvocationID.x;
  uint M = N * S;
  // Each invocation takes every BN_COMBINE_GROUP-th chunk, then the invocations' results meet in a tree.
#if BN_MODE == BN_MODE_FORWARD_STATISTICS
  Moments mine = Moments(0.0, 0.0, 0.0);
  for (uint piece = local; piece < chunks; piece += uint(BN_COMBINE_GROUP)) {
    vec2 p = partials[c * chunks + piece];
    mine = combine(mine, Moments(float(min(chunk, M - piece * chunk)), p.x, p.y));
  }
#else
  vec2 mine = vec2(0.0);
  for (uint piece = local; piece < chunks; piece += uint(BN_COMBINE_GROUP)) mine += partials[c * chunks + piece];
#endif
  combined[local] = mine;
  memoryBarrierShared();
  barrier();
  for (uint stride = uint(BN_COMBINE_GROUP / 2); stride > 0u; stride >>= 1) {
#if BN_MODE == BN_MODE_FORWARD_STATISTICS
    if (local < stride) combined[local] = combine(combined[local], combined[local + stride]);
#else
    if (local < stride) combined[local] += combined[local + stride];
#endif
    memoryBarrierShared();
    barrier();
  }
  if (local != 0u) return;
#if BN_MODE == BN_MODE_FORWARD_STATISTICS
  Moments all = combined[0];
  float variance = all.squares / float(M);
  stats[c] = all.mean;
  stats[C + c] = inversesqrt(variance + epsilon);
  float unbiased = M > 1u ? all.squares / float(M - 1u) : variance;
  runningMean[c] = (1.0 - momentum) * runningMean[c] + momentum * all.mean;
  runningVar[c] = (1.0 - momentum) * runningVar[c] + momentum * unbiased;
#else
  vec2 sums = combined[0];
  totals[c] = sums.x;
  totals[C + c] = sums.y;
  if ((wanted & 2u) != 0u) dgamma[c] = ((added & 2u) != 0u ? dgamma[c] : 0.0) + sums.y;
  if ((wanted & 4u) != 0u) dbeta[c] = ((added & 4u) != 0u ? dbeta[c] : 0.0) + sums.x;
#endif
}
#else
void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i >= N * C * S) return;
  uint c = (i / S) % C;
#if BN_MODE == BN_MODE_FORWARD
  y[i] = activate(normalized(x[i], c));
#elif BN_MODE == BN_MODE_INFERENCE
  y[i] = activate((x[i] - runningMean[c]) * inversesqrt(runningVar[c] + epsilon) * gamma[c] + beta[c]);
#else
  float M = float(N * S), invstd = stats[C + c];
  float value = gamma[c] * invstd * (activationGradient(dy[i], x[i], c) - totals[c] / M - (x[i] - stats[c]) * invstd * totals[C + c] / M);
  dx[i] = ((added & 1u) != 0u ? dx[i] : 0.0) + value;
#endif
}
#endif
