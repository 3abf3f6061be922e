// y[i] = pointwise(x[i]) over count floats (the function: Pointwise.glsl's POINTWISE), or with UNARY_GRADIENT the
// backward pass dx[i] = dy[i] · pointwise'(x[i]), written or added (the functions with pointwiseDerivative).
// bindings: 0 x read, 1 y write; gradient: 0 x read, 1 dx write (or add), 2 dy read
// uniforms: 0 count, 1 accumulate (gradient)
layout(local_size_x = LOCAL_SIZE_X) in;

layout(std430, binding = 0) readonly buffer Source { float x[]; };
#ifdef UNARY_GRADIENT
layout(std430, binding = 1) buffer Result { float y[]; };
layout(std430, binding = 2) readonly buffer OutputGradient { float dy[]; };
layout(location = 1) uniform uint accumulate;
#else
layout(std430, binding = 1) writeonly buffer Result { float y[]; };
#endif
layout(location = 0) uniform uint count;

void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i >= count) return;
#ifdef UNARY_GRADIENT
  y[i] = (accumulate != 0u ? y[i] : 0.0) + dy[i] * pointwiseDerivative(x[i]);
#else
  y[i] = pointwise(x[i]);
#endif
}
