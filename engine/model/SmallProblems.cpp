#include "model/SmallProblems.h"

#include "graph/CompiledGraph.h"

#include <cmath>
#include <random>

namespace glnet {
namespace {

std::vector<float> uniform(std::mt19937& random, std::size_t count, float bound) {
  std::uniform_real_distribution<float> distribution(-bound, bound);
  std::vector<float> values(count);
  for (float& value : values) value = distribution(random);
  return values;
}

// Replays the training plan `steps` times with no read-back in between; returns the last step's loss.
double train(CompiledGraph& compiled, int steps) {
  Plan plan = compiled.trainingPlan([](Plan&) {});
  for (int step = 1; step <= steps; ++step) {
    if (step == steps) compiled.resetTotals();
    plan.setParameter(CompiledGraph::stepParameter, static_cast<std::uint32_t>(step));
    plan.run();
  }
  return compiled.readTotals()[0] / compiled.rows();
}

}  // namespace

bool XorResult::solved() const {
  const float expected[4] = {0, 1, 1, 0};
  for (std::size_t i = 0; i < 4; ++i) {
    if (std::abs(outputs[i] - expected[i]) > 0.1f) return false;
  }
  return true;
}

XorResult trainXor(const Context& context, std::uint32_t seed, int steps) {
  std::mt19937 random(seed);
  Graph g;
  const Tensor x = g.input("x", {4, 2});
  const Tensor target = g.input("target", {4, 1});
  const Tensor hidden = g.dense(x, g.parameter("fc1.weight", {4, 2}, uniform(random, 8, 1.0f)),
                                g.parameter("fc1.bias", {4}, uniform(random, 4, 1.0f)), Activation::tanh);
  const Tensor y = g.dense(hidden, g.parameter("fc2.weight", {1, 4}, uniform(random, 4, 1.0f)),
                           g.parameter("fc2.bias", {1}, uniform(random, 1, 1.0f)), Activation::sigmoid);
  const Tensor loss = g.apply(meanSquaredErrorOp(), {y, target});
  CompiledGraph compiled(context, g, loss, {}, {OptimizerKind::adam, 0.05f});
  const std::vector<float> inputs = {0, 0, 0, 1, 1, 0, 1, 1}, targets = {0, 1, 1, 0};
  compiled.upload(x, inputs.data(), inputs.size() * 4);
  compiled.upload(target, targets.data(), targets.size() * 4);
  XorResult result;
  result.steps = steps;
  result.loss = train(compiled, steps);
  // One more forward pass reads the outputs of the trained network.
  Plan forward = compiled.forwardPlan([](Plan&) {});
  forward.run();
  result.outputs.resize(4);
  forward.read(*compiled.view(y).buffer, result.outputs.data(), 16);
  return result;
}

RegressionResult trainLinearRegression(const Context& context, std::uint32_t seed, int steps) {
  std::mt19937 random(seed);
  const std::uint32_t samples = 512, features = 3;
  RegressionResult result{{1.5, -2.0, 0.7}, 0.3, {}, 0, 0, steps};
  std::normal_distribution<double> noise(0.0, 0.01);
  const std::vector<float> xs = uniform(random, samples * features, 1.0f);
  std::vector<float> ys(samples);
  for (std::size_t s = 0; s < samples; ++s) {
    double y = result.trueIntercept + noise(random);
    for (std::size_t f = 0; f < features; ++f) y += result.trueCoefficients[f] * xs[s * features + f];
    ys[s] = static_cast<float>(y);
  }
  Graph g;
  const Tensor x = g.input("x", {samples, features});
  const Tensor target = g.input("y", {samples, 1});
  const Tensor w = g.parameter("weight", {1, features}, std::vector<float>(features, 0.0f));
  const Tensor b = g.parameter("bias", {1}, {0.0f});
  const Tensor loss = g.apply(meanSquaredErrorOp(), {g.dense(x, w, b, Activation::none), target});
  CompiledGraph compiled(context, g, loss, {}, {OptimizerKind::sgd, 0.5f});
  compiled.upload(x, xs.data(), xs.size() * 4);
  compiled.upload(target, ys.data(), ys.size() * 4);
  result.loss = train(compiled, steps);
  const auto parameters = compiled.readParameters();
  result.coefficients.assign(parameters[0].begin(), parameters[0].end());
  result.intercept = parameters[1][0];
  return result;
}

RegressionResult trainLogisticRegression(const Context& context, std::uint32_t seed, int steps) {
  std::mt19937 random(seed);
  const std::uint32_t samples = 4096, features = 2;
  RegressionResult result{{2.0, -1.0}, 0.5, {}, 0, 0, steps};
  const std::vector<float> xs = uniform(random, samples * features, 2.0f);
  std::vector<std::uint32_t> labels(samples);
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  for (std::size_t s = 0; s < samples; ++s) {
    double z = result.trueIntercept;
    for (std::size_t f = 0; f < features; ++f) z += result.trueCoefficients[f] * xs[s * features + f];
    labels[s] = coin(random) < 1.0 / (1.0 + std::exp(-z)) ? 1 : 0;
  }
  Graph g;
  const Tensor x = g.input("x", {samples, features});
  const Tensor y = g.indexInput("label", {samples});
  const Tensor w = g.parameter("weight", {2, features}, std::vector<float>(2 * features, 0.0f));
  const Tensor b = g.parameter("bias", {2}, {0.0f, 0.0f});
  const Tensor loss = g.apply(softmaxCrossEntropyOp(), {g.dense(x, w, b, Activation::none), y});
  CompiledGraph compiled(context, g, loss, {}, {OptimizerKind::momentum, 0.5f});
  compiled.upload(x, xs.data(), xs.size() * 4);
  compiled.upload(y, labels.data(), labels.size() * 4);
  result.loss = train(compiled, steps);
  const auto parameters = compiled.readParameters();
  for (std::size_t f = 0; f < features; ++f) result.coefficients.push_back(parameters[0][features + f] - parameters[0][f]);
  result.intercept = parameters[1][1] - parameters[1][0];
  return result;
}

}  // namespace glnet
