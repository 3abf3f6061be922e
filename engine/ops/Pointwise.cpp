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
#define GLNET_POINTWISE_REFERENCE(cpp, glsl, name, onnx, ...) \
  case PointwiseKind::cpp: return __VA_ARGS__;
  switch (kind) { GLNET_POINTWISE_KINDS(GLNET_POINTWISE_REFERENCE) }
#undef GLNET_POINTWISE_REFERENCE
  return x;
}

bool Pointwise::trainable() const {
  return kind == PointwiseKind::hardSwish || kind == PointwiseKind::gelu || kind == PointwiseKind::geluTanh || kind == PointwiseKind::silu;
}

double Pointwise::derivative(double x) const {
  GLNET_ASSERT(trainable(), "only HardSwish, Gelu (both forms) and SiLU have a derivative here");
  if (kind == PointwiseKind::hardSwish) return x < -3 ? 0.0 : x > 3 ? 1.0 : x / 3 + 0.5;
  if (kind == PointwiseKind::gelu) return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
  if (kind == PointwiseKind::geluTanh) {
    const double c = std::sqrt(2 / M_PI), t = std::tanh(c * (x + 0.044715 * x * x * x));
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * 0.044715 * x * x);
  }
  const double s = 1 / (1 + std::exp(-x));
  return s * (1 + x * (1 - s));
}

std::string Pointwise::name() const { return kindName(kind); }

std::vector<ShaderDefine> Pointwise::defines() const {
  return {kindDefine(kind), {"POINTWISE_ALPHA", floatBits(alpha)}, {"POINTWISE_BETA", floatBits(beta)}};
}

std::vector<ShaderDefine> Pointwise::fusedDefines() const { return kind == PointwiseKind::identity ? std::vector<ShaderDefine>{} : defines(); }

std::vector<std::string> Pointwise::fusedIncludes() const {
  return kind == PointwiseKind::identity ? std::vector<std::string>{} : std::vector<std::string>{"Pointwise.glsl"};
}

}  // namespace glnet
