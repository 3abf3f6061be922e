// y = pointwise(a ∘ b) with NumPy broadcasting: the output's coordinates, found from its strides, index each
// operand through its own strides (0 along a broadcast axis).
//   BINARY_OP (engine/numbers/BinaryKinds.h): ADD, SUBTRACT, MULTIPLY, DIVIDE, POWER, MAXIMUM, MINIMUM, PRELU (a, or
//   a·b below 0)
//   RANK: the output's rank (1 to 6), the axes the loop runs over
// bindings: 0 a read, 1 b read, 2 y write
// uniforms: 0 count; 1-6 the output's strides; 7-12 a's strides; 13-18 b's strides (elements; 0 where
// broadcast); POINTWISE and its constants from Pointwise.glsl
layout(local_size_x = LOCAL_SIZE_X) in;

layout(std430, binding = 0) readonly buffer First { float a[]; };
layout(std430, binding = 1) readonly buffer Second { float b[]; };
layout(std430, binding = 2) writeonly buffer Result { float y[]; };
layout(location = 0) uniform uint count;
layout(location = 1) uniform uint outStrides[6];
layout(location = 7) uniform uint aStrides[6];
layout(location = 13) uniform uint bStrides[6];

float combine(float left, float right) {
#if BINARY_OP == BINARY_OP_ADD
  return left + right;
#elif BINARY_OP == BINARY_OP_SUBTRACT
  return left - right;
#elif BINARY_OP == BINARY_OP_MULTIPLY
  return left * right;
#elif BINARY_OP == BINARY_OP_DIVIDE
  return left / right;
#elif BINARY_OP == BINARY_OP_POWER
  if (right == 2.0) return left * left;
  if (right == floor(right) && left < 0.0) return (mod(right, 2.0) == 0.0 ? 1.0 : -1.0) * pow(-left, right);
  return pow(left, right);
#elif BINARY_OP == BINARY_OP_MAXIMUM
  return maxNaN(left, right);
#elif BINARY_OP == BINARY_OP_MINIMUM
  return minNaN(left, right);
#elif BINARY_OP == BINARY_OP_PRELU
  return left >= 0.0 ? left : left * right;
#else
#error unknown BINARY_OP
#endif
}

void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i >= count) return;
  uint rest = i, ia = 0u, ib = 0u;
  for (int k = 0; k < RANK; ++k) {
    uint coordinate = rest / outStrides[k];
    rest -= coordinate * outStrides[k];
    ia += coordinate * aStrides[k];
    ib += coordinate * bStrides[k];
  }
  y[i] = pointwise(combine(a[ia], b[ib]));
}
