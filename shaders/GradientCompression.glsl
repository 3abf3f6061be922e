// Gradients as bfloat16 for their sum over ranks, with error feedback (Seide et al., 2014; Karimireddy et al., 2019):
// what rounding loses from one step's gradient is added to the next step's before it is rounded, so that it is sent
// in a later step instead of lost. bfloat16 keeps float's exponent, so scaled gradients neither underflow nor overflow
// where float would not.
//   COMPRESSION_MODE_COMPRESS: v = g + e; words[i] = bf16(v[2i]) | bf16(v[2i + 1]) << 16; e = v − widened(bf16(v))
//   COMPRESSION_MODE_EXPAND: g[2i], g[2i + 1] = the two halves of words[i], widened
// bf16 is float's upper 16 bits, rounded to nearest with ties to even (engine/base/Bfloat16.h does the same on the
// host); NaN stays NaN.
// bindings: 0 g; 1 e (COMPRESS); 2 words (the packed pairs). uniform 0: the count of floats (the last pair's upper half is 0 when odd)

layout(local_size_x = GLNET_GROUP_SIZE) in;
layout(std430, binding = 0) buffer Gradients { float gradients[]; };
#if COMPRESSION_MODE == COMPRESSION_MODE_COMPRESS
layout(std430, binding = 1) buffer Residuals { float residuals[]; };
layout(std430, binding = 2) writeonly buffer Packed { uint words[]; };
#else
layout(std430, binding = 2) readonly buffer Packed { uint words[]; };
#endif
layout(location = 0) uniform uint floats;

uint toBfloat16(float x) {
  if (isnan(x)) return 0x7FC0u;  // the rounding below could carry a NaN's payload into infinity
  uint bits = floatBitsToUint(x);
  return (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
}
float fromBfloat16(uint upper) { return uintBitsToFloat(upper << 16); }

void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  uint first = 2u * i;
  if (first >= floats) return;
#if COMPRESSION_MODE == COMPRESSION_MODE_COMPRESS
  uint halves = 0u;
  for (uint k = 0u; k < 2u && first + k < floats; ++k) {
    float value = gradients[first + k] + residuals[first + k];
    uint rounded = toBfloat16(value);
    residuals[first + k] = value - fromBfloat16(rounded);
    halves |= rounded << (16u * k);
  }
  words[i] = halves;
#else
  uint halves = words[i];
  gradients[first] = fromBfloat16(halves & 0xFFFFu);
  if (first + 1u < floats) gradients[first + 1u] = fromBfloat16(halves >> 16);
#endif
}
