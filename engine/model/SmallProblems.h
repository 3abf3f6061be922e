// The small problems of the reference write-ups, trained by the same graph and Plan as MNIST: XOR with a
// 2-4-1 network, and linear and logistic regression on generated data with known coefficients.
#pragma once

#include "gl/Context.h"

#include <cstdint>
#include <vector>

namespace glnet {

struct XorResult {
  std::vector<float> outputs;  // for inputs 00, 01, 10, 11
  double loss = 0;
  int steps = 0;
  bool solved() const;  // every output on the right side of 0.5 by at least 0.4
};
XorResult trainXor(const Context& context, std::uint32_t seed = 1, int steps = 2000);

struct RegressionResult {
  std::vector<double> trueCoefficients;
  double trueIntercept = 0;
  std::vector<double> coefficients;  // recovered
  double intercept = 0;
  double loss = 0;
  int steps = 0;
};
// y = x·w + b + noise(0.01), 512 samples of 3 features, fitted with mean squared error.
RegressionResult trainLinearRegression(const Context& context, std::uint32_t seed = 2, int steps = 500);
// P(y = 1 | x) = sigmoid(x·w + b), 4096 samples of 2 features, fitted as two-class softmax regression
// (its coefficients are the difference of the two rows). 200 steps reach the estimate 2000 do to within 0.002.
RegressionResult trainLogisticRegression(const Context& context, std::uint32_t seed = 3, int steps = 200);

}  // namespace glnet
