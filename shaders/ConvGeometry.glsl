// The geometry of a convolution (Conv2D.glsl, ConvWeightGradient.glsl), compiled in from convGeometryDefines: the layer's
// geometry is fixed for its lifetime, so the index arithmetic of its pixels divides by constants (a multiply and a
// shift) instead of by uniforms.
//   X [N, C, H, W], weights [OC, C, KH, KW], output [N, OC, OH, OW]; PAD_H top and bottom, PAD_W left and right
#define C CONV_CHANNELS
#define H CONV_HEIGHT
#define W CONV_WIDTH
#define OC CONV_OUT_CHANNELS
#define KH CONV_KERNEL_HEIGHT
#define KW CONV_KERNEL_WIDTH
#define PAD_H CONV_PADDING
#define PAD_W CONV_PADDING_WIDTH
#define STRIDE uint(CONV_STRIDE)
#define OH ((H + 2u * uint(PAD_H) - KH) / STRIDE + 1u)
#define OW ((W + 2u * uint(PAD_W) - KW) / STRIDE + 1u)
