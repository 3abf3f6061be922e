// Included by every glnet shader after the injected #defines (see engine/gl/Program.cpp).

// GLNET_GROUP_SIZE (injected by the engine) is 256, or the largest power of two the device allows below it
// (OpenGL ES 3.1 guarantees only 128 invocations per group).
// ESSL 3.10 has no fma (3.20 added it); a multiply-add is what the shaders mean by it.
#ifdef GLNET_ES
#define fma(a, b, c) ((a) * (b) + (c))
#endif

#ifndef LOCAL_SIZE_X
#define LOCAL_SIZE_X GLNET_GROUP_SIZE
#endif

// The index of this invocation in a 1-D problem dispatched as a 2-D grid of groups, which lets a problem
// exceed GL_MAX_COMPUTE_WORK_GROUP_COUNT (65535 on many devices) along x. A macro, because
// gl_WorkGroupSize exists only after the shader's own layout(local_size_x = ...) declaration.
#define LINEAR_INVOCATION_INDEX (gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x)

// Byte `index` of uint8 data packed four to a uint (little-endian) in the array `words`. A macro, because a
// buffer's array cannot be passed to a function.
#define PACKED_BYTE(words, index) (((words)[(index) >> 2u] >> (8u * ((index) & 3u))) & 0xffu)

// NaN in gives NaN out, as in PyTorch: GLSL's max, min and clamp may return the other operand of a NaN. isNaN reads the
// bits, since a compiler that assumes finite math (NVIDIA's) may fold isnan(x) and x != x to false.
bool isNaN(float x) { return (floatBitsToUint(x) & 0x7fffffffu) > 0x7f800000u; }
bool isInf(float x) { return (floatBitsToUint(x) & 0x7fffffffu) == 0x7f800000u; }
// A boolean read as ONNX's ops read one (held as a float): any nonzero value, NaN included, is true.
bool truth(float x) { return x != 0.0 || isNaN(x); }
// Whether `value` replaces `best` in a search for the first maximum: a larger number, or the first NaN (max pooling
// and its argmax, so that a backward pass searching again picks the forward pass's element).
bool beats(float value, float best) { return !isNaN(best) && (value > best || isNaN(value)); }
float maxNaN(float a, float b) { return beats(b, a) ? b : a; }
float minNaN(float a, float b) { return -maxNaN(-a, -b); }
float clampNaN(float x, float low, float high) { return isNaN(x) ? x : clamp(x, low, high); }

// Activations, chosen by the ACTIVATION define of the shaders that fuse one (ACTIVATION_RELU, ...: the list
// engine/numbers/Activation.h, whose defines every program's prologue holds).

#ifdef ACTIVATION
float activate(float x) {
#if ACTIVATION == ACTIVATION_RELU
  return maxNaN(x, 0.0);
#elif ACTIVATION == ACTIVATION_TANH
  // Some drivers compute tanh as (e^2x - 1)/(e^2x + 1), which is inf/inf = NaN for large x; tanh(±15)
  // already rounds to ±1 in fp32.
  return isNaN(x) ? x : tanh(clamp(x, -15.0, 15.0));  // llvmpipe's tanh(NaN) is a number
#elif ACTIVATION == ACTIVATION_SIGMOID
  return 1.0 / (1.0 + exp(-x));
#else
  return x;
#endif
}

// The derivative of the activation expressed through its output y = activate(x), which the forward pass
// kept; a ReLU kink (y = 0) counts as 0, as in PyTorch.
float activationDerivative(float y) {
#if ACTIVATION == ACTIVATION_RELU
  return y > 0.0 ? 1.0 : 0.0;
#elif ACTIVATION == ACTIVATION_TANH
  return 1.0 - y * y;
#elif ACTIVATION == ACTIVATION_SIGMOID
  return y * (1.0 - y);
#else
  return 1.0;
#endif
}

// What a kernel with a fused activation stores; with POINTWISE (an imported model's function after a layer, its
// activation then none; Pointwise.glsl included) that function of it.
#ifdef POINTWISE
#define finishOutput(x) pointwise(activate(x))
#else
#define finishOutput(x) activate(x)
#endif
#endif
