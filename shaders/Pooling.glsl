// 2-D max or average pooling over NCHW planes with any kernel, stride, dilation and padding (ONNX MaxPool and
// AveragePool; ceil_mode only changes OH and OW, which the engine works out). One invocation per output.
//   POOL_KIND_MAX (padding never wins; a NaN in the window is the output, as in PyTorch), POOL_KIND_AVERAGE: the divisor counts the padding when count_include_pad
//   (window cells beyond the padded input, which ceil_mode adds, never count), else only the cells inside
//   POOL_GRADIENT 1: the backward pass instead, one invocation per input element: dx = Σ over the windows that hold
//   it of dy/divisor (average) or dy where it is the window's first maximum (max: the windows are searched again)
// bindings: 0 x read, 1 y write; gradient: 0 x read, 2 dy read, 3 dx write (or add)
// uniforms: 0 planes (N·C), 1 H, 2 W, 3 OH, 4 OW, 5 KH, 6 KW, 7 stride h, 8 stride w, 9 dilation h,
// 10 dilation w, 11 pad top, 12 pad left, 13 pad bottom, 14 pad right, 15 count_include_pad, 16 accumulate (gradient)
#ifndef POOL_GRADIENT
#define POOL_GRADIENT 0
#endif
layout(local_size_x = LOCAL_SIZE_X) in;

layout(std430, binding = 0) readonly buffer Source { float x[]; };
#if POOL_GRADIENT
layout(std430, binding = 2) readonly buffer OutputGradient { float dy[]; };
layout(std430, binding = 3) buffer InputGradient { float dx[]; };
layout(location = 16) uniform uint accumulate;
#else
layout(std430, binding = 1) writeonly buffer Result { float y[]; };
#endif
layout(location = 0) uniform uint planes;
layout(location = 1) uniform int H;
layout(location = 2) uniform int W;
layout(location = 3) uniform uint OH;
layout(location = 4) uniform uint OW;
layout(location = 5) uniform int KH;
layout(location = 6) uniform int KW;
layout(location = 7) uniform int strideH;
layout(location = 8) uniform int strideW;
layout(location = 9) uniform int dilationH;
layout(location = 10) uniform int dilationW;
layout(location = 11) uniform int padTop;
layout(location = 12) uniform int padLeft;
layout(location = 13) uniform int padBottom;
layout(location = 14) uniform int padRight;
layout(location = 15) uniform uint countPadding;

#if POOL_GRADIENT
// Window (oh, ow)'s divisor (average) or whether input (ih, iw) is its first maximum (max: 1.0 or 0.0), as a factor of dy.
float share(uint base, int oh, int ow, int ih, int iw) {
  int top = oh * strideH - padTop, left = ow * strideW - padLeft;
#if POOL_KIND == POOL_KIND_MAX
  float best = uintBitsToFloat(0xff800000u);
  int bestH = -1, bestW = -1;
  for (int kh = 0; kh < KH; ++kh) {
    int h = top + kh * dilationH;
    if (h < 0 || h >= H) continue;
    for (int kw = 0; kw < KW; ++kw) {
      int w = left + kw * dilationW;
      if (w < 0 || w >= W) continue;
      float value = x[base + uint(h * W + w)];
      if (beats(value, best) || bestH < 0) {
        best = value;
        bestH = h;
        bestW = w;
      }
    }
  }
  return bestH == ih && bestW == iw ? 1.0 : 0.0;
#else
  int cells;
  if (countPadding != 0u) {
    cells = (min(top + KH, H + padBottom) - top) * (min(left + KW, W + padRight) - left);
  } else {
    cells = (min(top + KH, H) - max(top, 0)) * (min(left + KW, W) - max(left, 0));
  }
  return 1.0 / float(max(cells, 1));
#endif
}

void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i >= planes * uint(H * W)) return;
  uint plane = i / uint(H * W);
  int ih = int(i % uint(H * W)) / W, iw = int(i % uint(H * W)) % W;
  uint base = plane * uint(H * W);
  float sum = 0.0;
  // The windows whose cell (kh, kw) is this input: oh·strideH − padTop + kh·dilation = ih with 0 ≤ oh < OH, so kh
  // runs over [(ih + padTop − (OH − 1)·strideH)/dilation, (ih + padTop)/dilation] only (one cell of a global pool).
  int dh = POOL_KIND == POOL_KIND_MAX ? dilationH : 1, dw = POOL_KIND == POOL_KIND_MAX ? dilationW : 1;
  int khFirst = max(0, (ih + padTop - (int(OH) - 1) * strideH + dh - 1) / dh), khLast = min(KH - 1, (ih + padTop) / dh);
  int kwFirst = max(0, (iw + padLeft - (int(OW) - 1) * strideW + dw - 1) / dw), kwLast = min(KW - 1, (iw + padLeft) / dw);
  for (int kh = khFirst; kh <= khLast; ++kh) {
    int rowFrom = ih + padTop - kh * dh;
    if (rowFrom < 0 || rowFrom % strideH != 0 || rowFrom / strideH >= int(OH)) continue;
    for (int kw = kwFirst; kw <= kwLast; ++kw) {
      int columnFrom = iw + padLeft - kw * dw;
      if (columnFrom < 0 || columnFrom % strideW != 0 || columnFrom / strideW >= int(OW)) continue;
      int oh = rowFrom / strideH, ow = columnFrom / strideW;
      sum += dy[(plane * OH + uint(oh)) * OW + uint(ow)] * share(base, oh, ow, ih, iw);
    }
  }
  dx[i] = (accumulate != 0u ? dx[i] : 0.0) + sum;
}
#else
void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i >= planes * OH * OW) return;
  uint plane = i / (OH * OW), oh = (i % (OH * OW)) / OW, ow = i % OW;
  int top = int(oh) * strideH - padTop, left = int(ow) * strideW - padLeft;
  uint base = plane * uint(H * W);
#if POOL_KIND == POOL_KIND_MAX
  float best = uintBitsToFloat(0xff800000u);  // -inf
  for (int kh = 0; kh < KH; ++kh) {
    int ih = top + kh * dilationH;
    if (ih < 0 || ih >= H) continue;
    for (int kw = 0; kw < KW; ++kw) {
      int iw = left + kw * dilationW;
      if (iw >= 0 && iw < W) best = maxNaN(best, x[base + uint(ih * W + iw)]);
    }
  }
  y[i] = best;
#else
  float sum = 0.0;
  int cells = 0;
  for (int kh = 0; kh < KH; ++kh) {
    int ih = top + kh;
    if (ih < 0 || ih >= H) continue;
    for (int kw = 0; kw < KW; ++kw) {
      int iw = left + kw;
      if (iw < 0 || iw >= W) continue;
      sum += x[base + uint(ih * W + iw)];
      ++cells;
    }
  }
  if (countPadding != 0u) {
    int rows = min(top + KH, H + padBottom) - top, columns = min(left + KW, W + padRight) - left;
    cells = rows * columns;
  }
  y[i] = sum / float(max(cells, 1));
#endif
}
#endif
