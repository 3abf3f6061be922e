// The dense layer Y = act(X·Wᵀ + b) for a few rows (a batch of 1 to 4), where a GEMM's tiles would stay mostly
// empty and its few groups would read the weights slowly: each work group computes FEW_OUTPUTS outputs of every
// row, its invocations splitting the sum and reading W's rows (PyTorch's [out, in], contiguous along K) in
// coalesced runs, then adding their partial sums in shared memory. The layer is bound by reading W once.
// X [ROWS×K], W [N×K], b [N], Y [ROWS×N], all row-major float.
// bindings: 0 X read, 1 W read, 2 b read (unused without HAS_BIAS), 3 Y write, 4 R read (RESIDUAL: [M×N] added
// before the activation, a residual connection)
// uniforms: 0 M (rows, at most ROWS), 1 N (outputs), 2 K (inputs)
// defines: ROWS (1 to 4), FEW_OUTPUTS (ROWS·FEW_OUTPUTS ≤ 8: the sums each invocation keeps), ACTIVATION
// (common.glsl), POINTWISE (a function after it, Pointwise.glsl included), HAS_BIAS 0|1, VEC4 (K a multiple of 4,
// X and W bound at 16-byte offsets): X and W read as vec4s
layout(local_size_x = LOCAL_SIZE_X) in;

layout(std430, binding = 0) readonly buffer Input { float X[]; };
layout(std430, binding = 1) readonly buffer Weight { float W[]; };
layout(std430, binding = 2) readonly buffer Bias { float b[]; };
layout(std430, binding = 3) writeonly buffer Output { float Y[]; };
#ifdef RESIDUAL
layout(std430, binding = 4) readonly buffer Residual { float R[]; };
#endif
#ifdef VEC4
layout(std430, binding = 0) readonly buffer InputRuns { vec4 X4[]; };
layout(std430, binding = 1) readonly buffer WeightRuns { vec4 W4[]; };
#endif
layout(location = 0) uniform uint M;
layout(location = 1) uniform uint N;
layout(location = 2) uniform uint K;

#define SUMS (ROWS * FEW_OUTPUTS)
shared float partial[SUMS][LOCAL_SIZE_X];

void main() {
  // Groups beyond the device's x limit fold into y (a linear dispatch); a whole group past the outputs leaves.
  uint first = (gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x) * uint(FEW_OUTPUTS), lane = gl_LocalInvocationID.x;
  if (first >= N) return;
  float sum[SUMS];
  for (int i = 0; i < SUMS; ++i) sum[i] = 0.0;
#ifdef VEC4
  uint runs = K / 4u;
  for (uint k = lane; k < runs; k += uint(LOCAL_SIZE_X)) {
    vec4 x[ROWS];
    for (int r = 0; r < ROWS; ++r) x[r] = X4[uint(r) * runs + k];
    for (int o = 0; o < FEW_OUTPUTS; ++o) {
      if (first + uint(o) >= N) break;
      vec4 w = W4[(first + uint(o)) * runs + k];
      for (int r = 0; r < ROWS; ++r) sum[o * ROWS + r] += dot(x[r], w);
    }
  }
#else
  for (uint k = lane; k < K; k += uint(LOCAL_SIZE_X)) {
    float x[ROWS];
    for (int r = 0; r < ROWS; ++r) x[r] = X[uint(r) * K + k];
    for (int o = 0; o < FEW_OUTPUTS; ++o) {
      if (first + uint(o) >= N) break;
      float w = W[(first + uint(o)) * K + k];
      for (int r = 0; r < ROWS; ++r) sum[o * ROWS + r] += x[r] * w;
    }
  }
#endif
  for (int i = 0; i < SUMS; ++i) partial[i][lane] = sum[i];
  memoryBarrierShared();
  barrier();
  for (uint width = uint(LOCAL_SIZE_X) / 2u; width > 0u; width /= 2u) {
    if (lane < width) {
      for (int i = 0; i < SUMS; ++i) partial[i][lane] += partial[i][lane + width];
    }
    memoryBarrierShared();
    barrier();
  }
  if (lane < uint(SUMS)) {
    uint column = first + lane / uint(ROWS), row = lane % uint(ROWS);
    if (column < N && row < M) {
      float value = partial[lane][0];
#if HAS_BIAS
      value += b[column];
#endif
#ifdef RESIDUAL
      value += R[row * N + column];
#endif
      Y[row * N + column] = finishOutput(value);
    }
  }
}
