// The gradients of GroupedConv.glsl's convolution (any stride, dilation, padding and groups; depthwise included) from
// dZ, the gradient of its output (it fuses no function when trained):
//   GRADIENT_MODE_INPUT_GRADIENT (dX), one invocation per input element: Σ over its group's output channels and the taps whose window
//                   holds it of dZ · W
//   GRADIENT_MODE_WEIGHT_GRADIENT (dW), one work group per weight (oc, ci, kh, kw): Σ over the batch and output pixels of dZ · X
//   GRADIENT_MODE_BIAS_GRADIENT (db), one work group per output channel: Σ dZ
// bindings: 0 X [N, C, H, W], 1 W [OC, C/groups, KH, KW], 2 dZ [N, OC, OH, OW], 3 the gradient written (or added)
// uniforms: 0 N, 1 accumulate
// defines: GroupedConv.glsl's geometry (CONV_*, named by GroupedConvGeometry.glsl)
#if GRADIENT_MODE == GRADIENT_MODE_INPUT_GRADIENT
layout(local_size_x = LOCAL_SIZE_X) in;
#else
layout(local_size_x = GLNET_GROUP_SIZE) in;
#endif

layout(std430, binding = 0) readonly buffer Input { float x[]; };
layout(std430, binding = 1) readonly buffer Weight { float w[]; };
layout(std430, binding = 2) readonly buffer OutputGradient { float dz[]; };
layout(std430, binding = 3) buffer Gradient { float result[]; };
layout(location = 0) uniform uint N;
layout(location = 1) uniform uint accumulate;

void store(uint index, float value) { result[index] = (accumulate != 0u ? result[index] : 0.0) + value; }

#if GRADIENT_MODE == GRADIENT_MODE_INPUT_GRADIENT
void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i >= N * C * H * W) return;
  uint n = i / (C * H * W), c = (i / (H * W)) % C;
  int ih = int((i / W) % H), iw = int(i % W);
  uint group = c / GROUP_IN, ci = c % GROUP_IN;
  float sum = 0.0;
  for (uint kh = 0u; kh < KH; ++kh) {
    int rowFrom = ih + CONV_PAD_TOP - int(kh) * CONV_DILATION_H;
    if (rowFrom < 0 || rowFrom % CONV_STRIDE_H != 0 || uint(rowFrom / CONV_STRIDE_H) >= OH) continue;
    uint oh = uint(rowFrom / CONV_STRIDE_H);
    for (uint kw = 0u; kw < KW; ++kw) {
      int columnFrom = iw + CONV_PAD_LEFT - int(kw) * CONV_DILATION_W;
      if (columnFrom < 0 || columnFrom % CONV_STRIDE_W != 0 || uint(columnFrom / CONV_STRIDE_W) >= OW) continue;
      uint ow = uint(columnFrom / CONV_STRIDE_W);
      for (uint o = 0u; o < GROUP_OUT; ++o) {
        uint oc = group * GROUP_OUT + o;
        sum += dz[((n * OC + oc) * OH + oh) * OW + ow] * w[((oc * GROUP_IN + ci) * KH + kh) * KW + kw];
      }
    }
  }
  store(i, sum);
}
#else
shared float partial[GLNET_GROUP_SIZE];

void main() {
  uint local = gl_LocalInvocationID.x;
#if GRADIENT_MODE == GRADIENT_MODE_WEIGHT_GRADIENT
  uint weight = gl_WorkGroupID.x;
  uint oc = weight / (GROUP_IN * KH * KW), ci = (weight / (KH * KW)) % GROUP_IN;
  int kh = int((weight / KW) % KH), kw = int(weight % KW);
  uint c = oc / GROUP_OUT * GROUP_IN + ci;
#else
  uint oc = gl_WorkGroupID.x;
#endif
  float sum = 0.0;
  for (uint k = local; k < N * OH * OW; k += uint(GLNET_GROUP_SIZE)) {
    uint n = k / (OH * OW), oh = (k / OW) % OH, ow = k % OW;
    float gradient = dz[((n * OC + oc) * OH + oh) * OW + ow];
#if GRADIENT_MODE == GRADIENT_MODE_WEIGHT_GRADIENT
    int ih = int(oh) * CONV_STRIDE_H - CONV_PAD_TOP + kh * CONV_DILATION_H;
    int iw = int(ow) * CONV_STRIDE_W - CONV_PAD_LEFT + kw * CONV_DILATION_W;
    if (ih >= 0 && iw >= 0 && ih < int(H) && iw < int(W)) sum += gradient * x[((n * C + c) * H + uint(ih)) * W + uint(iw)];
#else
    sum += gradient;
#endif
  }
  partial[local] = sum;
  memoryBarrierShared();
  barrier();
  for (uint stride = uint(GLNET_GROUP_SIZE / 2); stride > 0u; stride >>= 1) {
    if (local < stride) partial[local] += partial[local + stride];
    memoryBarrierShared();
    barrier();
  }
  if (local == 0u) store(gl_WorkGroupID.x, partial[0]);
}
#endif
