// The pointwise functions of imported models' activations, for the shaders that apply one (Unary.glsl) or fuse one
// after their own result (Broadcast.glsl, GroupedConv.glsl). Included after the injected defines:
//   POINTWISE: the function (the numbers of engine/graph/Pointwise.h); POINTWISE_ALPHA, POINTWISE_BETA: its
//   constants, as exact bit patterns (uintBitsToFloat(0x...u)), which also carry ±inf (an unbounded Clip).
#ifndef POINTWISE
#define POINTWISE 0
#endif
#ifndef POINTWISE_ALPHA
#define POINTWISE_ALPHA 0.0
#define POINTWISE_BETA 0.0
#endif

// erf to about 2e-7 absolute, 3e-7 relative: GLSL has none. Its Taylor series below 0.5 (relative accuracy
// near 0, where erf(x) ~ 1.128x), Abramowitz and Stegun's 7.1.26 above.
float erfApproximation(float x) {
  float a = abs(x);
  if (a < 0.5) {
    float s = a * a;
    return x * 1.1283791671 * (1.0 + s * (-1.0 / 3.0 + s * (1.0 / 10.0 + s * (-1.0 / 42.0 + s * (1.0 / 216.0 + s * (-1.0 / 1320.0))))));
  }
  float t = 1.0 / (1.0 + 0.3275911 * a);
  float poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
  return sign(x) * (1.0 - poly * exp(-a * a));
}

float pointwise(float x) {
  float alpha = POINTWISE_ALPHA, beta = POINTWISE_BETA;
#if POINTWISE == 0
  return x;
#elif POINTWISE == 1
  return max(x, 0.0);
#elif POINTWISE == 2
  return 1.0 / (1.0 + exp(-x));
#elif POINTWISE == 3
  // Some drivers compute tanh as (e^2x - 1)/(e^2x + 1), NaN for large x; tanh(±15) rounds to ±1 in fp32.
  return tanh(clamp(x, -15.0, 15.0));
#elif POINTWISE == 4
  return min(max(x, alpha), beta);  // Clip: alpha min, beta max
#elif POINTWISE == 5
  return clamp(alpha * x + beta, 0.0, 1.0);  // HardSigmoid
#elif POINTWISE == 6
  return x * clamp(x / 6.0 + 0.5, 0.0, 1.0);  // HardSwish
#elif POINTWISE == 7
  return x >= 0.0 ? x : alpha * x;  // LeakyRelu
#elif POINTWISE == 8
  return erfApproximation(x);
#elif POINTWISE == 9
  return 0.5 * x * (1.0 + erfApproximation(x * 0.70710678118654752));  // Gelu, exact
#elif POINTWISE == 10
  float inner = 0.7978845608028654 * (x + 0.044715 * x * x * x);  // Gelu, tanh approximation
  return 0.5 * x * (1.0 + tanh(clamp(inner, -15.0, 15.0)));
#elif POINTWISE == 11
  return sqrt(x);
#elif POINTWISE == 12
  // Pow with a constant exponent alpha: integral exponents by multiplication, so negative bases stay defined.
  if (alpha == 2.0) return x * x;
  if (alpha == 3.0) return x * x * x;
  if (alpha == 1.0) return x;
  if (alpha == 0.5) return sqrt(x);
  if (alpha == -1.0) return 1.0 / x;
  if (alpha == floor(alpha) && x < 0.0) return (mod(alpha, 2.0) == 0.0 ? 1.0 : -1.0) * pow(-x, alpha);
  return pow(x, alpha);
#elif POINTWISE == 13
  return exp(x);
#elif POINTWISE == 14
  return log(x);
#elif POINTWISE == 15
  return -x;
#elif POINTWISE == 16
  return abs(x);
#elif POINTWISE == 17
  return 1.0 / x;
#elif POINTWISE == 18
  return x >= 0.0 ? x : alpha * (exp(x) - 1.0);  // Elu
#elif POINTWISE == 19
  return x > 20.0 ? x : log(1.0 + exp(x));  // Softplus
#elif POINTWISE == 20
  return x / (1.0 + exp(-x));  // SiLU (Sigmoid then Mul by the same tensor)
#else
#error unknown POINTWISE
#endif
}
