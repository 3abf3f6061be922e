#include "graph/CompiledGraph.h"
#include "graph/InferenceOps.h"
#include "graph/MemoryPlan.h"
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
