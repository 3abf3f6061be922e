// 2-D convolution, NCHW, PyTorch's weight layout, bias and activation fused; as implicit GEMMs on the Gemm.glsl
// core (the im2col matrix is never stored: gemmA/gemmB compute its elements).
//   X [N, C, H, W], Wt [OC, C, KH, KW], b [OC], Y [N, OC, OH, OW], OH = (H + 2·PAD_H − KH) / STRIDE + 1
//   CONV_MODE_FORWARD: Y = act(conv(X, Wt) + b)                     R = N·OH·OW, S = OC, T = C·KH·KW
//                        with the weights transposed by TRANSPOSE_WEIGHTS first, [C·KH·KW, OC], so that both GEMM
//                        operands run along the tile (10.4 -> 8.9 ms for the MNIST CNN's conv2 at batch
//                        10 000 on the H100, bench/NOTES-gemm.md row 12)
//                        CONV_POOL: followed by 2×2 max pooling (stride 2, odd edges dropped), Y [N, OC, OH/2, OW/2]:
//                        the rows come in runs of 4, one pooling window each (R = N·(OH/2)·(OW/2)·4), and the
//                        GEMM stores each run's maximum (GEMM_STORE_RUNS)
//   CONV_MODE_INPUT_GRADIENT (dX): dX = conv_transpose(dZ, Wt), over the pixels of one phase (CONV_PHASE_ROW,
//                        CONV_PHASE_COLUMN) of the stride: the input pixels (ih, iw) with ih ≡ PHASE_ROW and iw ≡
//                        PHASE_COLUMN modulo STRIDE, which only the kernel offsets kh ≡ ih + PAD_H, kw ≡ iw + PAD_W
//                        reach (TAP_ROWS × TAP_COLUMNS of them): a stride-1 transposed convolution of dZ with that part
//                        of the kernel. One dispatch per phase (a single one at stride 1); none multiplies the zeros
//                        that a strided dZ spread out to stride 1 would hold.
//                                                                    R = N·PHASE_ROWS·PHASE_COLUMNS, S = C, T = OC·TAP_ROWS·TAP_COLUMNS
//                        with the weights rearranged by WEIGHTS_FOR_INPUT_GRADIENT first, phase by phase, each
//                        phase's [OC·TAP_ROWS·TAP_COLUMNS, C] (phaseWeights), so that B runs along the tile as in
//                        the forward pass
//   CONV_MODE_WEIGHT_GRADIENT (dW): dW = Σ_{n,oh,ow} dZ · X window                 R = OC,     S = C·KH·KW, T = N·OH·OW
//                        with CONV_BIAS_COLUMN (and SPLIT_K) one more column, of ones, gives db as well: its
//                        partial sums follow dW's in each slice, [OC·C·KH·KW | OC]; SplitSum.glsl's TAIL adds them
//   CONV_MODE_BIAS_GRADIENT (db): db = Σ_{n,oh,ow} dZ, one group per output channel
//   CONV_MODE_TRANSPOSE_WEIGHTS (Wᵀ): result[t·OC + oc] = Wt[oc·C·KH·KW + t], one invocation per weight
//   CONV_MODE_WEIGHTS_FOR_INPUT_GRADIENT (W for dX): result[(oc·KH·KW + k)·C + c] = Wt[(oc·C + c)·KH·KW + k], one invocation per weight
//   CONV_MODE_OUTPUT_GRADIENT (dZ): dY ⊙= act'(Y) in place, one invocation per output: INPUT_GRADIENT, WEIGHT_GRADIENT and BIAS_GRADIENT read dZ, the gradient of
//                        the pre-activation, so that their gathers load one value per element
// bindings: forward 0 X, 1 Wᵀ, 2 b, 3 Y; dX 0 dZ, 2 W from WEIGHTS_FOR_INPUT_GRADIENT, 3 dX; dW 0 dZ, 2 X, 3 dW; db 0 dZ, 3 db;
//           TRANSPOSE_WEIGHTS and WEIGHTS_FOR_INPUT_GRADIENT: 1 Wt, 3 the rearranged weights; OUTPUT_GRADIENT: 1 Y, 3 dY
// uniforms: 0 N, 10 accumulate (gradients: 0 write, 1 add), 11 the GEMM depth (FORWARD and INPUT_GRADIENT)
// defines: CONV_CHANNELS, CONV_HEIGHT, CONV_WIDTH, CONV_OUT_CHANNELS, CONV_KERNEL_HEIGHT, CONV_KERNEL_WIDTH (uint
// literals), CONV_PADDING and CONV_PADDING_WIDTH (int literals: top and bottom, left and right), CONV_STRIDE (int literal);
// CONV_PHASE_ROW and CONV_PHASE_COLUMN (INPUT_GRADIENT: int literals below CONV_STRIDE, the phase); CONV_MODE, ACTIVATION (FORWARD and OUTPUT_GRADIENT), POINTWISE (FORWARD unpooled, inference: a function after the
// activation, Pointwise.glsl included), CONV_RESIDUAL (FORWARD unpooled, inference: binding 4, shaped as Y, added
// before the activation: a residual connection), CONV_INPUT_SCALE (FORWARD unpooled, inference, no padding: binding 5,
// [N, C], X's channels scaled per image as they are read: a squeeze-excite gate); FORWARD, INPUT_GRADIENT and WEIGHT_GRADIENT include Gemm.glsl and take its
// configuration (FORWARD and INPUT_GRADIENT with GEMM_A_ALONG_ROWS, GEMM_B_ALONG_COLUMNS and GEMM_A_GATHER: A, the implicit
// im2col matrix, only in runs of 4 pixels whose positions each invocation works out once); SPLIT_K (FORWARD, INPUT_GRADIENT and
// WEIGHT_GRADIENT): binding 3 is the partial-sum workspace instead; GEMM_B_VEC4 (FORWARD with OC, INPUT_GRADIENT with C a multiple of
// 4): the rearranged weights are also read as vec4s; GEMM_A_VEC4 (WEIGHT_GRADIENT with OH·OW a multiple of 4): dZ too;
// GEMM_B_GATHER (WEIGHT_GRADIENT): runs of 4 pixels of the implicit im2col matrix computed together; CONV_POOL with
// GEMM_STORE_RUNS (FORWARD): pooled output; CONV_PLAIN_ROWS instead of GEMM_A_GATHER (FORWARD unpooled, a 1x1 kernel
// at stride 1 without padding): A read as X's planes, with GEMM_A_VEC4 (H·W a multiple of 4) in vec4 runs;
// GEMM_STORE_RUNS without CONV_POOL (FORWARD, OH·OW a multiple of 4, Y, its slices and the residual 16-byte
// aligned): Y stored in vec4 runs of pixels

layout(std430, binding = 0) readonly buffer First { float first[]; };
layout(std430, binding = 1) readonly buffer Second { float second[]; };
layout(std430, binding = 2) readonly buffer Third { float third[]; };
layout(std430, binding = 3) buffer Result { float result[]; };
#ifdef CONV_INPUT_SCALE
layout(std430, binding = 5) readonly buffer InputScale { float inputScale[]; };
#endif
#ifdef CONV_RESIDUAL
layout(std430, binding = 4) readonly buffer Residual { float residual[]; };
#endif
layout(location = 0) uniform uint N;
layout(location = 10) uniform uint accumulate;
// The GEMM's sum length for FORWARD and INPUT_GRADIENT (C·KH·KW, OC·KH·KW): a constant of the geometry, passed as a uniform
// all the same, because Gemm.glsl asks the compiler to unroll every loop and a stage loop with a constant trip
// count would be unrolled whole (minutes of compilation on NVIDIA).
layout(location = 11) uniform uint gemmDepth;
// C, H, W, OC, KH, KW, PAD_H, PAD_W, STRIDE, OH and OW: ConvGeometry.glsl.

// The phases of the stride (INPUT_GRADIENT): row phase p holds the input rows ih ≡ p (mod STRIDE), which kernel rows
// kh ≡ p + PAD_H reach, the first of them firstTapRow(p), every STRIDE-th after it.
int firstTapRow(int p) { return (p + PAD_H) % CONV_STRIDE; }
int firstTapColumn(int p) { return (p + PAD_W) % CONV_STRIDE; }
uint tapRows(int p) { return (KH + STRIDE - 1u - uint(firstTapRow(p))) / STRIDE; }
uint tapColumns(int p) { return (KW + STRIDE - 1u - uint(firstTapColumn(p))) / STRIDE; }
// Where phase (p, q)'s weights begin in the rearranged weights: the phases in row-major order, each [OC·taps, C].
uint phaseWeights(int p, int q) {
  uint before = 0u;
  for (int row = 0; row < p; ++row) before += tapRows(row) * KW;
  for (int column = 0; column < q; ++column) before += tapRows(p) * tapColumns(column);
  return before * OC * C;
}

void store(uint index, float value) { result[index] = accumulate != 0u ? result[index] + value : value; }

#if CONV_MODE == CONV_MODE_BIAS_GRADIENT
// dZ at output (n, oc, oh, ow).
float dZ(uint n, uint oc, uint oh, uint ow) { return first[((n * OC + oc) * OH + oh) * OW + ow]; }
#endif

#if CONV_MODE == CONV_MODE_WEIGHT_GRADIENT
// X at (n, c, ih, iw), zero in the padding.
float inputAt(uint n, uint c, int ih, int iw) {
  if (ih < 0 || iw < 0 || ih >= int(H) || iw >= int(W)) return 0.0;
  return third[((n * C + c) * H + uint(ih)) * W + uint(iw)];
}
#endif

// Steps (n, row, column) to the next pixel of planes `height` × `width`.
void nextPixel(inout uint n, inout uint row, inout uint column, uint height, uint width) {
  if (++column == width) {
    column = 0u;
    if (++row == height) {
      row = 0u;
      ++n;
    }
  }
}

#if (CONV_MODE == CONV_MODE_FORWARD || CONV_MODE == CONV_MODE_INPUT_GRADIENT) && defined(GEMM_A_GATHER)
// Both take A as an implicit im2col matrix, gathered in runs (GEMM_A_GATHER): row r is a pixel of planes
// ROWS_HEIGHT × ROWS_WIDTH, depth t a (channel, kh, kw) of the SOURCE planes in `first` (X for the forward
// pass, dZ for dX), over which the kernel runs forward (FORWARD) or mirrored (INPUT_GRADIENT).
#if CONV_MODE == CONV_MODE_FORWARD
#define ROWS_HEIGHT OH
#define ROWS_WIDTH OW
#define SOURCE_CHANNELS C
#define SOURCE_HEIGHT H
#define SOURCE_WIDTH W
#define KERNEL_SIGN 1
#define ROW_STEP STRIDE
#define TOP_SHIFT (-PAD_H)
#define LEFT_SHIFT (-PAD_W)
#define TAP_ROWS KH
#define TAP_COLUMNS KW
#else
#define PHASE_ROWS ((H + STRIDE - 1u - uint(CONV_PHASE_ROW)) / STRIDE)
#define PHASE_COLUMNS ((W + STRIDE - 1u - uint(CONV_PHASE_COLUMN)) / STRIDE)
#define ROWS_HEIGHT PHASE_ROWS
#define ROWS_WIDTH PHASE_COLUMNS
#define SOURCE_CHANNELS OC
#define SOURCE_HEIGHT OH
#define SOURCE_WIDTH OW
#define KERNEL_SIGN (-1)
// Row q of the phase is input row q·STRIDE + PHASE_ROW, which tap j of the phase's kernel rows (kh = firstTapRow +
// j·STRIDE) reads from dZ's row q + TOP_SHIFT − j.
#define ROW_STEP 1u
#define TOP_SHIFT ((CONV_PHASE_ROW + PAD_H - firstTapRow(CONV_PHASE_ROW)) / CONV_STRIDE)
#define LEFT_SHIFT ((CONV_PHASE_COLUMN + PAD_W - firstTapColumn(CONV_PHASE_COLUMN)) / CONV_STRIDE)
#define TAP_ROWS tapRows(CONV_PHASE_ROW)
#define TAP_COLUMNS tapColumns(CONV_PHASE_COLUMN)
#endif
// A phase that no kernel offset reaches (a 1x1 kernel's odd rows at stride 2) has a GEMM of depth 0, which writes
// zeros; its divisors stay 1.
#define TAPS max(TAP_ROWS * TAP_COLUMNS, 1u)
#define TAP_DIVISOR max(TAP_COLUMNS, 1u)
// The row coordinate of a row past the matrix: no kernel offset brings it inside the source planes.
const int outsideRows = -0x40000000;

#ifdef CONV_POOL
#define POOLED_HEIGHT (OH / 2u)
#define POOLED_WIDTH (OW / 2u)
// Run r..r+3 (r a multiple of 4) is the pooling window r / 4, (n, pooled row, pooled column); its pixels are
// (0, 0), (0, 1), (1, 0), (1, 1) of the window.
void firstPixelOfRun(uint r, out uint n, out uint row, out uint column) {
  uint window = r / 4u, pooled = window % (POOLED_HEIGHT * POOLED_WIDTH);
  n = window / (POOLED_HEIGHT * POOLED_WIDTH);
  row = 2u * (pooled / POOLED_WIDTH);
  column = 2u * (pooled % POOLED_WIDTH);
}
// From pixel i of the run to pixel i + 1.
void nextPixelOfRun(inout uint n, inout uint row, inout uint column, uint i) {
  if (i == 1u) {
    --column;
    ++row;
  } else {
    ++column;
  }
}
#else
void firstPixelOfRun(uint r, out uint n, out uint row, out uint column) {
  uint pixel = r % (ROWS_HEIGHT * ROWS_WIDTH);
  n = r / (ROWS_HEIGHT * ROWS_WIDTH);
  row = pixel / ROWS_WIDTH;
  column = pixel % ROWS_WIDTH;
}
void nextPixelOfRun(inout uint n, inout uint row, inout uint column, uint i) { nextPixel(n, row, column, ROWS_HEIGHT, ROWS_WIDTH); }
#endif

// Rows r..r+3: the source index and coordinates of kernel offset (0, 0) of each, once per group.
void gemmAGatherRows(uint r, uint R, out ivec4 base, out ivec4 y, out ivec4 x) {
  uint n, row, column;
  firstPixelOfRun(r, n, row, column);
  for (uint i = 0u; i < 4u; ++i) {
    int top = int(row * ROW_STEP) + TOP_SHIFT, left = int(column * ROW_STEP) + LEFT_SHIFT;
    base[i] = int(n * SOURCE_CHANNELS * SOURCE_HEIGHT * SOURCE_WIDTH) + top * int(SOURCE_WIDTH) + left;
    y[i] = r + i < R ? top : outsideRows;
    x[i] = left;
    nextPixelOfRun(n, row, column, i);
  }
}
// Their 4 values at depth t: one offset for all, a bounds test each.
vec4 gemmAGather(ivec4 base, ivec4 y, ivec4 x, uint t) {
  uint channel = t / TAPS, k = t % TAPS;
  int dy = KERNEL_SIGN * int(k / TAP_DIVISOR), dx = KERNEL_SIGN * int(k % TAP_DIVISOR);
  int offset = int(channel * SOURCE_HEIGHT * SOURCE_WIDTH) + dy * int(SOURCE_WIDTH) + dx;
  vec4 v;
  for (uint i = 0u; i < 4u; ++i) {
    bool inside = uint(y[i] + dy) < SOURCE_HEIGHT && uint(x[i] + dx) < SOURCE_WIDTH;
#ifdef CONV_INPUT_SCALE
    // Without padding a row's source index lies within its image's C·H·W values.
    v[i] = inside ? first[base[i] + offset] * inputScale[uint(base[i]) / (C * H * W) * C + channel] : 0.0;
#else
    v[i] = inside ? first[base[i] + offset] : 0.0;
#endif
  }
  return v;
}
#endif

#if CONV_MODE == CONV_MODE_FORWARD && defined(CONV_PLAIN_ROWS)
#ifdef CONV_POOL
#error pooling takes its rows gathered, one window per run
#endif
// A 1x1 kernel at stride 1 without padding: row r is pixel r of the N·H·W and depth t a channel, so A is X's planes
// as they lie, read like any matrix (no row descriptions kept in registers, every GEMM configuration available).
uint plainRowIndex(uint r, uint t) { return ((r / (H * W)) * C + t) * H * W + r % (H * W); }
#ifdef CONV_INPUT_SCALE
float rowScale(uint r, uint t) { return inputScale[(r / (H * W)) * C + t]; }
#else
float rowScale(uint r, uint t) { return 1.0; }
#endif
float gemmA(uint r, uint t) { return first[plainRowIndex(r, t)] * rowScale(r, t); }
#ifdef GEMM_A_VEC4
// The op asks for it when H·W is a multiple of 4: rows r..r+3 (r a multiple of 4) then lie in one image, one aligned
// vec4 of X.
layout(std430, binding = 0) readonly buffer FirstRuns { vec4 first4[]; };
vec4 gemmA4(uint r, uint t) { return first4[plainRowIndex(r, t) / 4u] * rowScale(r, t); }
#endif
#endif

#if CONV_MODE == CONV_MODE_FORWARD
float gemmB(uint t, uint s) { return second[t * OC + s]; }
#ifdef GEMM_B_VEC4
layout(std430, binding = 1) readonly buffer SecondRuns { vec4 second4[]; };
vec4 gemmB4(uint t, uint s) { return second4[(t * OC + s) / 4u]; }
#endif
#elif CONV_MODE == CONV_MODE_INPUT_GRADIENT
#define PHASE_WEIGHTS phaseWeights(CONV_PHASE_ROW, CONV_PHASE_COLUMN)
float gemmB(uint t, uint s) { return third[PHASE_WEIGHTS + t * C + s]; }
#ifdef GEMM_B_VEC4
// PHASE_WEIGHTS is a multiple of C.
layout(std430, binding = 2) readonly buffer ThirdRuns { vec4 third4[]; };
vec4 gemmB4(uint t, uint s) { return third4[(PHASE_WEIGHTS + t * C + s) / 4u]; }
#endif
#elif CONV_MODE == CONV_MODE_WEIGHT_GRADIENT
float gemmA(uint oc, uint t) { return first[((t / (OH * OW)) * OC + oc) * OH * OW + t % (OH * OW)]; }
#ifdef GEMM_A_VEC4
// The op asks for it when OH·OW is a multiple of 4: a run of 4 pixels from t (a multiple of 4) is then one
// aligned vec4 of dZ.
layout(std430, binding = 0) readonly buffer FirstRuns { vec4 first4[]; };
vec4 gemmA4(uint oc, uint t) { return first4[(((t / (OH * OW)) * OC + oc) * OH * OW + t % (OH * OW)) / 4u]; }
#endif
float gemmB(uint t, uint s) {
#ifdef CONV_BIAS_COLUMN
  if (s == C * KH * KW) return 1.0;
#endif
  uint n = t / (OH * OW), pixel = t % (OH * OW), c = s / (KH * KW), k = s % (KH * KW);
  return inputAt(n, c, int(pixel / OW * STRIDE + k / KW) - PAD_H, int(pixel % OW * STRIDE + k % KW) - PAD_W);
}
// Output pixels t..t+3 for one (c, kh, kw): the divisions once, then a step per pixel.
vec4 gemmBGather(uint s, uint t, uint S, uint tEnd) {
  vec4 v = vec4(0.0);
#ifdef CONV_BIAS_COLUMN
  if (s == C * KH * KW) {
    for (uint i = 0u; i < 4u; ++i) v[i] = t + i < tEnd ? 1.0 : 0.0;
    return v;
  }
#endif
  uint c = s / (KH * KW), k = s % (KH * KW);
  int dh = int(k / KW) - PAD_H, dw = int(k % KW) - PAD_W;
  uint n = t / (OH * OW), pixel = t % (OH * OW), oh = pixel / OW, ow = pixel % OW;
  for (uint i = 0u; i < 4u; ++i) {
    if (t + i < tEnd) v[i] = inputAt(n, c, int(oh * STRIDE) + dh, int(ow * STRIDE) + dw);
    nextPixel(n, oh, ow, OH, OW);
  }
  return v;
}
#endif

#if CONV_MODE == CONV_MODE_FORWARD || CONV_MODE == CONV_MODE_INPUT_GRADIENT || CONV_MODE == CONV_MODE_WEIGHT_GRADIENT
#if CONV_MODE == CONV_MODE_FORWARD && defined(CONV_POOL)
#define GEMM_SHAPE N * POOLED_HEIGHT * POOLED_WIDTH * 4u, OC, gemmDepth
#elif CONV_MODE == CONV_MODE_FORWARD
#define GEMM_SHAPE N * OH * OW, OC, gemmDepth
#elif CONV_MODE == CONV_MODE_INPUT_GRADIENT
#define GEMM_SHAPE N * PHASE_ROWS * PHASE_COLUMNS, C, gemmDepth
#elif defined(CONV_BIAS_COLUMN)
#if !defined(SPLIT_K)
#error CONV_BIAS_COLUMN writes db through the split-K workspace
#endif
#define GEMM_SHAPE OC, C * KH * KW + 1u, N * OH * OW
#else
#define GEMM_SHAPE OC, C * KH * KW, N * OH * OW
#endif

#ifdef CONV_POOL
// The activation never falls as its argument rises, so the window's largest sum gives its largest output.
void gemmStoreRun(uint r, uint s, vec4 values) {
  uint window = r / 4u, n = window / (POOLED_HEIGHT * POOLED_WIDTH), pooled = window % (POOLED_HEIGHT * POOLED_WIDTH);
  result[(n * OC + s) * POOLED_HEIGHT * POOLED_WIDTH + pooled] = activate(maxNaN(maxNaN(values.x, values.y), maxNaN(values.z, values.w)) + third[s]);
}
#elif defined(GEMM_STORE_RUNS)
// Y's planes are a multiple of 4 pixels long (the op asks for it then): rows r..r+3 are 4 pixels of one plane, one
// aligned vec4 of Y (or of the split's slice), so that a warp stores whole runs instead of a float per plane.
layout(std430, binding = 3) buffer ResultRuns { vec4 result4[]; };
#ifdef CONV_RESIDUAL
layout(std430, binding = 4) readonly buffer ResidualRuns { vec4 residual4[]; };
#endif
void gemmStoreRun(uint r, uint s, vec4 values) {
  uint n = r / (OH * OW), pixel = r % (OH * OW), run = ((n * OC + s) * OH * OW + pixel) / 4u;
#ifdef SPLIT_K
  result4[gl_WorkGroupID.z * (N * OC * OH * OW / 4u) + run] = values;
#else
  vec4 sum = values + third[s];
#ifdef CONV_RESIDUAL
  sum += residual4[run];
#endif
  for (uint i = 0u; i < 4u; ++i) sum[i] = finishOutput(sum[i]);
  result4[run] = sum;
#endif
}
#else
#if CONV_MODE == CONV_MODE_INPUT_GRADIENT
// dX's index of the phase's row r, channel s.
uint inputGradientIndex(uint r, uint s) {
  uint n = r / (PHASE_ROWS * PHASE_COLUMNS), q = r % (PHASE_ROWS * PHASE_COLUMNS);
  uint ih = q / PHASE_COLUMNS * STRIDE + uint(CONV_PHASE_ROW), iw = q % PHASE_COLUMNS * STRIDE + uint(CONV_PHASE_COLUMN);
  return ((n * C + s) * H + ih) * W + iw;
}
#endif
void gemmStore(uint r, uint s, float value) {
#if defined(SPLIT_K) && CONV_MODE == CONV_MODE_FORWARD
  // Slice z of the workspace in Y's layout, before bias and activation (SplitSum.glsl's BIAS_ACTIVATION adds them).
  uint n = r / (OH * OW), pixel = r % (OH * OW);
  result[gl_WorkGroupID.z * N * OC * OH * OW + (n * OC + s) * OH * OW + pixel] = value;
#elif defined(SPLIT_K) && CONV_MODE == CONV_MODE_INPUT_GRADIENT
  // Slice z of the workspace in dX's own layout (every phase has the same slices), so SplitSum.glsl adds slices
  // element by element.
  result[gl_WorkGroupID.z * N * C * H * W + inputGradientIndex(r, s)] = value;
#elif defined(SPLIT_K) && defined(CONV_BIAS_COLUMN)
  uint slice = gl_WorkGroupID.z * OC * (C * KH * KW + 1u);
  result[slice + (s < C * KH * KW ? r * C * KH * KW + s : OC * C * KH * KW + r)] = value;
#elif defined(SPLIT_K)
  result[gemmPartialIndex(r, s, OC, C * KH * KW)] = value;
#elif CONV_MODE == CONV_MODE_FORWARD
  uint n = r / (OH * OW), pixel = r % (OH * OW);
#ifdef CONV_RESIDUAL
  result[(n * OC + s) * OH * OW + pixel] = finishOutput(value + third[s] + residual[(n * OC + s) * OH * OW + pixel]);
#else
  result[(n * OC + s) * OH * OW + pixel] = finishOutput(value + third[s]);
#endif
#elif CONV_MODE == CONV_MODE_INPUT_GRADIENT
  store(inputGradientIndex(r, s), value);
#else
  store(r * C * KH * KW + s, value);
#endif
}
#endif

void main() { gemmRun(GEMM_SHAPE); }
#elif CONV_MODE == CONV_MODE_OUTPUT_GRADIENT
layout(local_size_x = GLNET_GROUP_SIZE) in;

void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i < N * OC * OH * OW) result[i] *= activationDerivative(second[i]);
}
#elif CONV_MODE == CONV_MODE_TRANSPOSE_WEIGHTS || CONV_MODE == CONV_MODE_WEIGHTS_FOR_INPUT_GRADIENT
layout(local_size_x = GLNET_GROUP_SIZE) in;

void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i >= OC * C * KH * KW) return;
#if CONV_MODE == CONV_MODE_TRANSPOSE_WEIGHTS
  uint oc = i / (C * KH * KW), t = i % (C * KH * KW);
  result[t * OC + oc] = second[i];
#else
  // Weight (oc, c, kh, kw) is tap (kh / STRIDE, kw / STRIDE) of the phase whose rows kh and columns kw reach.
  uint oc = i / (C * KH * KW), c = (i / (KH * KW)) % C, kh = (i / KW) % KH, kw = i % KW;
  int p = (int(kh) - PAD_H % CONV_STRIDE + CONV_STRIDE) % CONV_STRIDE, q = (int(kw) - PAD_W % CONV_STRIDE + CONV_STRIDE) % CONV_STRIDE;
  uint tap = kh / STRIDE * tapColumns(q) + kw / STRIDE;
  result[phaseWeights(p, q) + (oc * tapRows(p) * tapColumns(q) + tap) * C + c] = second[i];
#endif
}
#else
layout(local_size_x = GLNET_GROUP_SIZE) in;
shared float partial[GLNET_GROUP_SIZE];

void main() {
  uint oc = gl_WorkGroupID.x, local = gl_LocalInvocationID.x;
  float sum = 0.0;
  for (uint i = local; i < N * OH * OW; i += uint(GLNET_GROUP_SIZE)) sum += dZ(i / (OH * OW), oc, (i % (OH * OW)) / OW, i % OW);
  partial[local] = sum;
  barrier();
  for (uint stride = uint(GLNET_GROUP_SIZE / 2); stride > 0u; stride >>= 1) {
    if (local < stride) partial[local] += partial[local + stride];
    barrier();
  }
  if (local == 0u) store(oc, partial[0]);
}
#endif
