// The dense layer Y = act(X·Wᵀ + b) for a batch, as a tiled GEMM (Gemm.glsl) with bias and activation fused.
// X [M×K], W [N×K] (PyTorch's [out, in]), b [N], Y [M×N], all row-major float.
// bindings: 0 X read, 1 W read, 2 b read (unused without HAS_BIAS), 3 Y write, 4 R read (RESIDUAL: [M×N] added
// before the activation, a residual connection; with SPLIT_K, SplitSum.glsl adds it)
// uniforms: 0 M (rows), 1 N (outputs), 2 K (inputs)
// defines: ACTIVATION (common.glsl), POINTWISE (an imported model's function after the activation, Pointwise.glsl
// included), HAS_BIAS 0|1, the GEMM configuration; includes Gemm.glsl. SPLIT_K: binding 3 receives the partial sums
// of one chunk of K per group along z, and SplitSum.glsl adds them with bias, activation and function. GEMM_A_VEC4 / GEMM_B_VEC4 (K a multiple of 4): X and W are also read as vec4s.
// TRANSPOSED_OPERANDS (with GEMM_A_ALONG_ROWS and GEMM_B_ALONG_COLUMNS): bindings 0 and 1 hold Xᵀ [K×M] and
// Wᵀ [K×N] instead (Transpose.glsl), so that both operands run along the tile, the core's fastest layout;
// GEMM_A_VEC4 then asks for M, GEMM_B_VEC4 for N a multiple of 4.

layout(std430, binding = 0) readonly buffer Input { float X[]; };
layout(std430, binding = 1) readonly buffer Weight { float W[]; };
layout(std430, binding = 2) readonly buffer Bias { float b[]; };
layout(std430, binding = 3) writeonly buffer Output { float Y[]; };
#if defined(RESIDUAL) && !defined(SPLIT_K)
layout(std430, binding = 4) readonly buffer Residual { float R[]; };
#define RESIDUAL_AT(row, column) + R[(row) * N + (column)]
#else
#define RESIDUAL_AT(row, column)
#endif
layout(location = 0) uniform uint M;
layout(location = 1) uniform uint N;
layout(location = 2) uniform uint K;

#ifdef TRANSPOSED_OPERANDS
#define X_INDEX(row, k) ((k) * M + (row))
#define W_INDEX(k, column) ((k) * N + (column))
#else
#define X_INDEX(row, k) ((row) * K + (k))
#define W_INDEX(k, column) ((column) * K + (k))
#endif
float gemmA(uint row, uint k) { return X[X_INDEX(row, k)]; }
float gemmB(uint k, uint column) { return W[W_INDEX(k, column)]; }
#ifdef GEMM_A_VEC4
layout(std430, binding = 0) readonly buffer InputRuns { vec4 X4[]; };
vec4 gemmA4(uint row, uint k) { return X4[X_INDEX(row, k) / 4u]; }
#endif
#ifdef GEMM_B_VEC4
layout(std430, binding = 1) readonly buffer WeightRuns { vec4 W4[]; };
vec4 gemmB4(uint k, uint column) { return W4[W_INDEX(k, column) / 4u]; }
#endif

void gemmStore(uint row, uint column, float value) {
#if defined(SPLIT_K)
  Y[gemmPartialIndex(row, column, M, N)] = value;
#elif HAS_BIAS
  Y[row * N + column] = finishOutput(value + b[column] RESIDUAL_AT(row, column));
#else
  Y[row * N + column] = finishOutput(value RESIDUAL_AT(row, column));
#endif
}

void main() { gemmRun(M, N, K); }
