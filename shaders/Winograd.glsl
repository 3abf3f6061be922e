// Winograd's F(m×m, 3×3) convolutions (Lavin and Gray, 2015), m = WINOGRAD_TILE, 2 or 4, for the 3×3 stride-1
// convolutions of inference graphs, NCHW: each m×m output tile is Aᵀ[Σ_c (G g Gᵀ) ⊙ (Bᵀ d B)]A, g a 3×3 kernel and d
// the tile's α×α input window, α = m + 2, so the α² elementwise products summed over the input channels are α² GEMMs
// on the Gemm.glsl core: 16 multiplies per 4 outputs (F(2×2)) or 36 per 16 (F(4×4)) where the direct form needs 9
// per output. F(2×2)'s coefficients are 0, ±1 and ±½, so its rounding error stays within a few times the direct
// sum's; F(4×4)'s reach 8 and 1/24, and its error is larger (the tests state each bound).
//   X [N, C, H, W], Wt [OC, C, 3, 3], b [OC], Y [N, OC, OH, OW], OH = H + 2·PAD − 2; the tiles cover Y in
//   TH = ⌈OH/m⌉ rows of TW = ⌈OW/m⌉, T = N·TH·TW of them, t = (n·TH + th)·TW + tw, stored TP = T rounded up to 4 apart
//   WINOGRAD_MODE_WEIGHTS: U[p][c][oc] = (G g Gᵀ)[p] for g = Wt[oc][c], one invocation per (oc, c)
//   WINOGRAD_MODE_INPUT:   V[p][c][t] = (Bᵀ d B)[p], one invocation per (c, t)
//   WINOGRAD_MODE_GEMMS:   M[p][oc][t] = Σ_c V[p][c][t]·U[p][c][oc], the position p along z: R = T, S = OC, depth C,
//                            both operands contiguous along the tile (GEMM_A_ALONG_ROWS, GEMM_B_ALONG_COLUMNS)
//   WINOGRAD_MODE_OUTPUT:  Y = finishOutput(Aᵀ M A + b [+ residual]) per tile, one invocation per (n, oc, th, tw);
//                            WINOGRAD_POOL: Y [N, OC, OH/2, OW/2], the largest output of each 2×2 window of the tile
//                            (2×2 max pooling with stride 2; the odd edges are dropped)
// bindings: WEIGHTS: 1 Wt, 3 U; INPUT: 0 X, 3 V; GEMMS: 0 V, 1 U, 3 M; OUTPUT: 0 M, 2 b, 3 Y, 4 residual
//           (WINOGRAD_RESIDUAL)
// Scratch memory bounds the images a run of INPUT, GEMMS and OUTPUT takes: the op runs the batch in chunks of N images from
// image `firstImage` of X and Y, V and M holding one chunk.
// uniforms: 0 N (the images of this chunk), 1 firstImage (INPUT and OUTPUT); 11 the GEMM depth C (GEMMS: Gemm.glsl
// unrolls every loop, so its stage loop's trip count must stay a run-time value)
// defines: the convolution geometry of engine/ops/Conv.h (CONV_CHANNELS, CONV_HEIGHT, CONV_WIDTH, CONV_OUT_CHANNELS,
// CONV_PADDING; the kernel and stride ones are 3 and 1), WINOGRAD_TILE, WINOGRAD_MODE; GEMMS: Gemm.glsl's
// configuration, GEMM_A_VEC4 and GEMM_B_VEC4 (OC a multiple of 4); OUTPUT: ACTIVATION, POINTWISE (Pointwise.glsl
// included), WINOGRAD_RESIDUAL, WINOGRAD_POOL

layout(std430, binding = 0) readonly buffer First { float first[]; };
layout(std430, binding = 1) readonly buffer Second { float second[]; };
layout(std430, binding = 2) readonly buffer Third { float third[]; };
layout(std430, binding = 3) writeonly buffer Result { float result[]; };
#ifdef WINOGRAD_RESIDUAL
layout(std430, binding = 4) readonly buffer Residual { float residual[]; };
#endif
layout(location = 0) uniform uint N;
#if WINOGRAD_MODE == WINOGRAD_MODE_INPUT || WINOGRAD_MODE == WINOGRAD_MODE_OUTPUT
layout(location = 1) uniform uint firstImage;
#endif

#define C CONV_CHANNELS
#define H CONV_HEIGHT
#define W CONV_WIDTH
#define OC CONV_OUT_CHANNELS
#define PAD CONV_PADDING
#define OH (H + 2u * uint(PAD) - 2u)
#define OW (W + 2u * uint(PAD) - 2u)
#define TILE uint(WINOGRAD_TILE)
#define ALPHA (TILE + 2u)
#define POSITIONS (ALPHA * ALPHA)
#define TH ((OH + TILE - 1u) / TILE)
#define TW ((OW + TILE - 1u) / TILE)
#define TILES (N * TH * TW)
#define TP ((TILES + 3u) & ~3u)

#if WINOGRAD_MODE == WINOGRAD_MODE_GEMMS
layout(location = 11) uniform uint gemmDepth;

float gemmA(uint r, uint t) { return first[(gl_WorkGroupID.z * C + t) * TP + r]; }
#ifdef GEMM_A_VEC4
layout(std430, binding = 0) readonly buffer FirstRuns { vec4 first4[]; };
vec4 gemmA4(uint r, uint t) { return first4[((gl_WorkGroupID.z * C + t) * TP + r) / 4u]; }
#endif
float gemmB(uint t, uint s) { return second[(gl_WorkGroupID.z * C + t) * OC + s]; }
#ifdef GEMM_B_VEC4
layout(std430, binding = 1) readonly buffer SecondRuns { vec4 second4[]; };
vec4 gemmB4(uint t, uint s) { return second4[((gl_WorkGroupID.z * C + t) * OC + s) / 4u]; }
#endif
void gemmStore(uint r, uint s, float value) { result[(gl_WorkGroupID.z * OC + s) * TP + r] = value; }

void main() { gemmRun(TILES, OC, gemmDepth); }
#else
layout(local_size_x = GLNET_GROUP_SIZE) in;
// The transforms' loops below have constant trip counts and constant coefficients: unrolled, the arrays stay in
// registers and the zero coefficients drop out (NVIDIA keeps such loops rolled, over local memory, unless told).
#pragma optionNV(unroll all)

// Bᵀ (ALPHA × ALPHA), G (ALPHA × 3) and Aᵀ (TILE × ALPHA), row-major: Lavin and Gray's choice of points (0, ±1, ∞
// for F(2, 3); 0, ±1, ±2, ∞ for F(4, 3)).
#if WINOGRAD_TILE == 2
const float inputTransform[16] = float[16](1.0, 0.0, -1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, -1.0, 1.0, 0.0, 0.0, 1.0, 0.0, -1.0);
const float kernelTransform[12] = float[12](1.0, 0.0, 0.0, 0.5, 0.5, 0.5, 0.5, -0.5, 0.5, 0.0, 0.0, 1.0);
const float outputTransform[8] = float[8](1.0, 1.0, 1.0, 0.0, 0.0, 1.0, -1.0, -1.0);
#else
const float inputTransform[36] = float[36](4.0, 0.0, -5.0, 0.0, 1.0, 0.0,
                                           0.0, -4.0, -4.0, 1.0, 1.0, 0.0,
                                           0.0, 4.0, -4.0, -1.0, 1.0, 0.0,
                                           0.0, -2.0, -1.0, 2.0, 1.0, 0.0,
                                           0.0, 2.0, -1.0, -2.0, 1.0, 0.0,
                                           0.0, 4.0, 0.0, -5.0, 0.0, 1.0);
const float kernelTransform[18] = float[18](0.25, 0.0, 0.0,
                                            -1.0 / 6.0, -1.0 / 6.0, -1.0 / 6.0,
                                            -1.0 / 6.0, 1.0 / 6.0, -1.0 / 6.0,
                                            1.0 / 24.0, 1.0 / 12.0, 1.0 / 6.0,
                                            1.0 / 24.0, -1.0 / 12.0, 1.0 / 6.0,
                                            0.0, 0.0, 1.0);
const float outputTransform[24] = float[24](1.0, 1.0, 1.0, 1.0, 1.0, 0.0,
                                            0.0, 1.0, -1.0, 2.0, -2.0, 0.0,
                                            0.0, 1.0, 1.0, 4.0, 4.0, 0.0,
                                            0.0, 1.0, -1.0, 8.0, -8.0, 1.0);
#endif
// coefficient·x, with the zero coefficients' products left out where the loops unroll rather than left to the
// compiler (0·x is not 0 for an infinite x, so it may keep them).
float scaled(float coefficient, float x) { return coefficient == 0.0 ? 0.0 : coefficient * x; }

#if WINOGRAD_MODE == WINOGRAD_MODE_WEIGHTS
void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i >= OC * C) return;
  uint oc = i / C, c = i % C;
  float g[9];
  for (uint k = 0u; k < 9u; ++k) g[k] = second[i * 9u + k];
  float gG[ALPHA * 3u];  // G·g
  for (uint a = 0u; a < ALPHA; ++a) {
    for (uint b = 0u; b < 3u; ++b) {
      gG[a * 3u + b] = scaled(kernelTransform[a * 3u], g[b]) + scaled(kernelTransform[a * 3u + 1u], g[3u + b]) +
                       scaled(kernelTransform[a * 3u + 2u], g[6u + b]);
    }
  }
  for (uint a = 0u; a < ALPHA; ++a) {
    for (uint e = 0u; e < ALPHA; ++e) {
      float u = scaled(kernelTransform[e * 3u], gG[a * 3u]) + scaled(kernelTransform[e * 3u + 1u], gG[a * 3u + 1u]) +
                scaled(kernelTransform[e * 3u + 2u], gG[a * 3u + 2u]);
      result[((a * ALPHA + e) * C + c) * OC + oc] = u;
    }
  }
}
#elif WINOGRAD_MODE == WINOGRAD_MODE_INPUT
float inputAt(uint n, uint c, int ih, int iw) {
  if (ih < 0 || iw < 0 || ih >= int(H) || iw >= int(W)) return 0.0;
  return first[(((firstImage + n) * C + c) * H + uint(ih)) * W + uint(iw)];
}

void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i >= C * TILES) return;
  uint c = i / TILES, t = i % TILES, n = t / (TH * TW), th = (t / TW) % TH, tw = t % TW;
  int top = int(TILE * th) - PAD, left = int(TILE * tw) - PAD;
  float d[POSITIONS];
  for (uint y = 0u; y < ALPHA; ++y) {
    for (uint x = 0u; x < ALPHA; ++x) d[y * ALPHA + x] = inputAt(n, c, top + int(y), left + int(x));
  }
  float columns[POSITIONS];  // Bᵀ·d
  for (uint a = 0u; a < ALPHA; ++a) {
    for (uint x = 0u; x < ALPHA; ++x) {
      float sum = 0.0;
      for (uint y = 0u; y < ALPHA; ++y) sum += scaled(inputTransform[a * ALPHA + y], d[y * ALPHA + x]);
      columns[a * ALPHA + x] = sum;
    }
  }
  for (uint a = 0u; a < ALPHA; ++a) {
    for (uint e = 0u; e < ALPHA; ++e) {
      float v = 0.0;
      for (uint x = 0u; x < ALPHA; ++x) v += scaled(inputTransform[e * ALPHA + x], columns[a * ALPHA + x]);
      result[((a * ALPHA + e) * C + c) * TP + t] = v;
    }
  }
}
#else
void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i >= N * OC * TH * TW) return;
  uint tw = i % TW, th = (i / TW) % TH, oc = (i / (TW * TH)) % OC, n = i / (TW * TH * OC);
  uint t = (n * TH + th) * TW + tw;
  float m[POSITIONS];
  for (uint p = 0u; p < POSITIONS; ++p) m[p] = first[(p * OC + oc) * TP + t];
  float rows[TILE * ALPHA];  // Aᵀ·m
  for (uint y = 0u; y < TILE; ++y) {
    for (uint x = 0u; x < ALPHA; ++x) {
      float sum = 0.0;
      for (uint a = 0u; a < ALPHA; ++a) sum += scaled(outputTransform[y * ALPHA + a], m[a * ALPHA + x]);
      rows[y * ALPHA + x] = sum;
    }
  }
  float sums[TILE * TILE];  // Aᵀ·m·A
  for (uint y = 0u; y < TILE; ++y) {
    for (uint x = 0u; x < TILE; ++x) {
      float sum = 0.0;
      for (uint e = 0u; e < ALPHA; ++e) sum += scaled(outputTransform[x * ALPHA + e], rows[y * ALPHA + e]);
      sums[y * TILE + x] = sum;
    }
  }
#ifdef WINOGRAD_POOL
  // The activation never falls as its argument rises, so a window's largest sum gives its largest output.
  for (uint y = 0u; y < TILE / 2u; ++y) {
    for (uint x = 0u; x < TILE / 2u; ++x) {
      uint ph = th * (TILE / 2u) + y, pw = tw * (TILE / 2u) + x;
      if (ph >= OH / 2u || pw >= OW / 2u) continue;
      uint corner = 2u * y * TILE + 2u * x;
      float largest = maxNaN(maxNaN(sums[corner], sums[corner + 1u]), maxNaN(sums[corner + TILE], sums[corner + TILE + 1u]));
      result[(((firstImage + n) * OC + oc) * (OH / 2u) + ph) * (OW / 2u) + pw] = activate(largest + third[oc]);
    }
  }
#else
  for (uint y = 0u; y < TILE; ++y) {
    uint oh = TILE * th + y;
    for (uint x = 0u; x < TILE; ++x) {
      uint ow = TILE * tw + x;
      if (oh >= OH || ow >= OW) continue;
      uint at = (((firstImage + n) * OC + oc) * OH + oh) * OW + ow;
#ifdef WINOGRAD_RESIDUAL
      result[at] = finishOutput(sums[y * TILE + x] + third[oc] + residual[at]);
#else
      result[at] = finishOutput(sums[y * TILE + x] + third[oc]);
#endif
    }
  }
#endif
}
#endif
#endif
