#include "ops/Pointwise.h"

#include "base/check.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace glnet {
namespace {

// The constant's exact bit pattern, which also carries ±inf (an unbounded Clip).
std::string floatBits(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, 4);
  return "uintBitsToFloat(" + std::to_string(bits) + "u)";
}

}  // namespace

double Pointwise::operator()(double x) const {
  switch (kind) {
    case PointwiseKind::identity: return x;
    case PointwiseKind::relu: return std::max(x, 0.0);
    case PointwiseKind::sigmoid: return 1 / (1 + std::exp(-x));
    case PointwiseKind::tanh: return std::tanh(x);
    case PointwiseKind::clip: return std::min(std::max(x, double{alpha}), double{beta});
    case PointwiseKind::hardSigmoid: return std::clamp(alpha * x + beta, 0.0, 1.0);
    case PointwiseKind::hardSwish: return x * std::clamp(x / 6 + 0.5, 0.0, 1.0);
    case PointwiseKind::leakyRelu: return x >= 0 ? x : alpha * x;
    case PointwiseKind::erf: return std::erf(x);
    case PointwiseKind::gelu: return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case PointwiseKind::geluTanh: return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case PointwiseKind::sqrt: return std::sqrt(x);
    case PointwiseKind::pow: return std::pow(x, double{alpha});
    case PointwiseKind::exp: return std::exp(x);
    case PointwiseKind::log: return std::log(x);
    case PointwiseKind::negate: return -x;
    case PointwiseKind::abs: return std::abs(x);
    case PointwiseKind::reciprocal: return 1 / x;
    case PointwiseKind::elu: return x >= 0 ? x : alpha * (std::exp(x) - 1);
    case PointwiseKind::softplus: return std::log1p(std::exp(x));
    case PointwiseKind::silu: return x / (1 + std::exp(-x));
    case PointwiseKind::ceil: return std::ceil(x);
    case PointwiseKind::floor: return std::floor(x);
    case PointwiseKind::round: return std::nearbyint(x);
    case PointwiseKind::sign: return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0;
    case PointwiseKind::sin: return std::sin(x);
    case PointwiseKind::cos: return std::cos(x);
    case PointwiseKind::tan: return std::tan(x);
    case PointwiseKind::asin: return std::asin(x);
    case PointwiseKind::acos: return std::acos(x);
    case PointwiseKind::atan: return std::atan(x);
    case PointwiseKind::sinh: return std::sinh(x);
    case PointwiseKind::cosh: return std::cosh(x);
    case PointwiseKind::asinh: return std::asinh(x);
    case PointwiseKind::acosh: return std::acosh(x);
    case PointwiseKind::atanh: return std::atanh(x);
    case PointwiseKind::thresholdedRelu: return x > alpha || std::isnan(x) ? x : 0.0;  // PyTorch's Threshold keeps a NaN
    case PointwiseKind::shrink: return x < -beta ? x + alpha : x > beta || std::isnan(x) ? x - alpha : 0.0;
    case PointwiseKind::celu: return std::max(x, 0.0) + std::min(0.0, alpha * (std::exp(x / alpha) - 1));
    case PointwiseKind::selu: return beta * (x > 0 ? x : alpha * (std::exp(x) - 1));
    case PointwiseKind::softsign: return x / (1 + std::abs(x));
  }
  return x;
}

bool Pointwise::trainable() const {
  return kind == PointwiseKind::hardSwish || kind == PointwiseKind::gelu || kind == PointwiseKind::silu;
}

double Pointwise::derivative(double x) const {
  GLNET_ASSERT(trainable(), "only HardSwish, Gelu and SiLU have a derivative here");
  if (kind == PointwiseKind::hardSwish) return x < -3 ? 0.0 : x > 3 ? 1.0 : x / 3 + 0.5;
  if (kind == PointwiseKind::gelu) return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
  const double s = 1 / (1 + std::exp(-x));
  return s * (1 + x * (1 - s));
}

std::string Pointwise::name() const {
  static const char* const names[] = {"identity", "relu", "sigmoid", "tanh",  "clip", "hard sigmoid", "hard swish",
                                      "leaky relu", "erf", "gelu", "gelu (tanh)", "sqrt", "pow", "exp", "log",
                                      "negate", "abs", "reciprocal", "elu", "softplus", "silu", "ceil", "floor", "round", "sign",
                                      "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh",
                                      "thresholded relu", "shrink", "celu", "selu", "softsign"};
  return names[static_cast<int>(kind)];
}

std::vector<ShaderDefine> Pointwise::defines() const {
  return {{"POINTWISE", std::to_string(static_cast<int>(kind))}, {"POINTWISE_ALPHA", floatBits(alpha)}, {"POINTWISE_BETA", floatBits(beta)}};
}

std::vector<ShaderDefine> Pointwise::fusedDefines() const { return kind == PointwiseKind::identity ? std::vector<ShaderDefine>{} : defines(); }

std::vector<std::string> Pointwise::fusedIncludes() const {
  return kind == PointwiseKind::identity ? std::vector<std::string>{} : std::vector<std::string>{"Pointwise.glsl"};
}

}  // namespace glnet
