// The geometry of GroupedConv.glsl's convolution and of its gradients (GroupedConvGradient.glsl), compiled in from the
// defines CONV_* (uint literals but the strides, dilations and paddings).
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
