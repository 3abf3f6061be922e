#include "graph/CompiledGraph.h"
#include "graph/InferenceOps.h"
#include "graph/MemoryPlan.h"
#include "graph/Ops.h"
#include "ops/Winograd.h"
#include "graph/ReferenceGraph.h"
#include "support/Compare.h"
#include "support/GlContext.h"
#include "support/Random.h"

#include <doctest/doctest.h>

using namespace glnet;

namespace {

// A chain with a residual branch and a view: x → a → b → (view) → c = a + b' → d, and e = relu(d).
struct Residual {
  Graph graph;
  Tensor x, a, b, view, c, d, e;
  Residual() {
    x = graph.input("x", {2, 3, 5, 7});
    a = graph.apply(pointwiseOp({PointwiseKind::tanh}), {x}, "a");
    b = graph.apply(pointwiseOp({PointwiseKind::sigmoid}), {a}, "b");
    view = graph.apply(reshapeOp({2, 105}), {b}, "view");
    const Tensor back = graph.apply(reshapeOp({2, 3, 5, 7}), {view}, "back");
    c = graph.apply(broadcastOp(BinaryKind::add), {a, back}, "c");
    d = graph.apply(pointwiseOp({PointwiseKind::negate}), {c}, "d");
    e = graph.apply(pointwiseOp({PointwiseKind::relu}), {d}, "e");
  }
};

}  // namespace

TEST_CASE("the memory plan shares bytes only between tensors that are never alive together") {
  const Residual r;
  const MemoryPlan plan = planMemory(r.graph, {}, 256);
  const std::size_t slot = (2 * 3 * 5 * 7 * 4 + 255) / 256 * 256;
  const auto at = [&](Tensor t) { return *plan.offset[static_cast<std::size_t>(plan.storage[static_cast<std::size_t>(t.id)])]; };
  CHECK(plan.storage[static_cast<std::size_t>(r.view.id)] == r.b.id);  // a view is its source's memory
  CHECK(at(r.a) != at(r.b));                                            // a is read by c, after b
  CHECK(at(r.c) != at(r.a));
  CHECK(at(r.c) != at(r.b));                                            // c is written while a and b are read
  CHECK(at(r.d) != at(r.c));
  CHECK(!plan.offset[static_cast<std::size_t>(r.e.id)]);  // the result has memory of its own
  CHECK(plan.keptBytes == 5 * slot);
  CHECK(plan.resultBytes == slot);
  CHECK(plan.arenaBytes == 3 * slot);  // a, b and c are alive together at c's op; nothing needs more
  const MemoryPlan keeping = planMemory(r.graph, {r.a, r.d}, 256);
  CHECK(!keeping.offset[static_cast<std::size_t>(r.a.id)]);
  CHECK(!keeping.offset[static_cast<std::size_t>(r.d.id)]);
  CHECK(keeping.resultBytes == 3 * slot);
  CHECK(keeping.arenaBytes == 2 * slot);  // b and c
}

TEST_CASE("an op's scratch takes arena bytes only while the op runs") {
  const Residual r;
  const std::size_t slot = (2 * 3 * 5 * 7 * 4 + 255) / 256 * 256;
  // Ops: a (0), b (1), view (2), back (3), c (4), d (5), e (6). b's scratch: a and b are alive then, c not yet.
  std::vector<std::size_t> scratch(r.graph.ops().size(), 0);
  scratch[1] = 1000;  // rounded up to 1024
  const MemoryPlan plan = planMemory(r.graph, {}, 256, scratch);
  const auto at = [&](Tensor t) { return *plan.offset[static_cast<std::size_t>(plan.storage[static_cast<std::size_t>(t.id)])]; };
  REQUIRE(plan.scratchOffset[1].has_value());
  CHECK_FALSE(plan.scratchOffset[0].has_value());
  const std::size_t begin = *plan.scratchOffset[1], end = begin + 1024;
  for (const Tensor alive : {r.a, r.b}) CHECK((end <= at(alive) || at(alive) + slot <= begin));
  CHECK(plan.arenaBytes == std::max<std::size_t>(3 * slot, 2 * slot + 1024));
}

TEST_CASE("only a convolution whose weights an inference graph prepares asks for Winograd's scratch") {
  const ForcedConvAlgorithm winograd(ConvAlgorithm::winograd);
  Graph graph;
  const Tensor x = graph.input("x", {2, 4, 9, 9});
  const Tensor w = graph.parameter("w", {6, 4, 3, 3}, std::vector<float>(6 * 4 * 9, 0.5f));
  const Tensor b = graph.parameter("b", {6}, std::vector<float>(6, 0.0f));
  const Tensor fed = graph.input("fed", {6, 6, 3, 3});
  const Tensor y = graph.apply(conv2dOp(Activation::relu, 1), {x, w, b});
  graph.apply(conv2dOp(Activation::none, 1), {y, fed, b});
  const std::vector<std::size_t> scratch = inferenceScratchBytes(graph);
  REQUIRE(scratch.size() == 2);
  CHECK(scratch[0] == WinogradConvOp::scratchBytes({2, 4, 9, 9, 6, 3, 3, 1}));
  CHECK(scratch[1] == 0);  // weights fed as an input: nothing to prepare, the implicit GEMM
  CHECK(planMemory(graph, {}, 256, scratch).scratchOffset[0].has_value());
}

TEST_SUITE("gl") {
  TEST_CASE("an inference graph with reused memory computes what it does with every tensor kept") {
    Context& context = test::glContext();
    const Residual r;
    auto random = test::generator(610);
    const std::vector<float> x = test::uniformFloats(random, 2 * 3 * 5 * 7, -2, 2);
    CompiledGraph reused(context, r.graph, CompiledGraph::Memory::reused, {r.d});
    CHECK(CompiledGraph(context, r.graph, CompiledGraph::Memory::reused).activationBytes() < CompiledGraph(context, r.graph).activationBytes());
    Plan plan = reused.forwardPlan([](Plan&) {});
    reused.upload(r.x, x.data(), x.size() * sizeof(float));
    plan.run();
    const std::vector<std::vector<double>> reference = referenceValues(r.graph, {{r.x.id, test::widen(x)}});
    for (const Tensor t : {r.d, r.e}) {
      std::vector<float> out(2 * 3 * 5 * 7);
      const BufferView view = reused.view(t);
      plan.read(*view.buffer, out.data(), out.size() * sizeof(float), view.offset);
      test::checkClose(out, reference[static_cast<std::size_t>(t.id)], 1e-6, 1e-5);
    }
  }
}
