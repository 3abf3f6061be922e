// y = pointwise(a ∘ b) with NumPy broadcasting: the output's coordinates, found from its strides, index each
// operand through its own strides (0 along a broadcast axis). With SELECT, y = c ? a : b (ONNX's Where) instead.
//   BINARY_OP (engine/numbers/BinaryKinds.h): ADD, SUBTRACT, MULTIPLY, DIVIDE, POWER, MAXIMUM, MINIMUM, PRELU (a, or
//   a·b below 0), the comparisons EQUAL, LESS, LESS_OR_EQUAL, GREATER, GREATER_OR_EQUAL and the logical AND, OR, XOR
//   (exactly 0 or 1), MOD (the divisor's sign), FMOD (the dividend's)
//   SELECT: 1 for y = c ? a : b, c any nonzero value (truth); BINARY_OP is then unused
//   RANK: the output's rank (1 to 6), the axes the loop runs over
// bindings: 0 a read, 1 b read, 2 y write, 3 c read (SELECT)
// uniforms: 0 count; 1-6 the output's strides; 7-12 a's strides; 13-18 b's strides; 19-24 c's strides (SELECT)
// (elements; 0 where broadcast); POINTWISE and its constants from Pointwise.glsl
#ifndef SELECT
#define SELECT 0
#endif
layout(local_size_x = LOCAL_SIZE_X) in;

layout(std430, binding = 0) readonly buffer First { float a[]; };
layout(std430, binding = 1) readonly buffer Second { float b[]; };
layout(std430, binding = 2) writeonly buffer Result { float y[]; };
layout(location = 0) uniform uint count;
layout(location = 1) uniform uint outStrides[6];
layout(location = 7) uniform uint aStrides[6];
layout(location = 13) uniform uint bStrides[6];
#if SELECT
layout(std430, binding = 3) readonly buffer Condition { float c[]; };
layout(location = 19) uniform uint cStrides[6];
#endif

// A comparison is false where either side is NaN (IEEE, NumPy); checked by bits, as a compiler assuming finite math
// may rewrite !(a < b) as a >= b.
float compared(bool holds, float left, float right) { return holds && !isNaN(left) && !isNaN(right) ? 1.0 : 0.0; }

// C's fmod: the remainder with a's sign. Exact for the integers float32 holds (shape arithmetic): a / b may round
// across an integer, which one step of |b| corrects.
float remainderOf(float a, float b) {
  if (isInf(b) && !isInf(a)) return a;  // a − b·trunc(a/b) would be inf·0
  float r = a - b * trunc(a / b);
  if (abs(r) >= abs(b)) r -= sign(r) * abs(b);
  if (r != 0.0 && (r < 0.0) != (a < 0.0)) r += sign(a) * abs(b);
  return r;
}

#if !SELECT

float combine(float left, float right) {
#if BINARY_OP == BINARY_OP_ADD
  return left + right;
#elif BINARY_OP == BINARY_OP_SUBTRACT
  return left - right;
#elif BINARY_OP == BINARY_OP_MULTIPLY
  return left * right;
#elif BINARY_OP == BINARY_OP_DIVIDE
  return left / right;
#elif BINARY_OP == BINARY_OP_INTEGER_DIVIDE
  // trunc(a / b) may land one below an exact quotient (division is within 2.5 ulp); a − fmod(a, b) is an exact multiple
  // of b, whose quotient rounds to the integer it is.
  return round((left - remainderOf(left, right)) / right);
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
#elif BINARY_OP == BINARY_OP_EQUAL
  return compared(left == right, left, right);
#elif BINARY_OP == BINARY_OP_LESS
  return compared(left < right, left, right);
#elif BINARY_OP == BINARY_OP_LESS_OR_EQUAL
  return compared(left <= right, left, right);
#elif BINARY_OP == BINARY_OP_GREATER
  return compared(left > right, left, right);
#elif BINARY_OP == BINARY_OP_GREATER_OR_EQUAL
  return compared(left >= right, left, right);
#elif BINARY_OP == BINARY_OP_AND
  return truth(left) && truth(right) ? 1.0 : 0.0;
#elif BINARY_OP == BINARY_OP_OR
  return truth(left) || truth(right) ? 1.0 : 0.0;
#elif BINARY_OP == BINARY_OP_XOR
  return truth(left) != truth(right) ? 1.0 : 0.0;
#elif BINARY_OP == BINARY_OP_MOD
  float r = remainderOf(left, right);
  return r != 0.0 && (r < 0.0) != (right < 0.0) ? r + right : r;  // to the divisor's side, as Python's %
#elif BINARY_OP == BINARY_OP_FMOD
  return remainderOf(left, right);
#else
#error unknown BINARY_OP
#endif
}
#endif

void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i >= count) return;
  uint rest = i, ia = 0u, ib = 0u, ic = 0u;
  for (int k = 0; k < RANK; ++k) {
    uint coordinate = rest / outStrides[k];
    rest -= coordinate * outStrides[k];
    ia += coordinate * aStrides[k];
    ib += coordinate * bStrides[k];
#if SELECT
    ic += coordinate * cStrides[k];
#endif
  }
#if SELECT
  y[i] = pointwise(truth(c[ic]) ? a[ia] : b[ib]);  // only the chosen side is read: its NaN passes, the other's does not
#else
  y[i] = pointwise(combine(a[ia], b[ib]));
#endif
}
