// Joins the key splits of Attention.glsl's SPLIT_KEYS pass: for each output element, the splits' unnormalized outputs
// o_s and row statistics (maximum m_s, sum l_s) combined as O = Σ o_s·exp(m_s − M) / Σ l_s·exp(m_s − M) with M the
// largest m_s (NaN if any is: maxNaN). Every m_s −inf (no key seen, or only −inf): the weights are 0 (exp(−inf − 0)),
// the output Σ 0·o_s (0, or NaN from a NaN in V), as the single pass gives.
// One invocation per output element (batch, head, query, feature).
// bindings: 0 the workspace read (partial [splits, B, H, Sq, Dv], then stats [splits, B, H, Sq, 2]), 1 O write
// uniforms: 0 count (B·H·Sq·Dv), 1 splits, 2 H, 3 Sq, 4 Dv, 5-8 O's strides (batch, head, query, feature; elements)
layout(local_size_x = LOCAL_SIZE_X) in;

layout(std430, binding = 0) readonly buffer Workspace { float partial[]; };
layout(std430, binding = 1) writeonly buffer Output { float O[]; };
layout(location = 0) uniform uint count;
layout(location = 1) uniform uint splits;
layout(location = 2) uniform uint heads;
layout(location = 3) uniform uint Sq;
layout(location = 4) uniform uint Dv;
layout(location = 5) uniform uint oStrides[4];

#ifdef EMPTY_ROWS_NAN
#define EMPTY_ROW uintBitsToFloat(0x7fc00000u)  // a row that saw no key: softmax over nothing but −inf is NaN
#else
#define EMPTY_ROW sum
#endif

void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i >= count) return;
  uint line = i / Dv, d = i % Dv;
  uint lines = count / Dv;
  uint stats = splits * count;
  float largest = uintBitsToFloat(0xff800000u);
  for (uint s = 0u; s < splits; ++s) largest = maxNaN(largest, partial[stats + 2u * (s * lines + line)]);
  float shift = largest == uintBitsToFloat(0xff800000u) ? 0.0 : largest;
  float total = 0.0, sum = 0.0;
  for (uint s = 0u; s < splits; ++s) {
    uint at = s * lines + line;
    float weight = exp(partial[stats + 2u * at] - shift);
    total = fma(partial[stats + 2u * at + 1u], weight, total);
    sum = fma(partial[at * Dv + d], weight, sum);
  }
  uint row = line % Sq, head = (line / Sq) % heads, batch = line / (Sq * heads);
  O[batch * oStrides[0] + head * oStrides[1] + row * oStrides[2] + d * oStrides[3]] = total != 0.0 ? sum / total : EMPTY_ROW;
}
