#include "graph/CompiledGraph.h"
#include "graph/ReferenceGraph.h"
#include "model/Network.h"
#include "model/Schedule.h"
#include "support/Compare.h"
#include "support/GlContext.h"
#include "support/Random.h"

#include <doctest/doctest.h>

#include <array>
#include <cmath>

using namespace glnet;

namespace {

using test::widen;

std::vector<float> randomParameter(std::mt19937& random, std::size_t count) { return test::uniformFloats(random, count, -0.5f, 0.5f); }

// Trains `model` for `steps` steps of random batches on the GPU and in float64, checking the loss and the
// correct count of every step and the parameters at the end.
// With a schedule, each step's learning rate is its (settings.learningRate is the first).
void trainAgainstReference(const Network& model, std::uint32_t batch, const OptimizerSettings& settings, int steps,
                           std::uint32_t stream, const LearningRateSchedule* schedule = nullptr) {
  Context& context = test::glContext();
  auto random = test::generator(stream);
  const std::size_t inputs = model.inputs();
  const std::uint32_t classes = model.classes();
  const NetworkGraph mlp = buildGraph(model, batch);
  CompiledGraph compiled(context, mlp.graph, mlp.loss, {mlp.correct}, settings);
  Plan plan = compiled.trainingPlan([](Plan&) {});
  std::vector<std::vector<double>> parameters;
  for (const Tensor& t : mlp.graph.parameters()) parameters.push_back(widen(mlp.graph.tensor(t).initial));
  std::vector<std::vector<std::vector<double>>> state;
  for (int step = 1; step <= steps; ++step) {
    CAPTURE(step);
    const auto images = test::uniformFloats(random, batch * inputs, 0, 1);
    std::vector<std::uint32_t> labels(batch);
    for (auto& label : labels) label = random() % classes;
    compiled.upload(mlp.images, images.data(), images.size() * 4);
    compiled.upload(mlp.labels, labels.data(), labels.size() * 4);
    compiled.resetTotals();
    plan.setParameter(CompiledGraph::stepParameter, static_cast<std::uint32_t>(step));
    OptimizerSettings stepSettings = settings;
    if (schedule) {
      stepSettings.learningRate = static_cast<float>(schedule->at(static_cast<std::uint64_t>(step)));
      CompiledGraph::setLearningRate(plan, stepSettings.learningRate);
    }
    plan.run();
    const std::vector<double> totals = compiled.readTotals();
    const ReferencePass pass = runReference(mlp.graph, mlp.loss,
                                            {{mlp.images.id, widen(images)}, {mlp.labels.id, std::vector<double>(labels.begin(), labels.end())}},
                                            parameters);
    double referenceLoss = 0, referenceCorrect = 0;
    for (const double value : pass.values[static_cast<std::size_t>(mlp.loss.id)]) referenceLoss += value;
    for (const double value : pass.values[static_cast<std::size_t>(mlp.correct.id)]) referenceCorrect += value;
    CHECK(totals[0] / batch == doctest::Approx(referenceLoss / batch).epsilon(1e-4));
    CHECK(totals[1] == referenceCorrect);
    referenceUpdate(mlp.graph, pass, stepSettings, step, parameters, state);
  }
  const auto gpuParameters = compiled.readParameters();
  for (std::size_t p = 0; p < parameters.size(); ++p) {
    // State (batch normalization's running statistics) has no float64 reference pass; GradientTest checks its update.
    if (!mlp.graph.tensor(mlp.graph.parameters()[p]).needsGradient) continue;
    CAPTURE(mlp.graph.tensor(mlp.graph.parameters()[p]).name);
    test::checkClose(gpuParameters[p], parameters[p], 1e-5, 1e-3);
  }
}

}  // namespace

TEST_SUITE("gl") {
  TEST_CASE("gradients accumulate where a tensor feeds several ops, on the GPU as in the reference") {
    Context& context = test::glContext();
    auto random = test::generator(50);
    Graph g;
    const Tensor x = g.input("x", {9, 6});
    const Tensor target = g.input("target", {9, 4});
    const Tensor w1 = g.parameter("w1", {5, 6}, randomParameter(random, 30));
    const Tensor b1 = g.parameter("b1", {5}, randomParameter(random, 5));
    const Tensor w2 = g.parameter("w2", {4, 5}, randomParameter(random, 20));
    const Tensor w3 = g.parameter("w3", {4, 5}, randomParameter(random, 20));
    const Tensor b3 = g.parameter("b3", {4}, randomParameter(random, 4));
    const Tensor h = g.dense(x, w1, b1, Activation::tanh);        // h feeds three ops
    const Tensor a = g.apply(matMulOp(), {h, w2});
    const Tensor b = g.apply(biasAddOp(), {g.apply(matMulOp(), {h, w3}), b3});
    const Tensor s = g.apply(addOp(), {a, b});
    const Tensor m = g.apply(multiplyOp(), {s, a});                // a feeds two ops
    const Tensor doubled = g.apply(addOp(Activation::relu), {m, m});  // one gradient for both inputs of an add
    const Tensor y = g.apply(activationOp(Activation::sigmoid), {doubled});
    const Tensor loss = g.apply(meanSquaredErrorOp(), {y, target});
    const Tensor unused = g.parameter("unused", {3}, {1, 2, 3});  // no gradient reaches it
    (void)unused;

    const auto xValues = test::uniformFloats(random, 54), targetValues = test::uniformFloats(random, 36, 0, 1);
    CompiledGraph compiled(context, g, loss, {}, {OptimizerKind::sgd, 0.5f});
    compiled.upload(x, xValues.data(), xValues.size() * 4);
    compiled.upload(target, targetValues.data(), targetValues.size() * 4);
    Plan plan = compiled.trainingPlan([](Plan&) {});
    plan.run();
    const auto gradients = compiled.readGradients();
    const auto parameters = compiled.readParameters();

    const ReferencePass pass = runReference(g, loss, {{x.id, widen(xValues)}, {target.id, widen(targetValues)}});
    const std::vector<Tensor> list = g.parameters();
    REQUIRE(gradients.size() == list.size());
    for (std::size_t p = 0; p < list.size(); ++p) {
      CAPTURE(g.tensor(list[p]).name);
      const auto& expected = pass.gradients[static_cast<std::size_t>(list[p].id)];
      // fp32 through six ops on O(1) values: 1e-6 absolute, 1e-4 relative.
      test::checkClose(gradients[p], expected.empty() ? std::vector<double>(gradients[p].size(), 0.0) : expected, 1e-6, 1e-4);
      std::vector<double> updated = widen(g.tensor(list[p]).initial);
      for (std::size_t k = 0; k < updated.size(); ++k) updated[k] -= 0.5 * (expected.empty() ? 0.0 : expected[k]);
      test::checkClose(parameters[p], updated, 1e-6, 1e-5);
    }
  }

  TEST_CASE("a small CNN (conv, pool, flatten view, dense) trains on the GPU like the float64 reference") {
    Context& context = test::glContext();
    auto random = test::generator(53);
    Graph g;
    const std::uint32_t batch = 5;
    const Tensor x = g.input("x", {batch, 2, 9, 8});
    const Tensor labels = g.indexInput("labels", {batch});
    const Tensor c1 = g.apply(conv2dOp(Activation::relu, 1), {x, g.parameter("conv1.weight", {4, 2, 3, 3}, randomParameter(random, 72)),
                                                             g.parameter("conv1.bias", {4}, randomParameter(random, 4))});
    const Tensor p1 = g.apply(maxPoolOp(), {c1});  // [5, 4, 4, 4]
    const Tensor c2 = g.apply(conv2dOp(Activation::tanh, 0), {p1, g.parameter("conv2.weight", {3, 4, 2, 2}, randomParameter(random, 48)),
                                                             g.parameter("conv2.bias", {3}, randomParameter(random, 3))});
    const Tensor flat = g.apply(flattenOp(), {c2});  // [5, 27]
    const Tensor logits = g.dense(flat, g.parameter("fc1.weight", {6, 27}, randomParameter(random, 162)),
                                  g.parameter("fc1.bias", {6}, randomParameter(random, 6)), Activation::none);
    const Tensor loss = g.apply(softmaxCrossEntropyOp(), {logits, labels});
    const OptimizerSettings settings{OptimizerKind::sgd, 0.5f};
    CompiledGraph compiled(context, g, loss, {}, settings);
    Plan plan = compiled.trainingPlan([](Plan&) {});
    std::vector<std::vector<double>> parameters;
    for (const Tensor& t : g.parameters()) parameters.push_back(widen(g.tensor(t).initial));
    std::vector<std::vector<std::vector<double>>> state;
    for (int step = 1; step <= 3; ++step) {
      CAPTURE(step);
      const auto images = test::uniformFloats(random, batch * 2 * 9 * 8);
      std::vector<std::uint32_t> classes(batch);
      for (auto& label : classes) label = random() % 6;
      compiled.upload(x, images.data(), images.size() * 4);
      compiled.upload(labels, classes.data(), classes.size() * 4);
      compiled.resetTotals();
      plan.run();
      const ReferencePass pass =
          runReference(g, loss, {{x.id, widen(images)}, {labels.id, std::vector<double>(classes.begin(), classes.end())}}, parameters);
      double referenceLoss = 0;
      for (const double value : pass.values[static_cast<std::size_t>(loss.id)]) referenceLoss += value;
      CHECK(compiled.readTotals()[0] / batch == doctest::Approx(referenceLoss / batch).epsilon(1e-4));
      const auto gradients = compiled.readGradients();
      for (std::size_t p = 0; p < gradients.size(); ++p) {
        test::checkClose(gradients[p], pass.gradients[static_cast<std::size_t>(g.parameters()[p].id)], 1e-5, 1e-3);
      }
      referenceUpdate(g, pass, settings, step, parameters, state);
    }
  }

  TEST_CASE("a 784-128-10 MLP at batch 64 trains like the reference (parameters large enough for every upload path)") {
    trainAgainstReference(Network::create("784-128-10", Activation::relu, 3), 64, {OptimizerKind::sgd, 0.1f}, 3, 52);
  }

  TEST_CASE("a described network with batch normalization, a strided residual block, a concatenation and every pooling trains like the reference (activations fused into them, the block's add and ReLU into its shortcut's normalization)") {
    const NetDescription description = parseNetDescription(R"({"input": [3, 9, 8], "layers": [
        {"name": "stem", "kind": "conv", "outputs": 4, "kernel": 3},
        {"name": "stem.bn", "kind": "batchnorm", "momentum": 0.5},
        {"name": "stem.relu", "kind": "relu"},
        {"name": "down.conv", "kind": "conv", "outputs": 6, "kernel": 3, "stride": 2},
        {"name": "down.bn", "kind": "batchnorm"},
        {"name": "down.relu", "kind": "tanh"},
        {"name": "down.conv2", "kind": "conv", "outputs": 6, "kernel": 3, "activation": "sigmoid"},
        {"name": "shortcut", "kind": "conv", "outputs": 6, "kernel": 1, "stride": 2, "inputs": ["stem.relu"]},
        {"name": "shortcut.bn", "kind": "batchnorm"},
        {"name": "sum", "kind": "add", "inputs": ["down.conv2", "shortcut.bn"]},
        {"name": "sum.relu", "kind": "relu"},
        {"name": "joined.channels", "kind": "concat", "inputs": ["sum.relu", "shortcut", "sum.relu"]},
        {"name": "max", "kind": "maxpool", "kernel": 3, "stride": 1, "padding": 1},
        {"name": "average", "kind": "avgpool", "kernel": 2},
        {"name": "global", "kind": "globalavgpool", "inputs": ["sum.relu"]},
        {"name": "joined", "kind": "add", "inputs": ["global", "global"]},
        {"name": "hidden", "kind": "dense", "outputs": 7, "activation": "relu", "inputs": ["average"]},
        {"name": "head", "kind": "dense", "outputs": 5}]})",
                                                           "test net");
    // Not Adam: a bias before a batch normalization has a zero gradient, whose rounding noise Adam would scale up to
    // full steps of random sign on either side.
    for (const OptimizerKind kind : {OptimizerKind::sgd, OptimizerKind::momentum}) {
      CAPTURE(optimizerName(kind));
      trainAgainstReference(Network::fromDescription(description, 5, "test net"), 6, {kind, 0.1f}, 5, 53);
    }
  }

  TEST_CASE("weight decay on the weights alone, Nesterov momentum, AdamW, gradient clipping and a schedule follow the reference") {
    const Network model = Network::create("23-17-5", Activation::tanh, 9);
    const auto settings = [](OptimizerKind kind, float rate) {
      OptimizerSettings s{kind, rate};
      s.weightDecay = 0.05f;
      return s;
    };
    OptimizerSettings nesterov = settings(OptimizerKind::momentum, 0.1f);
    nesterov.nesterov = true;
    OptimizerSettings clipped = settings(OptimizerKind::sgd, 0.5f);
    clipped.clipNorm = 0.05f;  // below the gradients' norm, so that every step clips
    OptimizerSettings adamw = settings(OptimizerKind::adamw, 0.01f);
    adamw.weightDecay = 0.2f;
    LearningRateSchedule cosine{ScheduleKind::cosine, 0.1, 3, 10};
    for (const auto& [name, s] : std::vector<std::pair<std::string, OptimizerSettings>>{
             {"sgd + L2", settings(OptimizerKind::sgd, 0.1f)}, {"nesterov + L2", nesterov}, {"adam + L2", settings(OptimizerKind::adam, 0.01f)},
             {"adamw", adamw}, {"clipped", clipped}}) {
      CAPTURE(name);
      trainAgainstReference(model, 13, s, 10, 54);
    }
    CAPTURE("momentum, warm-up then cosine");
    trainAgainstReference(model, 13, {OptimizerKind::momentum, 0.1f}, 10, 55, &cosine);
  }

  TEST_CASE("ten training steps of a small MLP match the float64 reference losses step by step") {
    for (const OptimizerKind kind : {OptimizerKind::sgd, OptimizerKind::momentum, OptimizerKind::adam}) {
      CAPTURE(optimizerName(kind));
      trainAgainstReference(Network::create("23-17-5", Activation::relu, 7), 13,
                            {kind, kind == OptimizerKind::adam ? 0.01f : 0.1f}, 10, 51);
    }
  }

  TEST_CASE("an inference graph ending in a row softmax (an imported model's last layer) matches the float64 reference") {
    Context& context = test::glContext();
    auto random = test::generator(41);
    for (const auto& [rows, inputs, classes] : {std::array<std::uint32_t, 3>{1, 3, 1}, {7, 19, 10}, {33, 5, 1001}}) {
      CAPTURE(rows);
      CAPTURE(classes);
      Graph graph;
      const Tensor x = graph.input("x", {rows, inputs});
      const Tensor logits = graph.dense(x, graph.parameter("w", {classes, inputs}, randomParameter(random, std::size_t{classes} * inputs)),
                                        graph.parameter("b", {classes}, randomParameter(random, classes)), Activation::none);
      const Tensor y = graph.apply(softmaxOp(), {logits});
      CompiledGraph compiled(context, graph);
      Plan plan = compiled.forwardPlan([](Plan&) {});
      const std::vector<float> values = test::uniformFloats(random, std::size_t{rows} * inputs, -4, 4);
      compiled.upload(x, values.data(), values.size() * sizeof(float));
      const BufferView out = compiled.view(y);
      std::vector<float> result(std::size_t{rows} * classes, NAN);
      compiled.upload(y, result.data(), result.size() * sizeof(float));  // poisoned: an unwritten element fails
      plan.run();
      plan.read(*out.buffer, result.data(), result.size() * sizeof(float), out.offset);
      const std::vector<std::vector<double>> reference = referenceValues(graph, {{x.id, widen(values)}});
      // float32 exponentials and sums of up to 1001 terms against float64.
      test::checkClose(result, reference[static_cast<std::size_t>(y.id)], 1e-6, 1e-4);
    }
  }
}
