// Batch normalization over x [N, C, S] (S the spatial size, 1 for [N, C]), per channel c over its M = N·S values.
//   BN_MODE 0 training forward, one work group per channel: the batch mean and biased variance (two passes, so that
//            a large mean does not cancel the variance), stats[c] = mean and stats[C + c] = 1/sqrt(var + ε) kept
//            for the backward pass, the running statistics moved towards the batch's (PyTorch's rule: the
//            variance unbiased, M/(M − 1)), then y = (x − mean)·invstd·gamma + beta
//   BN_MODE 1 training backward, one work group per channel: with x̂ = (x − mean)·invstd,
//            dgamma = Σ dy·x̂, dbeta = Σ dy, dx = gamma·invstd·(dy − Σdy/M − x̂·Σ(dy·x̂)/M); each written or added
//   BN_MODE 2 inference, one invocation per element: y = (x − running mean)/sqrt(running var + ε)·gamma + beta
// bindings, modes 0 and 2: 0 x read, 1 gamma, 2 beta, 3 running mean, 4 running var (read-write in mode 0),
//   5 stats write (mode 0), 6 y write
// bindings, mode 1: 0 x, 1 gamma, 5 stats, 7 dy read; 8 dx, 9 dgamma, 10 dbeta read-write
// uniforms: 0 N, 1 C, 2 S, 3 ε, 4 momentum (mode 0); mode 1: 5 what is added rather than written (bit 0 dx,
//   bit 1 dgamma, bit 2 dbeta), 6 what is written at all (same bits)
#ifndef BN_GROUP
#define BN_GROUP 256
#endif
#if BN_MODE == 2
layout(local_size_x = LOCAL_SIZE_X) in;
#else
layout(local_size_x = BN_GROUP) in;
#endif

layout(std430, binding = 0) readonly buffer Source { float x[]; };
layout(std430, binding = 1) readonly buffer Gamma { float gamma[]; };
#if BN_MODE != 1
layout(std430, binding = 2) readonly buffer Beta { float beta[]; };
layout(std430, binding = 3) buffer RunningMean { float runningMean[]; };
layout(std430, binding = 4) buffer RunningVar { float runningVar[]; };
layout(std430, binding = 6) writeonly buffer Result { float y[]; };
#endif
#if BN_MODE == 0
layout(std430, binding = 5) writeonly buffer Stats { float stats[]; };
#elif BN_MODE == 1
layout(std430, binding = 5) readonly buffer Stats { float stats[]; };
layout(std430, binding = 7) readonly buffer OutputGradient { float dy[]; };
layout(std430, binding = 8) buffer InputGradient { float dx[]; };
layout(std430, binding = 9) buffer GammaGradient { float dgamma[]; };
layout(std430, binding = 10) buffer BetaGradient { float dbeta[]; };
layout(location = 5) uniform uint added;
layout(location = 6) uniform uint wanted;
#endif
layout(location = 0) uniform uint N;
layout(location = 1) uniform uint C;
layout(location = 2) uniform uint S;
layout(location = 3) uniform float epsilon;
layout(location = 4) uniform float momentum;

#if BN_MODE == 2
void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i >= N * C * S) return;
  uint c = (i / S) % C;
  y[i] = (x[i] - runningMean[c]) * inversesqrt(runningVar[c] + epsilon) * gamma[c] + beta[c];
}
#else
shared float partial[BN_GROUP];

// The group's values summed; every invocation gets the total.
float groupSum(float value) {
  uint local = gl_LocalInvocationID.x;
  barrier();  // the previous call's readers are done with partial
  partial[local] = value;
  memoryBarrierShared();
  barrier();
  for (uint stride = uint(BN_GROUP / 2); stride > 0u; stride >>= 1) {
    if (local < stride) partial[local] += partial[local + stride];
    memoryBarrierShared();
    barrier();
  }
  return partial[0];
}

// Element k (of M) of channel c.
uint at(uint c, uint k) { return ((k / S) * C + c) * S + k % S; }

void main() {
  uint c = gl_WorkGroupID.x, local = gl_LocalInvocationID.x, M = N * S;
#if BN_MODE == 0
  float sum = 0.0;
  for (uint k = local; k < M; k += uint(BN_GROUP)) sum += x[at(c, k)];
  float mean = groupSum(sum) / float(M);
  float squares = 0.0;
  for (uint k = local; k < M; k += uint(BN_GROUP)) {
    float d = x[at(c, k)] - mean;
    squares += d * d;
  }
  float variance = groupSum(squares) / float(M);
  float invstd = inversesqrt(variance + epsilon);
  if (local == 0u) {
    stats[c] = mean;
    stats[C + c] = invstd;
    float unbiased = M > 1u ? variance * float(M) / float(M - 1u) : variance;
    runningMean[c] = (1.0 - momentum) * runningMean[c] + momentum * mean;
    runningVar[c] = (1.0 - momentum) * runningVar[c] + momentum * unbiased;
  }
  float scale = invstd * gamma[c], shift = beta[c] - mean * scale;
  for (uint k = local; k < M; k += uint(BN_GROUP)) {
    uint i = at(c, k);
    y[i] = x[i] * scale + shift;
  }
#else
  float mean = stats[c], invstd = stats[C + c];
  float sumDy = 0.0, sumDyXhat = 0.0;
  for (uint k = local; k < M; k += uint(BN_GROUP)) {
    uint i = at(c, k);
    sumDy += dy[i];
    sumDyXhat += dy[i] * (x[i] - mean) * invstd;
  }
  sumDy = groupSum(sumDy);
  sumDyXhat = groupSum(sumDyXhat);
  if (local == 0u) {
    if ((wanted & 2u) != 0u) dgamma[c] = ((added & 2u) != 0u ? dgamma[c] : 0.0) + sumDyXhat;
    if ((wanted & 4u) != 0u) dbeta[c] = ((added & 4u) != 0u ? dbeta[c] : 0.0) + sumDy;
  }
  if ((wanted & 1u) == 0u) return;
  float scale = gamma[c] * invstd, meanDy = sumDy / float(M), meanDyXhat = sumDyXhat / float(M);
  for (uint k = local; k < M; k += uint(BN_GROUP)) {
    uint i = at(c, k);
    float value = scale * (dy[i] - meanDy - (x[i] - mean) * invstd * meanDyXhat);
    dx[i] = ((added & 1u) != 0u ? dx[i] : 0.0) + value;
  }
#endif
}
#endif
