// A language model's input rows: y[r] = tokens[ids[r]] (+ positions[first + r] with HAS_POSITIONS, GPT-2's learned
// positions), for the ids of a prompt (row r at position first + r) or of a decode step's chosen tokens (with
// ROW_POSITIONS, row r at rowPositions[r]: each row a sequence of its own). Ids are floats holding integers, as glnet
// holds integer tensors; an id outside [0, V), fractional or NaN, or a position past the table, gives a NaN row (a
// GPU cannot raise an error; the host checks the ids it writes).
// One invocation per output element.
// bindings: 0 ids read, 1 token table [V, C] read, 2 position table [P, C] read (HAS_POSITIONS), 3 y [rows, C] write,
// 4 rowPositions (uint per row) read (ROW_POSITIONS)
// uniforms: 0 count (rows·C), 1 C, 2 V, 3 the first row's position (HAS_POSITIONS without ROW_POSITIONS), 4 P
// (HAS_POSITIONS)
layout(local_size_x = LOCAL_SIZE_X) in;

layout(std430, binding = 0) readonly buffer Ids { float ids[]; };
layout(std430, binding = 1) readonly buffer Tokens { float tokens[]; };
#ifdef HAS_POSITIONS
layout(std430, binding = 2) readonly buffer Positions { float positions[]; };
#endif
layout(std430, binding = 3) writeonly buffer Output { float y[]; };
layout(location = 0) uniform uint count;
layout(location = 1) uniform uint C;
layout(location = 2) uniform uint V;
#ifdef HAS_POSITIONS
#ifdef ROW_POSITIONS
layout(std430, binding = 4) readonly buffer RowPositions { uint rowPositions[]; };
#else
layout(location = 3) uniform uint firstPosition;
#endif
layout(location = 4) uniform uint P;
#endif

void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i >= count) return;
  uint row = i / C, c = i % C;
  float id = ids[row];
  float value = id >= 0.0 && id < float(V) && id == floor(id) ? tokens[uint(id) * C + c] : uintBitsToFloat(0x7fc00000u);
#ifdef HAS_POSITIONS
#ifdef ROW_POSITIONS
  uint position = rowPositions[row];
#else
  uint position = firstPosition + row;
#endif
  value += position < P ? positions[position * C + c] : uintBitsToFloat(0x7fc00000u);
#endif
  y[i] = value;
}
