// The pointwise functions of imported models' activations, for the shaders that apply one (Unary.glsl) or fuse one
// after their own result (Broadcast.glsl, GroupedConv.glsl). Included after the injected defines:
//   POINTWISE: the function (POINTWISE_RELU, ...: the list engine/numbers/PointwiseKinds.h, whose defines every
//   program's prologue holds); POINTWISE_ALPHA, POINTWISE_BETA: its
//   constants, as exact bit patterns (uintBitsToFloat(0x...u)), which also carry ±inf (an unbounded Clip).
#ifndef POINTWISE
#define POINTWISE POINTWISE_IDENTITY
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

// atan to a few ulp: GLSL's precision for it is the driver's (llvmpipe's is off by 1.5e-5 relative, its asin by 3e-4).
// 1/x beyond 1, then atan(a) = π/6 + atan((√3a − 1)/(√3 + a)) beyond tan(π/12), then the series to a^11.
float preciseAtan(float x) {
  float a = abs(x);
  bool inverted = a > 1.0;
  if (inverted) a = 1.0 / a;
  bool shifted = a > 0.26794919;
  if (shifted) a = (a * 1.7320508 - 1.0) / (1.7320508 + a);
  float s = a * a;
  float r = a * (1.0 + s * (-1.0 / 3.0 + s * (1.0 / 5.0 + s * (-1.0 / 7.0 + s * (1.0 / 9.0 + s * (-1.0 / 11.0))))));
  if (shifted) r += 0.52359878;
  if (inverted) r = 1.5707964 - r;
  return x < 0.0 ? -r : r;
}

float pointwise(float x) {
  float alpha = POINTWISE_ALPHA, beta = POINTWISE_BETA;
#if POINTWISE == POINTWISE_IDENTITY
  return x;
#elif POINTWISE == POINTWISE_RELU
  return maxNaN(x, 0.0);
#elif POINTWISE == POINTWISE_SIGMOID
  return 1.0 / (1.0 + exp(-x));
#elif POINTWISE == POINTWISE_TANH
  // Some drivers compute tanh as (e^2x - 1)/(e^2x + 1), NaN for large x; tanh(±15) rounds to ±1 in fp32.
  return isNaN(x) ? x : tanh(clamp(x, -15.0, 15.0));  // llvmpipe's tanh(NaN) is a number
#elif POINTWISE == POINTWISE_CLIP
  return minNaN(maxNaN(x, alpha), beta);  // Clip: alpha min, beta max
#elif POINTWISE == POINTWISE_HARD_SIGMOID
  return clampNaN(alpha * x + beta, 0.0, 1.0);  // HardSigmoid
#elif POINTWISE == POINTWISE_HARD_SWISH
  return x * clamp(x / 6.0 + 0.5, 0.0, 1.0);  // HardSwish
#elif POINTWISE == POINTWISE_LEAKY_RELU
  return x >= 0.0 ? x : alpha * x;  // LeakyRelu
#elif POINTWISE == POINTWISE_ERF
  return erfApproximation(x);
#elif POINTWISE == POINTWISE_GELU
  return 0.5 * x * (1.0 + erfApproximation(x * 0.70710678118654752));  // Gelu, exact
#elif POINTWISE == POINTWISE_GELU_TANH
  float inner = 0.7978845608028654 * (x + 0.044715 * x * x * x);  // Gelu, tanh approximation
  return 0.5 * x * (1.0 + tanh(clamp(inner, -15.0, 15.0)));
#elif POINTWISE == POINTWISE_SQRT
  return sqrt(x);
#elif POINTWISE == POINTWISE_POW
  // Pow with a constant exponent alpha: integral exponents by multiplication, so negative bases stay defined.
  if (alpha == 2.0) return x * x;
  if (alpha == 3.0) return x * x * x;
  if (alpha == 1.0) return x;
  if (alpha == 0.5) return sqrt(x);
  if (alpha == -1.0) return 1.0 / x;
  if (alpha == floor(alpha) && x < 0.0) return (mod(alpha, 2.0) == 0.0 ? 1.0 : -1.0) * pow(-x, alpha);
  return pow(x, alpha);
#elif POINTWISE == POINTWISE_EXP
  return exp(x);
#elif POINTWISE == POINTWISE_LOG
  return log(x);
#elif POINTWISE == POINTWISE_NEGATE
  return -x;
#elif POINTWISE == POINTWISE_ABS
  return abs(x);
#elif POINTWISE == POINTWISE_RECIPROCAL
  return 1.0 / x;
#elif POINTWISE == POINTWISE_ELU
  return x >= 0.0 ? x : alpha * (exp(x) - 1.0);  // Elu
#elif POINTWISE == POINTWISE_SOFTPLUS
  return x > 20.0 ? x : log(1.0 + exp(x));  // Softplus
#elif POINTWISE == POINTWISE_SILU
  return x / (1.0 + exp(-x));  // SiLU (Sigmoid then Mul by the same tensor)
#elif POINTWISE == POINTWISE_CEIL
  return ceil(x);
#elif POINTWISE == POINTWISE_FLOOR
  return floor(x);
#elif POINTWISE == POINTWISE_ROUND
  return roundEven(x);  // ONNX rounds halves to even
#elif POINTWISE == POINTWISE_TRUNC
  return trunc(x);
#elif POINTWISE == POINTWISE_NONZERO
  return x == 0.0 ? 0.0 : 1.0;  // NaN is not zero
#elif POINTWISE == POINTWISE_SIGN
  return sign(x);
#elif POINTWISE == POINTWISE_SIN
  return sin(x);
#elif POINTWISE == POINTWISE_COS
  return cos(x);
#elif POINTWISE == POINTWISE_TAN
  return tan(x);
#elif POINTWISE == POINTWISE_ASIN
  return preciseAtan(x * inversesqrt((1.0 - x) * (1.0 + x)));  // asin
#elif POINTWISE == POINTWISE_ACOS
  return 2.0 * preciseAtan(sqrt((1.0 - x) / (1.0 + x)));  // acos
#elif POINTWISE == POINTWISE_ATAN
  return preciseAtan(x);
#elif POINTWISE == POINTWISE_SINH
  return 0.5 * (exp(x) - exp(-x));  // sinh: GLSL's may lose precision near 0 on some drivers; this one too, alike
#elif POINTWISE == POINTWISE_COSH
  return 0.5 * (exp(x) + exp(-x));
#elif POINTWISE == POINTWISE_ASINH
  return asinh(x);
#elif POINTWISE == POINTWISE_ACOSH
  return acosh(x);
#elif POINTWISE == POINTWISE_ATANH
  return atanh(x);
#elif POINTWISE == POINTWISE_THRESHOLDED_RELU
  return x > alpha || isNaN(x) ? x : 0.0;  // ThresholdedRelu (PyTorch's Threshold keeps a NaN)
#elif POINTWISE == POINTWISE_SHRINK
  return x < -beta ? x + alpha : x > beta || isNaN(x) ? x - alpha : 0.0;  // Shrink: alpha bias, beta lambd
#elif POINTWISE == POINTWISE_CELU
  return maxNaN(x, 0.0) + min(0.0, alpha * (exp(x / alpha) - 1.0));  // Celu
#elif POINTWISE == POINTWISE_SELU
  return beta * (x > 0.0 ? x : alpha * (exp(x) - 1.0));  // Selu: alpha, beta gamma
#elif POINTWISE == POINTWISE_SOFTSIGN
  return x / (1.0 + abs(x));  // Softsign
#elif POINTWISE == POINTWISE_MISH
  // x·tanh(softplus(x)) with tanh(log(1 + n)) = n(n + 2)/(n(n + 2) + 2), n = e^x: no log(1 + tiny) to lose digits.
  float n = exp(x), m = n * (n + 2.0);
  return x > 20.0 ? x : x * m / (m + 2.0);  // Mish
#elif POINTWISE == POINTWISE_NOT
  return truth(x) ? 0.0 : 1.0;
#elif POINTWISE == POINTWISE_IS_NAN
  return isNaN(x) ? 1.0 : 0.0;
#elif POINTWISE == POINTWISE_IS_INF
  return isInf(x) && (x < 0.0 ? alpha != 0.0 : beta != 0.0) ? 1.0 : 0.0;  // IsInf: alpha detect_negative, beta detect_positive
#elif POINTWISE == POINTWISE_PADDING_MASK
  return isNaN(x) ? x : x == alpha ? uintBitsToFloat(0xff800000u) : 0.0;  // alpha: the padding id
#else
#error unknown POINTWISE
#endif
}

#if POINTWISE == POINTWISE_HARD_SWISH || POINTWISE == POINTWISE_GELU || POINTWISE == POINTWISE_GELU_TANH || POINTWISE == POINTWISE_SILU
// The derivative of the functions that train (HardSwish, Gelu in both forms, SiLU).
float pointwiseDerivative(float x) {
#if POINTWISE == POINTWISE_HARD_SWISH
  return x < -3.0 ? 0.0 : x > 3.0 ? 1.0 : x / 3.0 + 0.5;
#elif POINTWISE == POINTWISE_GELU
  return 0.5 * (1.0 + erfApproximation(x * 0.70710678118654752)) + x * 0.3989422804014327 * exp(-0.5 * x * x);
#elif POINTWISE == POINTWISE_GELU_TANH
  float t = tanh(clamp(0.7978845608028654 * (x + 0.044715 * x * x * x), -15.0, 15.0));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * 0.7978845608028654 * (1.0 + 0.134145 * x * x);
#else
  float s = 1.0 / (1.0 + exp(-x));
  return s * (1.0 + x * (1.0 - s));
#endif
}
#endif
