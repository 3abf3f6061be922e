// Y[b] = A[b]·B[b] for computed A [.., M, K] and B [.., K, N] (ONNX MatMul of two tensors, attention's
// products), batches broadcast through their strides (0 along a broadcast axis). One invocation per output;
// matrices that are weights take the GEMM core instead (dense layers).
// bindings: 0 A read, 1 B read, 2 Y write
// uniforms: 0 count (batches·M·N), 1 M, 2 N, 3 K; 4-7 the output's batch strides (in matrices, up to 4 batch
// axes); 8-11 A's batch strides; 12-15 B's batch strides (elements)
layout(local_size_x = LOCAL_SIZE_X) in;

layout(std430, binding = 0) readonly buffer First { float a[]; };
layout(std430, binding = 1) readonly buffer Second { float b[]; };
layout(std430, binding = 2) writeonly buffer Result { float y[]; };
layout(location = 0) uniform uint count;
layout(location = 1) uniform uint M;
layout(location = 2) uniform uint N;
layout(location = 3) uniform uint K;
layout(location = 4) uniform uint outStrides[4];
layout(location = 8) uniform uint aStrides[4];
layout(location = 12) uniform uint bStrides[4];

void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i >= count) return;
  uint matrix = i / (M * N), row = (i % (M * N)) / N, column = i % N;
  uint rest = matrix, aBase = 0u, bBase = 0u;
  for (int k = 0; k < 4; ++k) {
    uint coordinate = rest / outStrides[k];
    rest -= coordinate * outStrides[k];
    aBase += coordinate * aStrides[k];
    bBase += coordinate * bStrides[k];
  }
  float sum = 0.0;
  for (uint k = 0u; k < K; ++k) sum = fma(a[aBase + row * K + k], b[bBase + k * N + column], sum);
  y[i] = sum;
}
