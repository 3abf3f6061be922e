// Row-wise operations on logits Z [M×N]: numerically stable softmax, or argmax to class indices.
// One invocation per row, which suits classifier widths (N up to a few thousand).
// bindings: 0 Z read, 1 out write: P [M×N] float (SOFTMAX_MODE 0) or classes [firstRow + M] uint (mode 1)
// uniforms: 0 M (rows), 1 N (columns), 2 firstRow (mode 1: where row 0's class is written)
// defines: SOFTMAX_MODE 0 softmax, 1 argmax (the first index of the maximum)
layout(local_size_x = LOCAL_SIZE_X) in;

layout(std430, binding = 0) readonly buffer Logits { float Z[]; };
#if SOFTMAX_MODE == 0
layout(std430, binding = 1) writeonly buffer Probabilities { float P[]; };
#else
layout(std430, binding = 1) writeonly buffer Classes { uint classes[]; };
#endif
layout(location = 0) uniform uint M;
layout(location = 1) uniform uint N;
layout(location = 2) uniform uint firstRow;

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
#if SOFTMAX_MODE == 0
  float total = 0.0;
  for (uint j = 0u; j < N; ++j) total += exp(Z[base + j] - largest);
  float inverse = 1.0 / total;
  for (uint j = 0u; j < N; ++j) P[base + j] = exp(Z[base + j] - largest) * inverse;
#else
  classes[firstRow + row] = best;
#endif
}
