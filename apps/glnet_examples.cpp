// glnet_examples: the small problems of the reference write-ups, trained on the GPU by glnet's graph.
#include "common/Cli.h"
#include "base/check.h"
#include "model/SmallProblems.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>

using namespace glnet;

namespace {

void printRegression(const char* title, const RegressionResult& r) {
  std::printf("%s: %d steps, final loss %.6f\n", title, r.steps, r.loss);
  for (std::size_t f = 0; f < r.coefficients.size(); ++f) {
    std::printf("  w%zu = %+.4f   (true %+.4f)\n", f, r.coefficients[f], r.trueCoefficients[f]);
  }
  std::printf("  b  = %+.4f   (true %+.4f)\n", r.intercept, r.trueIntercept);
}

nlohmann::json toJson(const RegressionResult& r) {
  return {{"steps", r.steps}, {"loss", r.loss}, {"coefficients", r.coefficients}, {"intercept", r.intercept},
          {"true_coefficients", r.trueCoefficients}, {"true_intercept", r.trueIntercept}};
}

}  // namespace

int main(int argc, char** argv) {
  return cli::run("glnet_examples", [&] {
    cli::Parser parser("glnet_examples",
                       "Trains the reference write-ups' small problems on the GPU with glnet's graph and plans:\n"
                       "  xor       a 2-4-1 tanh/sigmoid network learns XOR (Adam, mean squared error)\n"
                       "  linear    linear regression on generated data with known coefficients (SGD)\n"
                       "  logistic  logistic regression as two-class softmax regression (SGD with momentum)",
                       "xor|linear|logistic [options]");
    parser.positionals("PROBLEM", "xor, linear or logistic", 1, 1).common(true);
    parser.parse(argc, argv);
    const std::string problem = parser.positional()[0];
    if (problem != "xor" && problem != "linear" && problem != "logistic") {
      throw UsageError("unknown problem '" + problem + "' (xor, linear or logistic)");
    }
    const Context context(parser.contextOptions());
    const bool json = parser.has("json");
    if (problem == "xor") {
      const XorResult r = trainXor(context);
      if (json) {
        std::cout << nlohmann::json{{"steps", r.steps}, {"loss", r.loss}, {"outputs", r.outputs}, {"solved", r.solved()}}.dump(2) << "\n";
      } else {
        std::printf("xor: %d steps, final loss %.6f, %s\n", r.steps, r.loss, r.solved() ? "solved" : "NOT solved");
        const char* inputs[] = {"0 0", "0 1", "1 0", "1 1"};
        for (std::size_t i = 0; i < 4; ++i) std::printf("  %s -> %.4f\n", inputs[i], r.outputs[i]);
      }
      return r.solved() ? 0 : 1;
    }
    const RegressionResult r = problem == "linear" ? trainLinearRegression(context) : trainLogisticRegression(context);
    if (json) {
      std::cout << toJson(r).dump(2) << "\n";
    } else {
      printRegression(problem == "linear" ? "linear regression" : "logistic regression", r);
    }
    return 0;
  });
}
