// A convolution's weight gradient, with its bias gradient, read straight from the pixels of X and dZ:
//   dW[oc, c, kh, kw] = Σ_{n, oh, ow} dZ[n, oc, oh, ow] · X[n, c, oh·STRIDE + kh − PAD_H, ow·STRIDE + kw − PAD_W] (zero outside X)
//   db[oc] = Σ_{n, oh, ow} dZ[n, oc, oh, ow]
// Why not the GEMM core: there the implicit im2col operand runs along the sum (N·OH·OW) and every element of it is
// gathered with its own index arithmetic and bounds test; 3x3 weight gradients ran at about 5 TFLOP/s on the H100
// whatever their channels. Here a group stages a band of output pixels (BAND_ROWS × BAND_COLUMNS of one image): dZ of
// its output channels and the window of X under the band for its input channels, each loaded once in plain coalesced
// reads. An invocation owns 4 output channels × 1 input channel × the KH·KW kernel offsets and slides a KH × KW window
// of X along each row of the band, STRIDE columns a pixel: per pixel one vec4 of dZ and KH values of X (KH·STRIDE
// at a stride) feed 4·KH·KW multiply-adds (8 output
// channels an invocation ran slower on the H100: bench/results/2026-12-06-conv-dw-from-pixels-nvidia-h100/).
// Group (x, y, z): output channels from x·OC_TILE, input channels from y·C_TILE, bands [z·chunk, (z + 1)·chunk) of the
// N·bands of the batch. It writes slice z of the partial sums, [OC·C·KH·KW] or with WITH_BIAS [OC·C·KH·KW | OC] (db's after dW's), which
// SplitSum.glsl adds (with TAIL for db).
// bindings: 0 dZ [N, OC, OH, OW], 1 X [N, C, H, W], 2 the partial sums; uniforms: 0 N, 15 the bands per slice
// defines: the CONV_* geometry of ConvGeometry.glsl; int literals, so that #if can check them: OC_TILE (a
// multiple of 4), C_TILE, BAND_ROWS, BAND_COLUMNS and INVOCATIONS = OC_TILE / 4 · C_TILE (local_size_x takes a
// literal); WITH_BIAS.
// NVIDIA's compiler keeps small register arrays in local memory unless told to unroll the loops over them (see
// Gemm.glsl); the loops over pixels have run-time bounds, so they stay loops.
#pragma optionNV(unroll all)

layout(local_size_x = INVOCATIONS) in;

layout(std430, binding = 0) readonly buffer OutputGradient { float dZ[]; };
layout(std430, binding = 1) readonly buffer Input { float X[]; };
layout(std430, binding = 2) writeonly buffer Partials { float partials[]; };
layout(location = 0) uniform uint N;
layout(location = 15) uniform uint bandsPerSlice;

// C, H, W, OC, KH, KW, PAD_H, PAD_W, STRIDE, OH and OW: ConvGeometry.glsl.
#define BANDS_DOWN ((OH + uint(BAND_ROWS) - 1u) / uint(BAND_ROWS))
#define BANDS_ACROSS ((OW + uint(BAND_COLUMNS) - 1u) / uint(BAND_COLUMNS))
#define PATCH_ROWS ((uint(BAND_ROWS) - 1u) * STRIDE + KH)
#define PATCH_COLUMNS ((uint(BAND_COLUMNS) - 1u) * STRIDE + KW)
// The window's columns that the next pixel still reads, moved along rather than loaded again.
#define KEPT_COLUMNS (KW > STRIDE ? KW - STRIDE : 0u)
#define PATCH (PATCH_ROWS * PATCH_COLUMNS)
#define BAND uint(BAND_ROWS * BAND_COLUMNS)
#define OC_RUNS uint(OC_TILE / 4)
// dZ's runs of 4 output channels per pixel, padded by one run so that the 8 invocations of a 128-bit shared store
// (consecutive pixels) fall on distinct banks.
#define RUNS_PER_PIXEL (OC_RUNS + 1u)
#ifdef WITH_BIAS
#define SLICE (OC * C * KH * KW + OC)
#else
#define SLICE (OC * C * KH * KW)
#endif
#if INVOCATIONS != OC_TILE / 4 * C_TILE
#error INVOCATIONS must be OC_TILE / 4 * C_TILE
#endif

shared float stagedX[uint(C_TILE) * PATCH];
shared vec4 stagedDZ[BAND * RUNS_PER_PIXEL];

// The band's X window (zero outside X and past the channels) and dZ (zero past the output channels and the planes).
void stageBand(uint n, uint top, uint left, uint firstOutChannel, uint firstChannel) {
  for (uint e = gl_LocalInvocationIndex; e < uint(C_TILE) * PATCH; e += uint(INVOCATIONS)) {
    uint c = firstChannel + e / PATCH, p = e % PATCH;
    int ih = int(top * STRIDE + p / PATCH_COLUMNS) - PAD_H, iw = int(left * STRIDE + p % PATCH_COLUMNS) - PAD_W;
    stagedX[e] = c < C && uint(ih) < H && uint(iw) < W ? X[((n * C + c) * H + uint(ih)) * W + uint(iw)] : 0.0;
  }
  for (uint e = gl_LocalInvocationIndex; e < OC_RUNS * BAND; e += uint(INVOCATIONS)) {
    uint run = e / BAND, p = e % BAND, oh = top + p / uint(BAND_COLUMNS), ow = left + p % uint(BAND_COLUMNS);
    vec4 values = vec4(0.0);
    if (oh < OH && ow < OW) {
      for (uint i = 0u; i < 4u; ++i) {
        uint oc = firstOutChannel + run * 4u + i;
        if (oc < OC) values[i] = dZ[((n * OC + oc) * OH + oh) * OW + ow];
      }
    }
    stagedDZ[p * RUNS_PER_PIXEL + run] = values;
  }
}

void main() {
  uint run = gl_LocalInvocationIndex % OC_RUNS, channel = gl_LocalInvocationIndex / OC_RUNS;
  uint firstOutChannel = gl_WorkGroupID.x * uint(OC_TILE), firstChannel = gl_WorkGroupID.y * uint(C_TILE);
  // sums[i][kh·KW + kw]: output channel 4·run + i of the tile.
  float sums[4][KH * KW];
  for (uint i = 0u; i < 4u; ++i)
    for (uint k = 0u; k < KH * KW; ++k) sums[i][k] = 0.0;
#ifdef WITH_BIAS
  vec4 biasSums = vec4(0.0);
#endif
  uint bands = N * BANDS_DOWN * BANDS_ACROSS, first = gl_WorkGroupID.z * bandsPerSlice;
  for (uint band = first; band < min(bands, first + bandsPerSlice); ++band) {
    uint n = band / (BANDS_DOWN * BANDS_ACROSS), inImage = band % (BANDS_DOWN * BANDS_ACROSS);
    uint top = inImage / BANDS_ACROSS * uint(BAND_ROWS), left = inImage % BANDS_ACROSS * uint(BAND_COLUMNS);
    stageBand(n, top, left, firstOutChannel, firstChannel);
    barrier();
    // Only the band's pixels inside the planes: a pixel past them would multiply X values no real pixel reads (a
    // NaN there would reach dW).
    uint rows = min(uint(BAND_ROWS), OH - top), columns = min(uint(BAND_COLUMNS), OW - left);
    for (uint row = 0u; row < rows; ++row) {
      uint windowTop = channel * PATCH + row * STRIDE * PATCH_COLUMNS;
      // Every loop over the window written `kw < KEPT_COLUMNS`: NVIDIA's compiler left `kw + 1u < KW` rolled, the window in
      // local memory, and the pass slower than the GEMM core's (bench/results/2026-12-06-conv-dw-from-pixels-nvidia-h100/).
      float window[KH][KW];
      for (uint kh = 0u; kh < KH; ++kh)
        for (uint kw = 0u; kw < KEPT_COLUMNS; ++kw) window[kh][kw + STRIDE] = stagedX[windowTop + kh * PATCH_COLUMNS + kw];
      for (uint column = 0u; column < columns; ++column) {
        for (uint kh = 0u; kh < KH; ++kh) {
          for (uint kw = 0u; kw < KEPT_COLUMNS; ++kw) window[kh][kw] = window[kh][kw + STRIDE];
          for (uint kw = KEPT_COLUMNS; kw < KW; ++kw) window[kh][kw] = stagedX[windowTop + kh * PATCH_COLUMNS + column * STRIDE + kw];
        }
        vec4 gradient = stagedDZ[(row * uint(BAND_COLUMNS) + column) * RUNS_PER_PIXEL + run];
#ifdef WITH_BIAS
        biasSums += gradient;
#endif
        for (uint i = 0u; i < 4u; ++i)
          for (uint kh = 0u; kh < KH; ++kh)
            for (uint kw = 0u; kw < KW; ++kw) sums[i][kh * KW + kw] = fma(gradient[i], window[kh][kw], sums[i][kh * KW + kw]);
      }
    }
    barrier();
  }
  uint slice = gl_WorkGroupID.z * SLICE;
  uint c = firstChannel + channel;
  for (uint i = 0u; i < 4u; ++i) {
    uint oc = firstOutChannel + run * 4u + i;
    if (oc >= OC) continue;
    if (c < C)
      for (uint k = 0u; k < KH * KW; ++k) partials[slice + (oc * C + c) * KH * KW + k] = sums[i][k];
#ifdef WITH_BIAS
    if (c == 0u) partials[slice + OC * C * KH * KW + oc] = biasSums[i];
#endif
  }
}
