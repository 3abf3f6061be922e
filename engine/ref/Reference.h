// Plain C++ references of every op, accumulating in double: what the tests hold each shader's float32 results to.
#pragma once

#include "numbers/Activation.h"
#include "numbers/BinaryKinds.h"
#include "numbers/InputFormat.h"
#include "numbers/Sampling.h"

#include <cstdint>
#include <vector>

namespace glnet::ref {

// count values from pixels[first], each (x/255 − mean)/std of its channel plane in images of pixelsPerImage (first: a
// whole number of images).
std::vector<double> normalize(const std::vector<std::uint8_t>& pixels, std::size_t first, std::size_t count, const InputFormat& format,
                              std::size_t pixelsPerImage);
// Whether value replaces best in a search for the first maximum: a larger number, or the first NaN. Max pooling, maximum
// and ReLU propagate a NaN as PyTorch does; std::max keeps its first operand against a NaN second.
bool beats(double value, double best);
double maxNaN(double a, double b);
double minNaN(double a, double b);
// a ∘ b of a binary kind (numbers/BinaryKinds.h): the broadcast op's reference and the importer's fold of constants.
double combine(BinaryKind kind, double a, double b);
double activate(Activation activation, double x);
// The derivative expressed through the activation's output y, as the shaders compute it (ReLU: 0 at the kink).
double activationDerivative(Activation activation, double y);
// Y = act(X·Wᵀ + b); X [rows × inputs], W [outputs × inputs].
std::vector<double> dense(const std::vector<double>& x, const std::vector<float>& weight, const std::vector<float>& bias,
                          std::size_t rows, std::size_t inputs, std::size_t outputs, Activation activation);
// Where an operand's elements lie: A(r, t) = a[r·stride + t·depthStride], B(t, s) = b[s·stride + t·depthStride].
struct OperandLayout {
  std::size_t stride, depthStride;
};
// C[rows × columns] = Σ_t A(r, t)·B(t, s) in any operand layout of the GEMM core.
std::vector<double> gemm(const std::vector<float>& a, OperandLayout aLayout, const std::vector<float>& b, OperandLayout bLayout,
                         std::size_t rows, std::size_t columns, std::size_t depth);
std::vector<double> softmax(const std::vector<double>& logits, std::size_t rows, std::size_t columns);
std::vector<std::uint32_t> argmax(const std::vector<double>& logits, std::size_t rows, std::size_t columns);
// Each row's next token as shaders/NextToken.glsl chooses it (numbers/Sampling.h), row r drawing draws[r] in [0, 1):
// the first index whose running sum of the kept tokens' probabilities, in index order, exceeds it. A row holding a NaN
// gets V, and so does a sampled row whose largest logit is not finite (no distribution to draw from).
std::vector<std::uint32_t> nextTokens(const std::vector<float>& logits, std::size_t rows, std::size_t vocabulary,
                                      const SamplingSettings& settings, const std::vector<double>& draws);

}  // namespace glnet::ref
