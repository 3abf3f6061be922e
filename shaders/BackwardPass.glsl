// Gradients of the dense layer Y = act(X·Wᵀ + b), the activation derivative fused: with dZ = dY ⊙ act'(Y),
//   BACKWARD_MODE_INPUT_GRADIENT:  dX [M×K] = dZ·W         (tiled GEMM, Gemm.glsl)
//   BACKWARD_MODE_WEIGHT_GRADIENT: dW [N×K] = dZᵀ·X        (tiled GEMM, Gemm.glsl)
//   BACKWARD_MODE_BIAS_GRADIENT:   db [N]   = Σ_rows dZ    (a 16-column strip per group, partial sums down each column)
// bindings: 0 dY [M×N] read, 1 Y [M×N] read (the forward output), 2 W [N×K] (INPUT_GRADIENT) or X [M×K] (WEIGHT_GRADIENT)
//           read, 3 the gradient, written or, with accumulate, added to
// uniforms: 0 M (rows), 1 N (outputs), 2 K (inputs), 3 accumulate (0 overwrite, 1 add)
// defines: ACTIVATION, BACKWARD_MODE, the GEMM configuration; SPLIT_K (WEIGHT_GRADIENT): binding 3 is the partial-sum
// workspace instead. GEMM_A_VEC4 (N a multiple of 4) reads dY and Y as vec4s; GEMM_B_VEC4 (K a multiple of 4)
// the operand.
// TRANSPOSED_OUTPUT_GRADIENT (INPUT_GRADIENT, with GEMM_A_ALONG_ROWS): binding 0 holds dZᵀ [N×M] instead of dY
// (Transpose.glsl), so that both operands run along the tile, the core's fastest layout; Y is not read;
// GEMM_A_VEC4 then asks for M a multiple of 4.

layout(std430, binding = 2) readonly buffer Operand { float operand[]; };
layout(std430, binding = 3) buffer Gradient { float gradient[]; };
layout(location = 0) uniform uint M;
layout(location = 1) uniform uint N;
layout(location = 2) uniform uint K;
layout(location = 3) uniform uint accumulate;

void store(uint index, float value) { gradient[index] = accumulate != 0u ? gradient[index] + value : value; }

// Not declared where binding 0 holds dZᵀ: a device may count declared blocks against its limit (OpenGL ES's minimum
// device allows 8 per compute shader).
#ifndef TRANSPOSED_OUTPUT_GRADIENT
layout(std430, binding = 0) readonly buffer OutputGradient { float dY[]; };
layout(std430, binding = 1) readonly buffer Output { float Y[]; };

float dZ(uint row, uint column) { return dY[row * N + column] * activationDerivative(Y[row * N + column]); }

#ifdef GEMM_A_VEC4
layout(std430, binding = 0) readonly buffer OutputGradientRuns { vec4 dY4[]; };
layout(std430, binding = 1) readonly buffer OutputRuns { vec4 Y4[]; };
// dZ at (row, n..n + 3), n a multiple of 4.
vec4 dZ4(uint row, uint n) {
  uint run = (row * N + n) / 4u;
  vec4 y = Y4[run];
  return dY4[run] * vec4(activationDerivative(y.x), activationDerivative(y.y), activationDerivative(y.z),
                         activationDerivative(y.w));
}
#endif
#endif
#ifdef GEMM_B_VEC4
layout(std430, binding = 2) readonly buffer OperandRuns { vec4 operand4[]; };
#endif

#if BACKWARD_MODE == BACKWARD_MODE_INPUT_GRADIENT
#ifdef TRANSPOSED_OUTPUT_GRADIENT
layout(std430, binding = 0) readonly buffer TransposedGradient { float dZT[]; };
float gemmA(uint row, uint n) { return dZT[n * M + row]; }
#ifdef GEMM_A_VEC4
layout(std430, binding = 0) readonly buffer TransposedGradientRuns { vec4 dZT4[]; };
vec4 gemmA4(uint row, uint n) { return dZT4[(n * M + row) / 4u]; }
#endif
#else
float gemmA(uint row, uint n) { return dZ(row, n); }
#ifdef GEMM_A_VEC4
vec4 gemmA4(uint row, uint n) { return dZ4(row, n); }
#endif
#endif
float gemmB(uint n, uint k) { return operand[n * K + k]; }
#ifdef GEMM_B_VEC4
vec4 gemmB4(uint n, uint k) { return operand4[(n * K + k) / 4u]; }
#endif
#elif BACKWARD_MODE == BACKWARD_MODE_WEIGHT_GRADIENT
float gemmA(uint n, uint row) { return dZ(row, n); }
float gemmB(uint row, uint k) { return operand[row * K + k]; }
#ifdef GEMM_A_VEC4
vec4 gemmA4(uint n, uint row) { return dZ4(row, n); }
#endif
#ifdef GEMM_B_VEC4
vec4 gemmB4(uint row, uint k) { return operand4[(row * K + k) / 4u]; }
#endif
#endif

#if BACKWARD_MODE == BACKWARD_MODE_INPUT_GRADIENT || BACKWARD_MODE == BACKWARD_MODE_WEIGHT_GRADIENT
void gemmStore(uint r, uint s, float value) {
#if BACKWARD_MODE == BACKWARD_MODE_INPUT_GRADIENT
  uint R = M, S = K;
#else
  uint R = N, S = K;
#endif
#ifdef SPLIT_K
  gradient[gemmPartialIndex(r, s, R, S)] = value;
#else
  store(r * S + s, value);
#endif
}

void main() {
#if BACKWARD_MODE == BACKWARD_MODE_INPUT_GRADIENT
  gemmRun(M, K, N);
#else
  gemmRun(N, K, M);
#endif
}
#else
// A strip of 16 columns per group, GLNET_GROUP_SIZE / 16 invocations down each column (a 1-D group, because GL 4.3
// takes only literals in layout qualifiers): narrow strips, so that a layer of a few thousand outputs still fills
// the GPU (4096 outputs: 256 groups; strips of 64 took 0.046 ms on the H100 at batch 1024).
#define BIAS_COLUMNS 16
#define BIAS_ROWS (GLNET_GROUP_SIZE / BIAS_COLUMNS)
layout(local_size_x = GLNET_GROUP_SIZE) in;
shared float partial[BIAS_ROWS][BIAS_COLUMNS];

void main() {
  uint lane = gl_LocalInvocationIndex % uint(BIAS_COLUMNS), down = gl_LocalInvocationIndex / uint(BIAS_COLUMNS);
  uint column = gl_WorkGroupID.x * uint(BIAS_COLUMNS) + lane;
  float sum = 0.0;
  if (column < N) {
    for (uint row = down; row < M; row += uint(BIAS_ROWS)) sum += dZ(row, column);
  }
  partial[down][lane] = sum;
  barrier();
  if (down == 0u && column < N) {
    float total = 0.0;
    for (uint row = 0u; row < uint(BIAS_ROWS); ++row) total += partial[row][lane];
    store(column, total);
  }
}
#endif
