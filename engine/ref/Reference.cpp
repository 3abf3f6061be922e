#include "ref/Reference.h"

#include <algorithm>
#include <cmath>
#include <functional>

namespace glnet::ref {

std::vector<double> normalize(const std::vector<std::uint8_t>& pixels, std::size_t first, std::size_t count, const InputFormat& format,
                              std::size_t pixelsPerImage) {
  const std::size_t plane = pixelsPerImage / format.channels();
  std::vector<double> y(count);
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t channel = std::min(((first + i) % pixelsPerImage) / plane, format.channels() - 1);
    y[i] = (pixels[first + i] / 255.0 - static_cast<double>(format.mean[channel])) / static_cast<double>(format.std[channel]);
  }
  return y;
}

bool beats(double value, double best) { return !std::isnan(best) && (value > best || std::isnan(value)); }

double maxNaN(double a, double b) { return beats(b, a) ? b : a; }

double minNaN(double a, double b) { return -maxNaN(-a, -b); }

double combine(BinaryKind kind, double a, double b) {
  const bool left = a != 0, right = b != 0;  // NaN is nonzero: true
  switch (kind) {
    case BinaryKind::add: return a + b;
    case BinaryKind::subtract: return a - b;
    case BinaryKind::multiply: return a * b;
    case BinaryKind::divide: return a / b;
    case BinaryKind::integerDivide: return std::trunc(a / b);
    case BinaryKind::power: return std::pow(a, b);
    case BinaryKind::maximum: return maxNaN(a, b);
    case BinaryKind::minimum: return minNaN(a, b);
    case BinaryKind::prelu: return a >= 0 ? a : a * b;
    case BinaryKind::equal: return a == b ? 1.0 : 0.0;
    case BinaryKind::less: return a < b ? 1.0 : 0.0;
    case BinaryKind::lessOrEqual: return a <= b ? 1.0 : 0.0;
    case BinaryKind::greater: return a > b ? 1.0 : 0.0;
    case BinaryKind::greaterOrEqual: return a >= b ? 1.0 : 0.0;
    case BinaryKind::logicalAnd: return left && right ? 1.0 : 0.0;
    case BinaryKind::logicalOr: return left || right ? 1.0 : 0.0;
    case BinaryKind::logicalXor: return left != right ? 1.0 : 0.0;
    case BinaryKind::mod: {
      const double r = std::fmod(a, b);  // exact; then moved to the divisor's side, as NumPy's mod
      return r != 0 && (r < 0) != (b < 0) ? r + b : r;
    }
    case BinaryKind::fmod: return std::fmod(a, b);
  }
  return 0;
}

double activate(Activation activation, double x) {
  switch (activation) {
    case Activation::relu: return maxNaN(x, 0.0);
    case Activation::tanh: return std::tanh(x);
    case Activation::sigmoid: return 1.0 / (1.0 + std::exp(-x));
    case Activation::none: return x;
  }
  return x;
}

double activationDerivative(Activation activation, double y) {
  switch (activation) {
    case Activation::relu: return y > 0 ? 1.0 : 0.0;
    case Activation::tanh: return 1.0 - y * y;
    case Activation::sigmoid: return y * (1.0 - y);
    case Activation::none: return 1.0;
  }
  return 1.0;
}

std::vector<double> dense(const std::vector<double>& x, const std::vector<float>& weight, const std::vector<float>& bias,
                          std::size_t rows, std::size_t inputs, std::size_t outputs, Activation activation) {
  std::vector<double> y(rows * outputs);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t o = 0; o < outputs; ++o) {
      double sum = bias[o];
      for (std::size_t i = 0; i < inputs; ++i) sum += x[r * inputs + i] * weight[o * inputs + i];
      y[r * outputs + o] = activate(activation, sum);
    }
  }
  return y;
}

std::vector<double> gemm(const std::vector<float>& a, OperandLayout aLayout, const std::vector<float>& b, OperandLayout bLayout,
                         std::size_t rows, std::size_t columns, std::size_t depth) {
  std::vector<double> c(rows * columns);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t s = 0; s < columns; ++s) {
      double sum = 0;
      for (std::size_t t = 0; t < depth; ++t) {
        sum += double{a[r * aLayout.stride + t * aLayout.depthStride]} * b[s * bLayout.stride + t * bLayout.depthStride];
      }
      c[r * columns + s] = sum;
    }
  }
  return c;
}

std::vector<double> softmax(const std::vector<double>& logits, std::size_t rows, std::size_t columns) {
  std::vector<double> p(rows * columns);
  for (std::size_t r = 0; r < rows; ++r) {
    double largest = logits[r * columns];
    for (std::size_t c = 1; c < columns; ++c) largest = std::max(largest, logits[r * columns + c]);
    double total = 0;
    for (std::size_t c = 0; c < columns; ++c) total += std::exp(logits[r * columns + c] - largest);
    for (std::size_t c = 0; c < columns; ++c) p[r * columns + c] = std::exp(logits[r * columns + c] - largest) / total;
  }
  return p;
}

std::vector<std::uint32_t> argmax(const std::vector<double>& logits, std::size_t rows, std::size_t columns) {
  std::vector<std::uint32_t> classes(rows);
  for (std::size_t r = 0; r < rows; ++r) {
    std::uint32_t best = 0;
    for (std::size_t c = 1; c < columns; ++c) {
      if (logits[r * columns + c] > logits[r * columns + best]) best = static_cast<std::uint32_t>(c);
    }
    classes[r] = best;
  }
  return classes;
}

std::vector<std::uint32_t> nextTokens(const std::vector<float>& logits, std::size_t rows, std::size_t vocabulary,
                                      const SamplingSettings& settings, const std::vector<double>& draws) {
  const auto invalid = static_cast<std::uint32_t>(vocabulary);
  std::vector<std::uint32_t> ids(rows, invalid);
  for (std::size_t r = 0; r < rows; ++r) {
    const std::vector<double> z(logits.begin() + r * vocabulary, logits.begin() + (r + 1) * vocabulary);
    if (std::any_of(z.begin(), z.end(), [](double value) { return std::isnan(value); })) continue;
    const auto largest = std::max_element(z.begin(), z.end());  // the first of the largest
    if (settings.greedy()) {
      ids[r] = static_cast<std::uint32_t>(largest - z.begin());
      continue;
    }
    if (!std::isfinite(*largest)) continue;
    // Top-k: the k-th largest logit and every logit equal to it or above.
    double lowestKept = -INFINITY;
    if (settings.topK > 0 && settings.topK < vocabulary) {
      std::vector<double> sorted = z;
      std::nth_element(sorted.begin(), sorted.begin() + (settings.topK - 1), sorted.end(), std::greater<double>());
      lowestKept = sorted[settings.topK - 1];
    }
    std::vector<double> weight(vocabulary, 0.0);
    double total = 0;
    for (std::size_t i = 0; i < vocabulary; ++i) {
      if (z[i] >= lowestKept) total += weight[i] = std::exp((z[i] - *largest) / settings.temperature);
    }
    // Top-p: a logit stays while the probability of the logits above it is below p.
    if (settings.topP < 1) {
      std::vector<std::size_t> order(vocabulary);
      for (std::size_t i = 0; i < vocabulary; ++i) order[i] = i;
      std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return z[a] > z[b]; });
      double above = 0;
      for (std::size_t n = 0; n < vocabulary;) {
        std::size_t end = n;  // the tokens of equal logits, kept or left together
        double mass = 0;
        for (; end < vocabulary && z[order[end]] == z[order[n]]; ++end) mass += weight[order[end]];
        if (!(above < settings.topP * total)) lowestKept = std::max(lowestKept, std::nextafter(z[order[n]], INFINITY));
        above += mass;
        n = end;
      }
      total = 0;
      for (std::size_t i = 0; i < vocabulary; ++i) total += weight[i] = z[i] >= lowestKept ? weight[i] : 0.0;
    }
    double running = 0;
    for (std::size_t i = 0; i < vocabulary; ++i) {
      if (weight[i] == 0) continue;
      ids[r] = static_cast<std::uint32_t>(i);  // the last kept token, should rounding leave the draw past the sum
      running += weight[i] / total;
      if (running > draws[r]) break;
    }
  }
  return ids;
}

}  // namespace glnet::ref
