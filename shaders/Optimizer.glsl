// One update of every parameter of a model, which lives in one buffer (the parameter arena):
//   OPTIMIZER 0 SGD:            p −= lr·g
//   OPTIMIZER 1 SGD + momentum: v = μ·v + g; p −= lr·v                         (PyTorch's form)
//   OPTIMIZER 2 Adam:           m = β1·m + (1−β1)·g; v = β2·v + (1−β2)·g²;
//                               p −= lr · (m / (1 − β1^t)) / (sqrt(v / (1 − β2^t)) + ε)
// bindings: 0 parameters read-write, 1 gradients read, 2 first state (v or m) read-write, 3 second (Adam v)
// uniforms: 0 count, 1 lr, 2 μ or β1, 3 β2, 4 ε, 5 t (Adam's step, from 1)
layout(local_size_x = LOCAL_SIZE_X) in;

layout(std430, binding = 0) buffer Parameters { float p[]; };
layout(std430, binding = 1) readonly buffer Gradients { float g[]; };
layout(std430, binding = 2) buffer FirstState { float s1[]; };
layout(std430, binding = 3) buffer SecondState { float s2[]; };
layout(location = 0) uniform uint count;
layout(location = 1) uniform float lr;
layout(location = 2) uniform float beta1;
layout(location = 3) uniform float beta2;
layout(location = 4) uniform float epsilon;
layout(location = 5) uniform uint t;

void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i >= count) return;
#if OPTIMIZER == 0
  p[i] -= lr * g[i];
#elif OPTIMIZER == 1
  float v = beta1 * s1[i] + g[i];
  s1[i] = v;
  p[i] -= lr * v;
#else
  float m = beta1 * s1[i] + (1.0 - beta1) * g[i];
  float v = beta2 * s2[i] + (1.0 - beta2) * g[i] * g[i];
  s1[i] = m;
  s2[i] = v;
  float mHat = m / (1.0 - pow(beta1, float(t)));
  float vHat = v / (1.0 - pow(beta2, float(t)));
  p[i] -= lr * mHat / (sqrt(vHat) + epsilon);
#endif
}
