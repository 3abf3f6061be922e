// One update of every trained parameter of a model, which live in one buffer (the parameter arena), the ones that
// decay first. With g the gradient, scaled by min(1, clip / (‖all gradients‖ + 1e-6)) when clipping (PyTorch's
// clip_grad_norm_), and λ the weight decay of this parameter (0 past the decayed ones: biases, normalization):
//   OPTIMIZER_SGD:              g += λ·p; p −= lr·g
//   OPTIMIZER_MOMENTUM:         g += λ·p; v = μ·v + g; p −= lr·v, or with NESTEROV p −= lr·(g + μ·v)   (PyTorch's form)
//   OPTIMIZER_ADAM:             g += λ·p; m = β1·m + (1−β1)·g; v = β2·v + (1−β2)·g²;
//                               p −= lr · (m / (1 − β1^t)) / (sqrt(v / (1 − β2^t)) + ε)
//   OPTIMIZER_ADAMW:            p −= lr·λ·p (decoupled), then Adam's step without λ in g
// bindings: 0 parameters read-write, 1 gradients read, 2 first state (v or m) read-write, 3 second (Adam v), 4 the sum
// of the squared gradients (CLIP)
// uniforms: 0 count, 1 lr (float bits: a plan parameter, so that a schedule changes it per step), 2 μ or β1, 3 β2,
// 4 ε, 5 t (Adam's step, from 1), 6 λ, 7 decayed (the first `decayed` parameters decay), 8 clip (CLIP)
#ifndef NESTEROV
#define NESTEROV 0
#endif
#ifndef CLIP
#define CLIP 0
#endif
layout(local_size_x = LOCAL_SIZE_X) in;

layout(std430, binding = 0) buffer Parameters { float p[]; };
layout(std430, binding = 1) readonly buffer Gradients { float g[]; };
layout(std430, binding = 2) buffer FirstState { float s1[]; };
layout(std430, binding = 3) buffer SecondState { float s2[]; };
#if CLIP
layout(std430, binding = 4) readonly buffer SquaredNorm { float squaredNorm[]; };
layout(location = 8) uniform float clip;
#endif
layout(location = 0) uniform uint count;
layout(location = 1) uniform uint learningRateBits;
layout(location = 2) uniform float beta1;
layout(location = 3) uniform float beta2;
layout(location = 4) uniform float epsilon;
layout(location = 5) uniform uint t;
layout(location = 6) uniform float weightDecay;
layout(location = 7) uniform uint decayed;

void main() {
  uint i = LINEAR_INVOCATION_INDEX;
  if (i >= count) return;
  float lr = uintBitsToFloat(learningRateBits);
  float decay = i < decayed ? weightDecay : 0.0;
  float gradient = g[i];
#if CLIP
  gradient *= min(1.0, clip / (sqrt(squaredNorm[0]) + 1e-6));
#endif
#if OPTIMIZER == OPTIMIZER_ADAMW
  p[i] -= lr * decay * p[i];
#else
  gradient += decay * p[i];
#endif
#if OPTIMIZER == OPTIMIZER_SGD
  p[i] -= lr * gradient;
#elif OPTIMIZER == OPTIMIZER_MOMENTUM
  float v = beta1 * s1[i] + gradient;
  s1[i] = v;
#if NESTEROV
  p[i] -= lr * (gradient + beta1 * v);
#else
  p[i] -= lr * v;
#endif
#else
  float m = beta1 * s1[i] + (1.0 - beta1) * gradient;
  float v = beta2 * s2[i] + (1.0 - beta2) * gradient * gradient;
  s1[i] = m;
  s2[i] = v;
  float mHat = m / (1.0 - pow(beta1, float(t)));
  float vHat = v / (1.0 - pow(beta2, float(t)));
  p[i] -= lr * mHat / (sqrt(vHat) + epsilon);
#endif
}
