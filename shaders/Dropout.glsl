// Inverted dropout over count floats: y = x · keep / (1 − rate), each element kept when a hash of (its index, the
// layer's salt, the training step) clears `threshold`. The backward pass draws the same mask again rather than
// storing it, and the mask is the same for the same step on any device. The C++ reference (DropoutOps.cpp,
// dropoutKeeps) is this hash, bit for bit.
//   DROPOUT_GRADIENT: dx[i] = dy[i] · keep / (1 − rate), written or added
// bindings: 0 x (gradient: dy) read, 1 y (gradient: dx) write
// uniforms: 0 count, 1 salt, 2 trainingStep, 3 threshold (rate · 2^24), 4 scale 1/(1 − rate), 5 accumulate (gradient)
layout(local_size_x = LOCAL_SIZE_X) in;

layout(std430, binding = 0) readonly buffer Source { float x[]; };
#ifdef DROPOUT_GRADIENT
layout(std430, binding = 1) buffer Result { float y[]; };
layout(location = 5) uniform uint accumulate;
#else
layout(std430, binding = 1) writeonly buffer Result { float y[]; };
#endif
layout(location = 0) uniform uint count;
layout(location = 1) uniform uint salt;
layout(location = 2) uniform uint trainingStep;
layout(location = 3) uniform uint threshold;
layout(location = 4) uniform float scale;

// Chris Wellons' lowbias32 integer hash.
uint mix32(uint h) {
  h ^= h >> 16;
  h *= 0x7feb352du;
  h ^= h >> 15;
  h *= 0x846ca68bu;
  h ^= h >> 16;
  return h;
}

void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i >= count) return;
  uint stream = mix32(salt ^ mix32(trainingStep));
  float kept = (mix32(i * 0x9e3779b9u + stream) >> 8) >= threshold ? scale : 0.0;
#ifdef DROPOUT_GRADIENT
  y[i] = (accumulate != 0u ? y[i] : 0.0) + x[i] * kept;
#else
  y[i] = x[i] * kept;
#endif
}
