#include "model/SmallProblems.h"
#include "support/GlContext.h"

#include <doctest/doctest.h>

#include <cmath>

using namespace glnet;

TEST_SUITE("gl") {
  TEST_CASE("a 2-4-1 network learns XOR exactly") {
    const XorResult result = trainXor(test::glContext());
    INFO("outputs " << result.outputs[0] << " " << result.outputs[1] << " " << result.outputs[2] << " " << result.outputs[3]
                    << ", loss " << result.loss);
    CHECK(result.solved());
    CHECK(result.loss < 0.01);
  }

  TEST_CASE("linear regression recovers its coefficients within 0.01") {
    const RegressionResult result = trainLinearRegression(test::glContext());
    // 512 samples with noise 0.01: the least-squares estimate lies within ~0.002 of the truth.
    for (std::size_t f = 0; f < result.trueCoefficients.size(); ++f) {
      CHECK(std::abs(result.coefficients[f] - result.trueCoefficients[f]) < 0.01);
    }
    CHECK(std::abs(result.intercept - result.trueIntercept) < 0.01);
  }

  TEST_CASE("logistic regression recovers its coefficients within 0.25") {
    const RegressionResult result = trainLogisticRegression(test::glContext());
    // 4096 Bernoulli samples: the maximum-likelihood estimate has a standard error near 0.08.
    for (std::size_t f = 0; f < result.trueCoefficients.size(); ++f) {
      CHECK(std::abs(result.coefficients[f] - result.trueCoefficients[f]) < 0.25);
    }
    CHECK(std::abs(result.intercept - result.trueIntercept) < 0.25);
  }
}
