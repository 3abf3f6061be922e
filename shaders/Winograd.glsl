// Winograd's F(2×2, 3×3) convolution (Lavin and Gray, 2015) for the 3×3 stride-1 convolutions of inference graphs,
// NCHW: each 2×2 output tile is Aᵀ[Σ_c (G g Gᵀ) ⊙ (Bᵀ d B)]A, g a 3×3 kernel and d the tile's 4×4 input window,
// so the 16 elementwise products summed over the input channels are 16 GEMMs on the Gemm.glsl core: 16 multiplies
// per 4 outputs where the direct form needs 36. The transforms' coefficients are 0, ±1 and ±½, so the rounding
// error stays within a few times that of the direct sum.
//   X [N, C, H, W], Wt [OC, C, 3, 3], b [OC], Y [N, OC, OH, OW], OH = H + 2·PAD − 2; the tiles cover Y in
//   TH = ⌈OH/2⌉ rows of TW = ⌈OW/2⌉, T = N·TH·TW of them, t = (n·TH + th)·TW + tw, stored TP = T rounded up to 4 apart
//   WINOGRAD_MODE 0 weights: U[p][c][oc] = (G g Gᵀ)[p] for g = Wt[oc][c], one invocation per (oc, c)
//   WINOGRAD_MODE 1 input:   V[p][c][t] = (Bᵀ d B)[p], one invocation per (c, t)
//   WINOGRAD_MODE 2 GEMMs:   M[p][oc][t] = Σ_c V[p][c][t]·U[p][c][oc], the position p along z: R = T, S = OC, depth C,
//                            both operands contiguous along the tile (GEMM_A_ALONG_ROWS, GEMM_B_ALONG_COLUMNS)
//   WINOGRAD_MODE 3 output:  Y = finishOutput(Aᵀ M A + b [+ residual]) per tile, one invocation per (n, oc, th, tw);
//                            WINOGRAD_POOL: Y [N, OC, OH/2, OW/2], each tile's largest output (a tile is one window
//                            of 2×2 max pooling with stride 2; the odd edges are dropped)
// bindings: mode 0: 1 Wt, 3 U; mode 1: 0 X, 3 V; mode 2: 0 V, 1 U, 3 M; mode 3: 0 M, 2 b, 3 Y, 4 residual
//           (WINOGRAD_RESIDUAL)
// Scratch memory bounds the images a run of the modes 1-3 takes: the op runs the batch in chunks of N images from
// image `firstImage` of X and Y, V and M holding one chunk.
// uniforms: 0 N (the images of this chunk), 1 firstImage (modes 1 and 3); 11 the GEMM depth C (mode 2: Gemm.glsl
// unrolls every loop, so its stage loop's trip count must stay a run-time value)
// defines: the convolution geometry of engine/ops/Conv.h (CONV_CHANNELS, CONV_HEIGHT, CONV_WIDTH, CONV_OUT_CHANNELS,
// CONV_PADDING; the kernel and stride ones are 3 and 1),
// WINOGRAD_MODE; mode 2: Gemm.glsl's configuration, GEMM_A_VEC4 and GEMM_B_VEC4 (OC a multiple of 4); mode 3:
// ACTIVATION, POINTWISE (Pointwise.glsl included), WINOGRAD_RESIDUAL, WINOGRAD_POOL

layout(std430, binding = 0) readonly buffer First { float first[]; };
layout(std430, binding = 1) readonly buffer Second { float second[]; };
layout(std430, binding = 2) readonly buffer Third { float third[]; };
layout(std430, binding = 3) writeonly buffer Result { float result[]; };
#ifdef WINOGRAD_RESIDUAL
layout(std430, binding = 4) readonly buffer Residual { float residual[]; };
#endif
layout(location = 0) uniform uint N;
#if WINOGRAD_MODE == 1 || WINOGRAD_MODE == 3
layout(location = 1) uniform uint firstImage;
#endif

#define C CONV_CHANNELS
#define H CONV_HEIGHT
#define W CONV_WIDTH
#define OC CONV_OUT_CHANNELS
#define PAD CONV_PADDING
#define OH (H + 2u * uint(PAD) - 2u)
#define OW (W + 2u * uint(PAD) - 2u)
#define TH ((OH + 1u) / 2u)
#define TW ((OW + 1u) / 2u)
#define TILES (N * TH * TW)
#define TP ((TILES + 3u) & ~3u)

#if WINOGRAD_MODE == 2
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

#if WINOGRAD_MODE == 0
// The rows of G·g (4×3) become the rows of (G·g)·Gᵀ (4×4) by the same map along the other axis.
vec4 kernelRow(vec3 g) { return vec4(g.x, 0.5 * (g.x + g.y + g.z), 0.5 * (g.x - g.y + g.z), g.z); }

void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i >= OC * C) return;
  uint oc = i / C, c = i % C, base = i * 9u;
  vec3 g0 = vec3(second[base], second[base + 1u], second[base + 2u]);
  vec3 g1 = vec3(second[base + 3u], second[base + 4u], second[base + 5u]);
  vec3 g2 = vec3(second[base + 6u], second[base + 7u], second[base + 8u]);
  vec4 rows[4] = vec4[4](kernelRow(g0), kernelRow(0.5 * (g0 + g1 + g2)), kernelRow(0.5 * (g0 - g1 + g2)), kernelRow(g2));
  for (uint p = 0u; p < 16u; ++p) result[(p * C + c) * OC + oc] = rows[p / 4u][p % 4u];
}
#elif WINOGRAD_MODE == 1
float inputAt(uint n, uint c, int ih, int iw) {
  if (ih < 0 || iw < 0 || ih >= int(H) || iw >= int(W)) return 0.0;
  return first[(((firstImage + n) * C + c) * H + uint(ih)) * W + uint(iw)];
}
// Bᵀ·v for a column (or row) v of the window.
vec4 inputColumn(vec4 v) { return vec4(v.x - v.z, v.y + v.z, v.z - v.y, v.y - v.w); }

void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i >= C * TILES) return;
  uint c = i / TILES, t = i % TILES, n = t / (TH * TW), th = (t / TW) % TH, tw = t % TW;
  int top = int(2u * th) - PAD, left = int(2u * tw) - PAD;
  vec4 d[4];
  for (int y = 0; y < 4; ++y) {
    d[y] = vec4(inputAt(n, c, top + y, left), inputAt(n, c, top + y, left + 1), inputAt(n, c, top + y, left + 2),
                inputAt(n, c, top + y, left + 3));
  }
  vec4 rows[4] = vec4[4](inputColumn(d[0] - d[2]), inputColumn(d[1] + d[2]), inputColumn(d[2] - d[1]), inputColumn(d[1] - d[3]));
  for (uint p = 0u; p < 16u; ++p) result[(p * C + c) * TP + t] = rows[p / 4u][p % 4u];
}
#else
// Aᵀ·v for a row of the tile's 4×4 products: the two outputs along it.
vec2 outputRow(vec4 v) { return vec2(v.x + v.y + v.z, v.y - v.z - v.w); }

void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i >= N * OC * TH * TW) return;
  uint tw = i % TW, th = (i / TW) % TH, oc = (i / (TW * TH)) % OC, n = i / (TW * TH * OC);
  uint t = (n * TH + th) * TW + tw;
  vec4 m[4];
  for (uint y = 0u; y < 4u; ++y) {
    for (uint x = 0u; x < 4u; ++x) m[y][x] = first[((4u * y + x) * OC + oc) * TP + t];
  }
  vec2 top = outputRow(m[0] + m[1] + m[2]), bottom = outputRow(m[1] - m[2] - m[3]);
#ifdef WINOGRAD_POOL
  // The activation never falls as its argument rises, so the tile's largest sum gives its largest output.
  if (th < OH / 2u && tw < OW / 2u) {
    result[(((firstImage + n) * OC + oc) * (OH / 2u) + th) * (OW / 2u) + tw] = activate(max(max(top.x, top.y), max(bottom.x, bottom.y)) + third[oc]);
  }
#else
  vec2 sums[2] = vec2[2](top, bottom);
  for (uint y = 0u; y < 2u; ++y) {
    uint oh = 2u * th + y;
    for (uint x = 0u; x < 2u; ++x) {
      uint ow = 2u * tw + x;
      if (oh >= OH || ow >= OW) continue;
      uint at = (((firstImage + n) * OC + oc) * OH + oh) * OW + ow;
#ifdef WINOGRAD_RESIDUAL
      result[at] = finishOutput(sums[y][x] + third[oc] + residual[at]);
#else
      result[at] = finishOutput(sums[y][x] + third[oc]);
#endif
    }
  }
#endif
}
#endif
#endif
