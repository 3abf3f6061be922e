// 2×2 max pooling with stride 2 over NCHW planes (odd edges dropped, as PyTorch's floor mode does).
//   POOL_MODE_FORWARD:  Y[p, oh, ow] = max of the window; argmax[...] = the input index of its first maximum
//                        (or first NaN, which the window's output then is, as in PyTorch)
//   POOL_MODE_BACKWARD: dX[i] = dY[o] where argmax[o] == i for the window o holding i, else 0 (or added)
// bindings: forward 0 X read, 1 Y write, 2 argmax write; backward 0 dY read, 2 argmax read, 3 dX read-write
// uniforms: 0 planes (N·C), 1 H, 2 W, 3 OH, 4 OW, 5 accumulate (backward)
layout(local_size_x = LOCAL_SIZE_X) in;

layout(std430, binding = 0) readonly buffer Source { float source[]; };
layout(std430, binding = 1) writeonly buffer Pooled { float pooled[]; };
layout(std430, binding = 2) buffer Argmax { uint argmax[]; };
layout(std430, binding = 3) buffer InputGradient { float dX[]; };
layout(location = 0) uniform uint planes;
layout(location = 1) uniform uint H;
layout(location = 2) uniform uint W;
layout(location = 3) uniform uint OH;
layout(location = 4) uniform uint OW;
layout(location = 5) uniform uint accumulate;

void main() {
  uint i = LINEAR_INVOCATION_INDEX;
#if POOL_MODE == POOL_MODE_FORWARD
  if (i >= planes * OH * OW) return;
  uint plane = i / (OH * OW), oh = (i % (OH * OW)) / OW, ow = i % OW;
  uint base = (plane * H + 2u * oh) * W + 2u * ow;
  uint best = base;
  float largest = source[base];
  for (uint k = 1u; k < 4u; ++k) {
    uint index = base + (k / 2u) * W + (k % 2u);
    if (beats(source[index], largest)) {
      largest = source[index];
      best = index;
    }
  }
  pooled[i] = largest;
  argmax[i] = best;
#else
  if (i >= planes * H * W) return;
  uint plane = i / (H * W), ih = (i % (H * W)) / W, iw = i % W;
  float value = 0.0;
  if (ih / 2u < OH && iw / 2u < OW) {
    uint o = (plane * OH + ih / 2u) * OW + iw / 2u;
    if (argmax[o] == i) value = source[o];
  }
  dX[i] = accumulate != 0u ? dX[i] + value : value;
#endif
}
