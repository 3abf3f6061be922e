// Elementwise operations over count floats, written or (accumulate) added to out.
//   ELEMENTWISE_OP_ACTIVATION:              out = act(a)
//   ELEMENTWISE_OP_ACTIVATION_GRADIENT:     out = a ⊙ act'(b)   (a = dY, b = the forward output Y)
//   ELEMENTWISE_OP_ADD:                     out = act(a + b)
//   ELEMENTWISE_OP_MULTIPLY:                out = a ⊙ b
//   ELEMENTWISE_OP_BIAS_ADD:                out = a + b[i mod columns]   (b broadcast over rows)
//   ELEMENTWISE_OP_COPY:                    out = a
//   ELEMENTWISE_OP_SCALE:                   out = a · scale
//   ELEMENTWISE_OP_SCALE_MULTIPLY_ACTIVATE: out = act(a · scale ⊙ b)   (the three above fused)
// bindings: 0 a read, 1 b read (a again when unused), 2 out read-write, 3 a second out (TWO_RESULTS) read-write
// uniforms: 0 count, 1 columns (bias add), 2 accumulate (bit 0: out added to rather than written, bit 1: the second
//   out), 3 scale
// defines: ELEMENTWISE_OP, ACTIVATION (the two activation kinds, ADD and SCALE_MULTIPLY_ACTIVATE), TWO_RESULTS (the
//   value stored in two places in one pass: an add's gradient to both its inputs)
layout(local_size_x = LOCAL_SIZE_X) in;

layout(std430, binding = 0) readonly buffer First { float a[]; };
layout(std430, binding = 1) readonly buffer Second { float b[]; };
layout(std430, binding = 2) buffer Result { float result[]; };
#ifdef TWO_RESULTS
layout(std430, binding = 3) buffer SecondResult { float second[]; };
#endif
layout(location = 0) uniform uint count;
layout(location = 1) uniform uint columns;
layout(location = 2) uniform uint accumulate;
layout(location = 3) uniform float scale;

void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i >= count) return;
#if ELEMENTWISE_OP == ELEMENTWISE_OP_ACTIVATION
  float value = activate(a[i]);
#elif ELEMENTWISE_OP == ELEMENTWISE_OP_ACTIVATION_GRADIENT
  float value = a[i] * activationDerivative(b[i]);
#elif ELEMENTWISE_OP == ELEMENTWISE_OP_ADD
  float value = activate(a[i] + b[i]);
#elif ELEMENTWISE_OP == ELEMENTWISE_OP_MULTIPLY
  float value = a[i] * b[i];
#elif ELEMENTWISE_OP == ELEMENTWISE_OP_BIAS_ADD
  float value = a[i] + b[i % columns];
#elif ELEMENTWISE_OP == ELEMENTWISE_OP_COPY
  float value = a[i];
#elif ELEMENTWISE_OP == ELEMENTWISE_OP_SCALE
  float value = a[i] * scale;
#elif ELEMENTWISE_OP == ELEMENTWISE_OP_SCALE_MULTIPLY_ACTIVATE
  float value = activate(a[i] * scale * b[i]);
#else
#error unknown ELEMENTWISE_OP
#endif
  result[i] = (accumulate & 1u) != 0u ? result[i] + value : value;
#ifdef TWO_RESULTS
  second[i] = (accumulate & 2u) != 0u ? second[i] + value : value;
#endif
}
