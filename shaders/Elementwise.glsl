// Elementwise operations over count floats, written or (accumulate) added to out.
//   ELEMENTWISE_OP 0 activation:          out = act(a)
//   ELEMENTWISE_OP 1 activation gradient: out = a ⊙ act'(b)   (a = dY, b = the forward output Y)
//   ELEMENTWISE_OP 2 add:                 out = a + b
//   ELEMENTWISE_OP 3 multiply:            out = a ⊙ b
//   ELEMENTWISE_OP 4 bias add:            out = a + b[i mod columns]   (b broadcast over rows)
//   ELEMENTWISE_OP 5 copy:                out = a
//   ELEMENTWISE_OP 6 scale:               out = a · scale
//   ELEMENTWISE_OP 7 scale, weigh, act:   out = act(a · scale ⊙ b)   (the three above fused)
// bindings: 0 a read, 1 b read (a again when unused), 2 out read-write
// uniforms: 0 count, 1 columns (bias add), 2 accumulate (0 overwrite, 1 add), 3 scale
// defines: ELEMENTWISE_OP, ACTIVATION (ops 0 and 1)
layout(local_size_x = LOCAL_SIZE_X) in;

layout(std430, binding = 0) readonly buffer First { float a[]; };
layout(std430, binding = 1) readonly buffer Second { float b[]; };
layout(std430, binding = 2) buffer Result { float result[]; };
layout(location = 0) uniform uint count;
layout(location = 1) uniform uint columns;
layout(location = 2) uniform uint accumulate;
layout(location = 3) uniform float scale;

void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i >= count) return;
#if ELEMENTWISE_OP == 0
  float value = activate(a[i]);
#elif ELEMENTWISE_OP == 1
  float value = a[i] * activationDerivative(b[i]);
#elif ELEMENTWISE_OP == 2
  float value = a[i] + b[i];
#elif ELEMENTWISE_OP == 3
  float value = a[i] * b[i];
#elif ELEMENTWISE_OP == 4
  float value = a[i] + b[i % columns];
#elif ELEMENTWISE_OP == 5
  float value = a[i];
#elif ELEMENTWISE_OP == 6
  float value = a[i] * scale;
#else
  float value = activate(a[i] * scale * b[i]);
#endif
  result[i] = accumulate != 0u ? result[i] + value : value;
}
