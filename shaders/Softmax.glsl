// Row-wise operations on logits Z [M×N], one invocation per row (classifier widths, N up to a few thousand):
//   SOFTMAX_MODE_SOFTMAX:          P [M×N] = softmax(Z) (stable: exponents of Z − max)
//   SOFTMAX_MODE_ARGMAX:           classes[firstRow + r] = the first index of the row's maximum (uint)
//   SOFTMAX_MODE_CROSS_ENTROPY:    loss[r] = −Σ q log softmax(Z)[r] with q = (1 − ε)·onehot(label[r]) + ε/N (label
//                                    smoothing ε; 0: −log softmax(Z)[r, label[r]]) = max + log Σ exp(Z − max) − Σ q·Z
//   SOFTMAX_MODE_CROSS_ENTROPY_GRADIENT: dZ [M×N] = g[r] · (softmax(Z)[r] − q), written or added
//   SOFTMAX_MODE_CORRECT:          correct[r] = 1.0 when argmax equals label[r], else 0.0
// bindings: 0 Z read, 1 the output written (added to in CROSS_ENTROPY_GRADIENT with accumulate), 2 labels [M] uint read
//           (CROSS_ENTROPY, CROSS_ENTROPY_GRADIENT and CORRECT), 3 g [M] read (CROSS_ENTROPY_GRADIENT)
// uniforms: 0 M (rows), 1 N (columns), 2 firstRow (ARGMAX), 3 accumulate (CROSS_ENTROPY_GRADIENT), 4 ε (CROSS_ENTROPY and CROSS_ENTROPY_GRADIENT)
// defines: SOFTMAX_MODE
layout(local_size_x = LOCAL_SIZE_X) in;

layout(std430, binding = 0) readonly buffer Logits { float Z[]; };
#if SOFTMAX_MODE == SOFTMAX_MODE_ARGMAX
layout(std430, binding = 1) writeonly buffer Classes { uint classes[]; };
#else
layout(std430, binding = 1) buffer Result { float result[]; };
#endif
layout(std430, binding = 2) readonly buffer Labels { uint labels[]; };
layout(std430, binding = 3) readonly buffer RowGradient { float g[]; };
layout(location = 0) uniform uint M;
layout(location = 1) uniform uint N;
layout(location = 2) uniform uint firstRow;
layout(location = 3) uniform uint accumulate;
#if SOFTMAX_MODE == SOFTMAX_MODE_CROSS_ENTROPY || SOFTMAX_MODE == SOFTMAX_MODE_CROSS_ENTROPY_GRADIENT
layout(location = 4) uniform float smoothing;
#endif

void main() {
  uint row = LINEAR_INVOCATION_INDEX;
  if (row >= M) return;
  uint base = row * N;
  float largest = Z[base];
  uint best = 0u;
  for (uint j = 1u; j < N; ++j) {
    float z = Z[base + j];
    if (z > largest) {
      largest = z;
      best = j;
    }
  }
#if SOFTMAX_MODE == SOFTMAX_MODE_ARGMAX
  classes[firstRow + row] = best;
#elif SOFTMAX_MODE == SOFTMAX_MODE_CORRECT
  result[row] = best == labels[row] ? 1.0 : 0.0;
#else
  float total = 0.0;
  for (uint j = 0u; j < N; ++j) total += exp(Z[base + j] - largest);
#if SOFTMAX_MODE == SOFTMAX_MODE_SOFTMAX
  float inverse = 1.0 / total;
  for (uint j = 0u; j < N; ++j) result[base + j] = exp(Z[base + j] - largest) * inverse;
#elif SOFTMAX_MODE == SOFTMAX_MODE_CROSS_ENTROPY
  float sumZ = 0.0;
  for (uint j = 0u; j < N; ++j) sumZ += Z[base + j];
  result[row] = largest + log(total) - (1.0 - smoothing) * Z[base + labels[row]] - smoothing / float(N) * sumZ;
#else
  float scale = g[row] / total;
  uint label = labels[row];
  for (uint j = 0u; j < N; ++j) {
    float value = exp(Z[base + j] - largest) * scale - g[row] * ((j == label ? 1.0 - smoothing : 0.0) + smoothing / float(N));
    result[base + j] = accumulate != 0u ? result[base + j] + value : value;
  }
#endif
#endif
}
