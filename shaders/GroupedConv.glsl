// A direct 2-D convolution, one invocation per output: any stride, dilation, padding and groups (depthwise
// included), with the bias and a pointwise function fused (POINTWISE, Pointwise.glsl). Convolutions with
// stride 1, one group and even padding take Conv2D.glsl's implicit GEMM instead.
// bindings: 0 X [N, C, H, W], 1 W [OC, C/groups, KH, KW], 2 b [OC], 3 Y [N, OC, OH, OW]
// uniforms: 0 N
// defines (uint literals): CONV_CHANNELS, CONV_HEIGHT, CONV_WIDTH, CONV_OUT_CHANNELS, CONV_OUT_HEIGHT,
// CONV_OUT_WIDTH, CONV_KERNEL_HEIGHT, CONV_KERNEL_WIDTH, CONV_GROUPS; (int literals) CONV_STRIDE_H,
// CONV_STRIDE_W, CONV_DILATION_H, CONV_DILATION_W, CONV_PAD_TOP, CONV_PAD_LEFT
layout(local_size_x = LOCAL_SIZE_X) in;

layout(std430, binding = 0) readonly buffer Input { float x[]; };
layout(std430, binding = 1) readonly buffer Weight { float w[]; };
layout(std430, binding = 2) readonly buffer Bias { float b[]; };
layout(std430, binding = 3) writeonly buffer Result { float y[]; };
layout(location = 0) uniform uint N;

#define C CONV_CHANNELS
#define H CONV_HEIGHT
#define W CONV_WIDTH
#define OC CONV_OUT_CHANNELS
#define OH CONV_OUT_HEIGHT
#define OW CONV_OUT_WIDTH
#define KH CONV_KERNEL_HEIGHT
#define KW CONV_KERNEL_WIDTH
#define GROUP_IN (C / CONV_GROUPS)
#define GROUP_OUT (OC / CONV_GROUPS)

void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i >= N * OC * OH * OW) return;
  uint ow = i % OW, oh = (i / OW) % OH, oc = (i / (OW * OH)) % OC, n = i / (OW * OH * OC);
  uint firstChannel = (oc / GROUP_OUT) * GROUP_IN;
  int top = int(oh) * CONV_STRIDE_H - CONV_PAD_TOP, left = int(ow) * CONV_STRIDE_W - CONV_PAD_LEFT;
  float sum = b[oc];
  for (uint c = 0u; c < GROUP_IN; ++c) {
    uint plane = (n * C + firstChannel + c) * H * W, weights = (oc * GROUP_IN + c) * KH * KW;
    for (uint kh = 0u; kh < KH; ++kh) {
      int ih = top + int(kh) * CONV_DILATION_H;
      if (ih < 0 || ih >= int(H)) continue;
      for (uint kw = 0u; kw < KW; ++kw) {
        int iw = left + int(kw) * CONV_DILATION_W;
        if (iw >= 0 && iw < int(W)) sum = fma(x[plane + uint(ih) * W + uint(iw)], w[weights + kh * KW + kw], sum);
      }
    }
  }
  y[i] = pointwise(sum);
}
