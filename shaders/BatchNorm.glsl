// Batch normalization over x [N, C, S] (S the spatial size, 1 for [N, C]), per channel c over its M = N·S values,
// which the training modes split into `chunks` runs of `chunk` values each (the last shorter), one work group per
// (chunk, channel), so that a few channels of many values still fill the GPU:
//   BN_MODE_FORWARD_PARTIALS: each chunk's mean and Σ(x − mean)² (two passes: a large mean does not cancel)
//   BN_MODE_FORWARD: y = act((x − mean)·invstd·gamma + beta) over the group's chunk, with the batch's statistics, which
//            every group combines from the chunks' partials itself (Chan et al.'s rule): a pass that combined them once
//            would cost a dependent dispatch, more than the few hundred values each group reads. The first chunk's
//            group keeps stats[c] = mean and stats[C + c] = 1/sqrt(var + ε) (biased) for the backward passes and moves
//            the running statistics towards the batch's (PyTorch's rule: the variance unbiased, M/(M − 1)).
//   BN_MODE_INFERENCE: y = act((x − running mean)/sqrt(running var + ε)·gamma + beta), one invocation per value
//   BN_MODE_BACKWARD_PARTIALS: each chunk's Σg and Σg·x̂, x̂ = (x − mean)·invstd, g = dy·act'(y)
//   BN_MODE_BACKWARD_TOTALS, one work group per channel: dgamma = Σg·x̂, dbeta = Σg (written or added): a layer
//            normalization's, and a batch normalization's whose dx nobody wants
//   BN_MODE_BACKWARD: dx = gamma·invstd·(g − Σg/M − x̂·Σ(g·x̂)/M) over the group's chunk, written or added, each group
//            combining the chunks' sums itself as BN_MODE_FORWARD does; the first chunk's group writes or adds dgamma
//            and dbeta
// act: the activation fused after the normalization (ACTIVATION; none when absent). The backward passes recompute y
// from x with the forward pass's own expression (normalizedWith()) instead of reading it: one stream less each, and the
// same ReLU kinks as the forward pass.
// RESIDUAL: a residual r [N, C, S] added before the activation, y = act(normalized + r) (ResNet's block end: the add
//   and its ReLU in this op). The backward passes read y then (it cannot be recomputed without r), and the partials
//   pass also stores g = dy·act'(y), r's gradient, written or added (bit 3 of `wanted` and `added`).
// bindings (at most 8, OpenGL ES 3.1's minimum): 0 x, 1 partials [chunks·C pairs] (the partial and totals modes) or
//   dgamma (BACKWARD), 2 running mean (FORWARD, INFERENCE) or dbeta (BACKWARD), 3 running var (read-write in FORWARD), dgamma (BACKWARD_TOTALS) or beta (the backward passes with an
//   activation), 4 stats [2C] (BACKWARD_PARTIALS), or the whole workspace (FORWARD, BACKWARD): stats [2C] at its start,
//   the partials from float `partialsAt` on, 5 gamma or dbeta (BACKWARD_TOTALS), 6 beta or dy (BACKWARD_PARTIALS,
//   BACKWARD), 7 y or dx (BACKWARD); with RESIDUAL: 1 r (FORWARD, INFERENCE), 7 y (BACKWARD_PARTIALS) or 3 y
//   (BACKWARD), 2 r's gradient (BACKWARD_PARTIALS)
// uniforms: 0 N, 1 C, 2 S, 3 ε, 4 momentum, 5 chunk, 6 chunks, 7 what is added rather than written (bit 0 dx, bit 1
//   dgamma, bit 2 dbeta), 8 what is wanted at all (same bits), 9 partialsAt
// ROW_STATISTICS (BACKWARD_PARTIALS, with S = 1 and no activation): the statistics are each row's, stats[2n] and
//   stats[2n + 1], not each channel's: the sums of a layer normalization's dgamma and dbeta over the rows of x [N, C] (graph/BatchNormOps.cpp)
#ifndef BN_GROUP
#define BN_GROUP 256
#endif
// The invocations that combine one channel's chunks (at most 128 of them, graph/BatchNormOps.cpp).
#define BN_COMBINE_GROUP 64
#ifdef ACTIVATION
#if ACTIVATION != ACTIVATION_NONE && (BN_MODE == BN_MODE_BACKWARD_PARTIALS || BN_MODE == BN_MODE_BACKWARD) && !defined(RESIDUAL)
#define RECOMPUTES_OUTPUT 1
#endif
#endif
// Modes that run a work group per (chunk, channel).
#if BN_MODE == BN_MODE_FORWARD_PARTIALS || BN_MODE == BN_MODE_BACKWARD_PARTIALS || BN_MODE == BN_MODE_FORWARD || BN_MODE == BN_MODE_BACKWARD
#define CHUNKED 1
#endif
// Modes that combine a channel's partials: the totals pass once per channel, the chunked passes in every group.
#if BN_MODE == BN_MODE_FORWARD || BN_MODE == BN_MODE_BACKWARD_TOTALS || BN_MODE == BN_MODE_BACKWARD
#define COMBINES 1
#endif
#if defined(CHUNKED)
layout(local_size_x = BN_GROUP) in;
#elif BN_MODE == BN_MODE_BACKWARD_TOTALS
layout(local_size_x = BN_COMBINE_GROUP) in;
#else
layout(local_size_x = LOCAL_SIZE_X) in;
#endif

#if BN_MODE != BN_MODE_BACKWARD_TOTALS
layout(std430, binding = 0) readonly buffer Source { float x[]; };
#endif
#if BN_MODE == BN_MODE_FORWARD_PARTIALS || BN_MODE == BN_MODE_BACKWARD_PARTIALS || BN_MODE == BN_MODE_BACKWARD_TOTALS
layout(std430, binding = 1) buffer Partials { vec2 partials[]; };
#endif
#ifdef RESIDUAL
#if BN_MODE == BN_MODE_FORWARD || BN_MODE == BN_MODE_INFERENCE
layout(std430, binding = 1) readonly buffer Residual { float residual[]; };
#elif BN_MODE == BN_MODE_BACKWARD_PARTIALS
layout(std430, binding = 2) buffer ResidualGradient { float residualGradient[]; };
layout(std430, binding = 7) readonly buffer Output { float y[]; };
#elif BN_MODE == BN_MODE_BACKWARD
layout(std430, binding = 3) readonly buffer Output { float y[]; };
#endif
#endif
#if BN_MODE == BN_MODE_FORWARD || BN_MODE == BN_MODE_INFERENCE
layout(std430, binding = 2) buffer RunningMean { float runningMean[]; };
layout(std430, binding = 3) buffer RunningVar { float runningVar[]; };
#endif
#if BN_MODE == BN_MODE_BACKWARD_TOTALS
layout(std430, binding = 3) buffer GammaGradient { float dgamma[]; };
layout(std430, binding = 5) buffer BetaGradient { float dbeta[]; };
#endif
#if BN_MODE == BN_MODE_BACKWARD
layout(std430, binding = 1) buffer GammaGradient { float dgamma[]; };
layout(std430, binding = 2) buffer BetaGradient { float dbeta[]; };
#endif
#if BN_MODE == BN_MODE_FORWARD || BN_MODE == BN_MODE_BACKWARD_PARTIALS || BN_MODE == BN_MODE_BACKWARD
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
layout(location = 9) uniform uint partialsAt;

// Element k (of M) of channel c.
uint at(uint c, uint k) { return ((k / S) * C + c) * S + k % S; }

#if BN_MODE == BN_MODE_FORWARD || BN_MODE == BN_MODE_BACKWARD
// The partials of chunk `piece` of channel c, kept in the workspace after its statistics.
vec2 partialOf(uint c, uint piece) {
  uint i = partialsAt + 2u * (c * chunks + piece);
  return vec2(stats[i], stats[i + 1u]);
}
#elif defined(COMBINES)
vec2 partialOf(uint c, uint piece) { return partials[c * chunks + piece]; }
#endif

#ifdef COMBINES
#if BN_MODE == BN_MODE_FORWARD
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
#define Combined Moments
#define NOTHING Moments(0.0, 0.0, 0.0)
#define COMBINE(a, b) combine(a, b)
#define PIECE(c, piece) Moments(float(min(chunk, N * S - (piece) * chunk)), partialOf(c, piece).x, partialOf(c, piece).y)
#else
#define Combined vec2
#define NOTHING vec2(0.0)
#define COMBINE(a, b) ((a) + (b))
#define PIECE(c, piece) partialOf(c, piece)
#endif

shared Combined combined[BN_COMBINE_GROUP];

// Channel c's chunks combined, in every invocation of the group (the first BN_COMBINE_GROUP take every
// BN_COMBINE_GROUP-th chunk each, then meet in a tree); the same order, so the same value, in every group.
Combined combineChunks(uint c) {
  uint local = gl_LocalInvocationID.x;
  if (local < uint(BN_COMBINE_GROUP)) {
    Combined mine = NOTHING;
    for (uint piece = local; piece < chunks; piece += uint(BN_COMBINE_GROUP)) mine = COMBINE(mine, PIECE(c, piece));
    combined[local] = mine;
  }
  memoryBarrierShared();
  barrier();
  for (uint stride = uint(BN_COMBINE_GROUP / 2); stride > 0u; stride >>= 1) {
    if (local < stride) combined[local] = COMBINE(combined[local], combined[local + stride]);
    memoryBarrierShared();
    barrier();
  }
  return combined[0];
}
#endif

#if BN_MODE == BN_MODE_FORWARD || defined(RECOMPUTES_OUTPUT)
// x normalized with a channel's mean and invstd, scaled and shifted: the activation's argument.
float normalizedWith(float value, float mean, float invstd, uint c) { return (value - mean) * (invstd * gamma[c]) + beta[c]; }
#endif

#if BN_MODE == BN_MODE_BACKWARD_PARTIALS || BN_MODE == BN_MODE_BACKWARD
// dy through the fused activation: dy·act'(y), y read (RESIDUAL) or recomputed from x with the statistics the forward
// pass kept.
float activationGradient(uint i, float xValue, uint c) {
#if defined(RESIDUAL)
  return dy[i] * activationDerivative(y[i]);
#elif defined(RECOMPUTES_OUTPUT)
  return dy[i] * activationDerivative(activate(normalizedWith(xValue, stats[c], stats[C + c], c)));
#else
  return dy[i];
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
#endif

#if defined(CHUNKED)
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
#elif BN_MODE == BN_MODE_BACKWARD_PARTIALS
#ifndef ROW_STATISTICS
  float mean = stats[c], invstd = stats[C + c];
#endif
  float sumDy = 0.0, sumDyXhat = 0.0;
  for (uint k = first + local; k < last; k += uint(BN_GROUP)) {
    uint i = at(c, k);
#ifdef ROW_STATISTICS
    float mean = stats[2u * k], invstd = stats[2u * k + 1u];
#endif
    float g = activationGradient(i, x[i], c);
#ifdef RESIDUAL
    if ((wanted & 8u) != 0u) residualGradient[i] = ((added & 8u) != 0u ? residualGradient[i] : 0.0) + g;
#endif
    sumDy += g;
    sumDyXhat += g * (x[i] - mean) * invstd;
  }
  sumDy = groupSum(sumDy, 0);
  sumDyXhat = groupSum(sumDyXhat, 1);
  if (local == 0u) partials[c * chunks + piece] = vec2(sumDy, sumDyXhat);
#elif BN_MODE == BN_MODE_FORWARD
  Moments all = combineChunks(c);
  uint M = N * S;
  float variance = all.squares / float(M), mean = all.mean, invstd = inversesqrt(variance + epsilon);
  if (piece == 0u && local == 0u) {
    stats[c] = mean;
    stats[C + c] = invstd;
    float unbiased = M > 1u ? all.squares / float(M - 1u) : variance;
    runningMean[c] = (1.0 - momentum) * runningMean[c] + momentum * mean;
    runningVar[c] = (1.0 - momentum) * runningVar[c] + momentum * unbiased;
  }
  for (uint k = first + local; k < last; k += uint(BN_GROUP)) {
    uint i = at(c, k);
#ifdef RESIDUAL
    y[i] = activate(normalizedWith(x[i], mean, invstd, c) + residual[i]);
#else
    y[i] = activate(normalizedWith(x[i], mean, invstd, c));
#endif
  }
#else
  vec2 sums = combineChunks(c);
  if (piece == 0u && local == 0u) {
    if ((wanted & 2u) != 0u) dgamma[c] = ((added & 2u) != 0u ? dgamma[c] : 0.0) + sums.y;
    if ((wanted & 4u) != 0u) dbeta[c] = ((added & 4u) != 0u ? dbeta[c] : 0.0) + sums.x;
  }
  float M = float(N * S), mean = stats[c], invstd = stats[C + c], scale = gamma[c] * invstd;
  for (uint k = first + local; k < last; k += uint(BN_GROUP)) {
    uint i = at(c, k);
    float value = scale * (activationGradient(i, x[i], c) - sums.x / M - (x[i] - mean) * invstd * sums.y / M);
    dx[i] = ((added & 1u) != 0u ? dx[i] : 0.0) + value;
  }
#endif
}
#elif BN_MODE == BN_MODE_BACKWARD_TOTALS
void main() {
  uint c = gl_WorkGroupID.y;
  vec2 sums = combineChunks(c);
  if (gl_LocalInvocationID.x != 0u) return;
  if ((wanted & 2u) != 0u) dgamma[c] = ((added & 2u) != 0u ? dgamma[c] : 0.0) + sums.y;
  if ((wanted & 4u) != 0u) dbeta[c] = ((added & 4u) != 0u ? dbeta[c] : 0.0) + sums.x;
}
#else
void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i >= N * C * S) return;
  uint c = (i / S) % C;
  float normalized = (x[i] - runningMean[c]) * inversesqrt(runningVar[c] + epsilon) * gamma[c] + beta[c];
#ifdef RESIDUAL
  normalized += residual[i];
#endif
  y[i] = activate(normalized);
}
#endif
