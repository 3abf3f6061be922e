// The gated unit of Llama's MLP: y[r, i] = silu(g[r, i])·u[r, i] where each row of x holds the gate projection's I
// values and then the up projection's (one fused projection).
// bindings: 0 x [rows, 2·I] read, 1 y [rows, I] write
// uniforms: 0 count (rows·I), 1 I
layout(local_size_x = LOCAL_SIZE_X) in;

layout(std430, binding = 0) readonly buffer Input { float x[]; };
layout(std430, binding = 1) writeonly buffer Output { float y[]; };
layout(location = 0) uniform uint count;
layout(location = 1) uniform uint I;

void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i >= count) return;
  uint row = i / I, k = i % I;
  float gate = x[row * 2u * I + k];
  // silu(g) = g/(1 + exp(−g)): a large negative gate overflows exp to inf and gives −0.
  y[i] = gate / (1.0 + exp(-gate)) * x[row * 2u * I + I + k];
}
