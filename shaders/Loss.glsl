// Mean squared error per row of predictions Y [M×N] against targets T [M×N]:
//   LOSS_MODE_LOSS: loss[r] = (1/N) Σ_c (Y − T)²
//   LOSS_MODE_GRADIENT: dY [M×N] = g[r] · 2(Y − T)/N, written or added
// bindings: 0 Y read, 1 T read, 2 the output (loss [M] or dY), 3 g [M] read (GRADIENT)
// uniforms: 0 M, 1 N, 2 accumulate (GRADIENT)
layout(local_size_x = LOCAL_SIZE_X) in;

layout(std430, binding = 0) readonly buffer Prediction { float Y[]; };
layout(std430, binding = 1) readonly buffer Target { float T[]; };
layout(std430, binding = 2) buffer Result { float result[]; };
layout(std430, binding = 3) readonly buffer RowGradient { float g[]; };
layout(location = 0) uniform uint M;
layout(location = 1) uniform uint N;
layout(location = 2) uniform uint accumulate;

void main() {
  uint i = LINEAR_INVOCATION_INDEX;
#if LOSS_MODE == LOSS_MODE_LOSS
  if (i >= M) return;
  float sum = 0.0;
  for (uint c = 0u; c < N; ++c) {
    float d = Y[i * N + c] - T[i * N + c];
    sum += d * d;
  }
  result[i] = sum / float(N);
#else
  if (i >= M * N) return;
  float value = g[i / N] * 2.0 * (Y[i] - T[i]) / float(N);
  result[i] = accumulate != 0u ? result[i] + value : value;
#endif
}
