// 2-D max or average pooling over NCHW planes with any kernel, stride, dilation and padding (ONNX MaxPool and
// AveragePool; ceil_mode only changes OH and OW, which the engine works out). One invocation per output.
//   POOL_KIND 0 max (padding never wins), 1 average: the divisor counts the padding when count_include_pad
//   (window cells beyond the padded input, which ceil_mode adds, never count), else only the cells inside
// bindings: 0 x read, 1 y write
// uniforms: 0 planes (N·C), 1 H, 2 W, 3 OH, 4 OW, 5 KH, 6 KW, 7 stride h, 8 stride w, 9 dilation h,
// 10 dilation w, 11 pad top, 12 pad left, 13 pad bottom, 14 pad right, 15 count_include_pad
layout(local_size_x = LOCAL_SIZE_X) in;

layout(std430, binding = 0) readonly buffer Source { float x[]; };
layout(std430, binding = 1) writeonly buffer Result { float y[]; };
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

void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i >= planes * OH * OW) return;
  uint plane = i / (OH * OW), oh = (i % (OH * OW)) / OW, ow = i % OW;
  int top = int(oh) * strideH - padTop, left = int(ow) * strideW - padLeft;
  uint base = plane * uint(H * W);
#if POOL_KIND == 0
  float best = uintBitsToFloat(0xff800000u);  // -inf
  for (int kh = 0; kh < KH; ++kh) {
    int ih = top + kh * dilationH;
    if (ih < 0 || ih >= H) continue;
    for (int kw = 0; kw < KW; ++kw) {
      int iw = left + kw * dilationW;
      if (iw >= 0 && iw < W) best = max(best, x[base + uint(ih * W + iw)]);
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
