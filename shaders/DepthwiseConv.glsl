// A depthwise 2-D convolution (groups = C = OC): one work group per tile of TILE_HEIGHT × TILE_WIDTH outputs of one
// plane (n, c). The group first copies the tile's input window (zeros outside the image) into shared memory with
// reads along rows, then each invocation sums its KH × KW products from there, adds the bias and applies the
// pointwise function (POINTWISE, Pointwise.glsl). Every input element is read from memory once per tile instead of
// KH·KW times through the cache (GroupedConv.glsl's one invocation per output).
// bindings: 0 X [N, C, H, W], 1 W [C, 1, KH, KW], 2 b [C], 3 Y [N, C, OH, OW]
// uniforms: 0 N
// defines (uint literals): CONV_CHANNELS, CONV_HEIGHT, CONV_WIDTH, CONV_OUT_HEIGHT, CONV_OUT_WIDTH,
// CONV_KERNEL_HEIGHT, CONV_KERNEL_WIDTH; (int literals) TILE_HEIGHT, TILE_WIDTH, TILE_INVOCATIONS (their product: GL 4.3
// takes a literal for the group size), CONV_STRIDE_H, CONV_STRIDE_W,
// CONV_DILATION_H, CONV_DILATION_W, CONV_PAD_TOP, CONV_PAD_LEFT. The groups form a 1-D grid (the plan may fold it
// into x and y): tiles of plane 0 first. The op uses it for stride 1 (see GroupedConvOp::depthwiseTile).
layout(local_size_x = TILE_INVOCATIONS) in;

layout(std430, binding = 0) readonly buffer Input { float x[]; };
layout(std430, binding = 1) readonly buffer Weight { float w[]; };
layout(std430, binding = 2) readonly buffer Bias { float b[]; };
layout(std430, binding = 3) writeonly buffer Result { float y[]; };
layout(location = 0) uniform uint N;

#define C CONV_CHANNELS
#define H CONV_HEIGHT
#define W CONV_WIDTH
#define OH CONV_OUT_HEIGHT
#define OW CONV_OUT_WIDTH
#define KH CONV_KERNEL_HEIGHT
#define KW CONV_KERNEL_WIDTH
#define TILES_ACROSS ((OW + uint(TILE_WIDTH) - 1u) / uint(TILE_WIDTH))
#define TILES_DOWN ((OH + uint(TILE_HEIGHT) - 1u) / uint(TILE_HEIGHT))
#define WINDOW_HEIGHT ((TILE_HEIGHT - 1) * CONV_STRIDE_H + (int(KH) - 1) * CONV_DILATION_H + 1)
#define WINDOW_WIDTH ((TILE_WIDTH - 1) * CONV_STRIDE_W + (int(KW) - 1) * CONV_DILATION_W + 1)

shared float window[WINDOW_HEIGHT * WINDOW_WIDTH];

void main() {
  uint group = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  // Whole groups leave together: the barrier below needs every invocation of the group.
  if (group >= N * C * TILES_ACROSS * TILES_DOWN) return;
  uint plane = group / (TILES_ACROSS * TILES_DOWN), tile = group % (TILES_ACROSS * TILES_DOWN);
  uint channel = plane % C, local = gl_LocalInvocationID.x;
  int firstRow = int((tile / TILES_ACROSS) * uint(TILE_HEIGHT)), firstColumn = int((tile % TILES_ACROSS) * uint(TILE_WIDTH));
  int top = firstRow * CONV_STRIDE_H - CONV_PAD_TOP, left = firstColumn * CONV_STRIDE_W - CONV_PAD_LEFT;
  uint source = plane * H * W;
  for (uint k = local; k < uint(WINDOW_HEIGHT * WINDOW_WIDTH); k += uint(TILE_INVOCATIONS)) {
    int ih = top + int(k / uint(WINDOW_WIDTH)), iw = left + int(k % uint(WINDOW_WIDTH));
    bool inside = ih >= 0 && ih < int(H) && iw >= 0 && iw < int(W);
    window[k] = inside ? x[source + uint(ih) * W + uint(iw)] : 0.0;
  }
  memoryBarrierShared();
  barrier();
  int row = int(local) / TILE_WIDTH, column = int(local) % TILE_WIDTH;
  uint oh = uint(firstRow + row), ow = uint(firstColumn + column);
  if (oh >= OH || ow >= OW) return;
  float sum = b[channel];
  uint weights = channel * KH * KW;
  for (int kh = 0; kh < int(KH); ++kh) {
    int at = (row * CONV_STRIDE_H + kh * CONV_DILATION_H) * WINDOW_WIDTH + column * CONV_STRIDE_W;
    for (int kw = 0; kw < int(KW); ++kw) sum = fma(window[at + kw * CONV_DILATION_W], w[weights + uint(kh) * KW + uint(kw)], sum);
  }
  y[plane * OH * OW + oh * OW + ow] = pointwise(sum);
}
