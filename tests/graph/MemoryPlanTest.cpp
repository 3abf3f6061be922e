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

#include <algorithm>
#include <map>
#include <tuple>

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

// Two branches read x, a fire module's pair of convolutions, joined along the channels and read by a third:
// e1 = relu(conv1x1(s)), e3 = relu(conv3x3(s)), c = concat(e1, e3), y = tanh(c), where s = relu(conv1x1(x)).
struct Fire {
  Graph graph;
  Tensor x, s, e1, e3, c, y;
  explicit Fire(std::uint32_t batch, std::uint32_t planes) {
    auto random = test::generator(611);
    const auto weights = [&](const char* name, Shape shape) {
      return graph.parameter(name, shape, test::uniformFloats(random, elementCount(shape), -0.5f, 0.5f));
    };
    x = graph.input("x", {batch, 3, planes, planes});
    s = graph.apply(conv2dOp(Activation::relu, 0), {x, weights("ws", {4, 3, 1, 1}), weights("bs", {4})}, "s");
    e1 = graph.apply(conv2dOp(Activation::relu, 0), {s, weights("w1", {6, 4, 1, 1}), weights("b1", {6})}, "e1");
    e3 = graph.apply(conv2dOp(Activation::relu, 1), {s, weights("w3", {5, 4, 3, 3}), weights("b3", {5})}, "e3");
    c = graph.apply(concatOp(1), {e1, e3}, "c");
    y = graph.apply(pointwiseOp({PointwiseKind::tanh}), {c}, "y");
  }
};

// A DenseNet block: each layer reads all the features so far, joined again: c1 = [x0], f1 = tanh(conv(c1)),
// c2 = [x0, f1], f2 = sigmoid(conv(c2)), c3 = [x0, f1, f2], y = relu(c3).
struct DenseBlock {
  Graph graph;
  Tensor x, x0, c1, f1, c2, f2, c3, y;
  explicit DenseBlock(std::uint32_t batch) {
    auto random = test::generator(613);
    const auto weights = [&](const char* name, Shape shape) {
      return graph.parameter(name, shape, test::uniformFloats(random, elementCount(shape), -0.5f, 0.5f));
    };
    x = graph.input("x", {batch, 4, 8, 8});
    x0 = graph.apply(pointwiseOp({PointwiseKind::negate}), {x}, "x0");
    c1 = graph.apply(concatOp(1), {x0}, "c1");
    f1 = graph.apply(conv2dOp(Activation::tanh, 1), {c1, weights("w1", {8, 4, 3, 3}), weights("b1", {8})}, "f1");
    c2 = graph.apply(concatOp(1), {x0, f1}, "c2");
    f2 = graph.apply(conv2dOp(Activation::sigmoid, 1), {c2, weights("w2", {8, 12, 3, 3}), weights("b2", {8})}, "f2");
    c3 = graph.apply(concatOp(1), {x0, f1, f2}, "c3");
    y = graph.apply(pointwiseOp({PointwiseKind::relu}), {c3}, "y");
  }
};

// Ops that may overwrite an input, in a chain: a = relu(conv(x)), q = conv(a), r = conv(q) + a (a's last reader),
// n = batch norm(r), f = n viewed as [N, 144], d = dense(f), e = dense(d) + f, s = e + e, t = tanh(s), u = t + s,
// y = -u. r, n and e can take a's memory in turn; s cannot take e's (both its inputs are e); t cannot take s's (u
// reads s after it); u can take t's.
struct InPlaceChain {
  Graph graph;
  Tensor x, a, q, r, n, f, d, e, s, t, u, y;
  InPlaceChain() {
    auto random = test::generator(615);
    const auto weights = [&](const char* name, Shape shape, float low = -0.3f, float high = 0.3f) {
      return graph.parameter(name, shape, test::uniformFloats(random, elementCount(shape), low, high));
    };
    x = graph.input("x", {2, 3, 6, 6});
    a = graph.apply(conv2dOp(Activation::relu, 1), {x, weights("wa", {4, 3, 3, 3}), weights("ba", {4})}, "a");
    q = graph.apply(conv2dOp(Activation::none, 1), {a, weights("wq", {4, 4, 3, 3}), weights("bq", {4})}, "q");
    r = graph.apply(conv2dResidualOp(1), {q, weights("wr", {4, 4, 3, 3}), weights("br", {4}), a}, "r");
    n = graph.apply(batchNormOp(false), {r, weights("gamma", {4}), weights("beta", {4}), weights("mean", {4}), weights("var", {4}, 0.5f, 2.0f)}, "n");
    f = graph.apply(reshapeOp({2, 144}), {n}, "f");
    d = graph.dense(f, weights("w1", {144, 144}, -0.1f, 0.1f), weights("b1", {144}), Activation::none);
    e = graph.apply(denseResidualOp(), {d, weights("w2", {144, 144}, -0.1f, 0.1f), weights("b2", {144}), f}, "e");
    s = graph.apply(broadcastOp(BinaryKind::add), {e, e}, "s");
    t = graph.apply(pointwiseOp({PointwiseKind::tanh}), {s}, "t");
    u = graph.apply(broadcastOp(BinaryKind::add), {t, s}, "u");
    y = graph.apply(pointwiseOp({PointwiseKind::negate}), {u}, "y");
  }
};

// Runs `graph` with reused memory on input x, each of `poisoned` set to NaN first (an element left unwritten then
// fails), and checks each of `checked` against float64. Returns the plan's labels.
std::vector<std::string> runReused(const Graph& graph, Tensor x, const std::vector<float>& values, const std::vector<Tensor>& poisoned,
                                   const std::vector<Tensor>& checked) {
  const std::vector<std::vector<double>> reference = referenceValues(graph, {{x.id, test::widen(values)}});
  CompiledGraph compiled(test::glContext(), graph, CompiledGraph::Memory::reused);
  Plan plan = compiled.forwardPlan([](Plan&) {});
  for (const Tensor t : poisoned) {
    const std::vector<std::uint32_t> poison(elementCount(graph.tensor(t).shape), test::nanPoison);
    compiled.upload(t, poison.data(), poison.size() * sizeof(float));
  }
  compiled.upload(x, values.data(), values.size() * sizeof(float));
  plan.run();
  for (const Tensor t : checked) {
    CAPTURE(graph.tensor(t).name);
    std::vector<float> out(elementCount(graph.tensor(t).shape));
    const BufferView view = compiled.view(t);
    plan.read(*view.buffer, out.data(), out.size() * sizeof(float), view.offset);
    test::checkClose(out, reference[static_cast<std::size_t>(t.id)], 1e-6, 1e-5);
  }
  return plan.labels();
}

std::size_t concatCopies(const std::vector<std::string>& labels) {
  return static_cast<std::size_t>(std::count_if(labels.begin(), labels.end(), [](const std::string& l) { return l.find("concat") != std::string::npos; }));
}

}  // namespace

TEST_CASE("a DenseNet block's concatenations at batch 1 are each the start of the next, the features written once") {
  const DenseBlock block(1);
  const MemoryPlan plan = planMemory(block.graph, {}, 256);
  const auto at = [&](Tensor t) { return plan.offset[static_cast<std::size_t>(t.id)]; };
  CHECK(plan.joined == std::vector<bool>{false, true, false, true, false, true, false});
  REQUIRE(at(block.c3).has_value());
  const std::size_t start = *at(block.c3), plane = 8 * 8 * 4;
  CHECK(at(block.c2) == start);
  CHECK(at(block.c1) == start);
  CHECK(at(block.x0) == start);
  CHECK(at(block.f1) == start + 4 * plane);
  CHECK(at(block.f2) == start + 12 * plane);
  const DenseBlock batched(2);
  const MemoryPlan apart = planMemory(batched.graph, {}, 256);
  CHECK(std::count(apart.joined.begin(), apart.joined.end(), true) == 0);
}

TEST_CASE("a concatenation at batch 1 is joined: its inputs lie in its output, each at its place there") {
  const auto at = [](const MemoryPlan& plan, Tensor t) { return plan.offset[static_cast<std::size_t>(t.id)]; };
  {
    const Fire fire(1, 4);  // parts of 6·16 and 5·16 floats: 384 and 320 bytes, multiples of 64 but not of 256
    const MemoryPlan plan = planMemory(fire.graph, {}, 64);
    REQUIRE(plan.joined.size() == fire.graph.ops().size());
    CHECK(plan.joined[3]);
    CHECK(std::count(plan.joined.begin(), plan.joined.end(), true) == 1);
    REQUIRE(at(plan, fire.c).has_value());
    CHECK(at(plan, fire.e1) == at(plan, fire.c));
    CHECK(at(plan, fire.e3) == *at(plan, fire.c) + 6 * 16 * 4);
    // s is alive while e1 and e3 are written, so it may not share their bytes (now c's).
    const std::size_t cBegin = *at(plan, fire.c), cEnd = cBegin + 11 * 16 * 4;
    CHECK((*at(plan, fire.s) + 4 * 16 * 4 <= cBegin || cEnd <= *at(plan, fire.s)));
    const MemoryPlan coarse = planMemory(fire.graph, {}, 256);
    CHECK_FALSE(coarse.joined[3]);  // e3 would start at byte 384: not a binding offset
    CHECK(at(coarse, fire.e1) != at(coarse, fire.c));
    const MemoryPlan keeping = planMemory(fire.graph, {fire.e3}, 64);
    CHECK_FALSE(keeping.joined[3]);  // e3 keeps memory of its own
  }
  {
    const Fire fire(2, 4);  // each image's channels apart: no longer one contiguous part per input
    const MemoryPlan plan = planMemory(fire.graph, {}, 64);
    CHECK(std::count(plan.joined.begin(), plan.joined.end(), true) == 0);
  }
  {
    Graph graph;  // one tensor in two concatenations: only the first is joined
    const Tensor x = graph.input("x", {1, 16});
    const Tensor a = graph.apply(pointwiseOp({PointwiseKind::tanh}), {x}, "a");
    const Tensor b = graph.apply(pointwiseOp({PointwiseKind::sigmoid}), {x}, "b");
    const Tensor ab = graph.apply(concatOp(1), {a, b}, "ab");
    const Tensor ba = graph.apply(concatOp(1), {b, a}, "ba");
    const Tensor aa = graph.apply(concatOp(1), {ab, ab}, "abab");
    graph.apply(concatOp(1), {ba, aa}, "all");
    const MemoryPlan plan = planMemory(graph, {}, 64);
    CHECK(plan.joined == std::vector<bool>{false, false, true, false, false, false});
  }
}

TEST_CASE("the memory plan shares bytes only between tensors that are never alive together, or in place") {
  const Residual r;
  const MemoryPlan plan = planMemory(r.graph, {}, 256);
  const std::size_t slot = (2 * 3 * 5 * 7 * 4 + 255) / 256 * 256;
  const auto at = [&](const MemoryPlan& p, Tensor t) { return *p.offset[static_cast<std::size_t>(p.storage[static_cast<std::size_t>(t.id)])]; };
  CHECK(plan.storage[static_cast<std::size_t>(r.view.id)] == r.b.id);  // a view is its source's memory
  CHECK(at(plan, r.a) != at(plan, r.b));                                // a is read by c, after b
  CHECK(at(plan, r.c) == at(plan, r.a));                                // c = a + b' in place of a, its last reader
  CHECK(at(plan, r.d) == at(plan, r.c));                                // and d = -c in place of c
  CHECK(!plan.offset[static_cast<std::size_t>(r.e.id)]);  // the result has memory of its own
  CHECK(plan.keptBytes == 5 * slot);
  CHECK(plan.resultBytes == slot);
  CHECK(plan.arenaBytes == 2 * slot);  // a and b are alive together at c's op; c and d lie in a
  const MemoryPlan keeping = planMemory(r.graph, {r.a, r.d}, 256);
  CHECK(!keeping.offset[static_cast<std::size_t>(r.a.id)]);
  CHECK(!keeping.offset[static_cast<std::size_t>(r.d.id)]);
  CHECK(at(keeping, r.c) == at(keeping, r.b));  // a is kept: c takes b's memory instead, through its view
  CHECK(keeping.resultBytes == 3 * slot);
  CHECK(keeping.arenaBytes == slot);
}

TEST_CASE("an op's output takes an input's memory only where nothing reads that input later and no other input lies in it") {
  const InPlaceChain c;
  const MemoryPlan plan = planMemory(c.graph, {}, 256);
  const auto at = [&](const MemoryPlan& p, Tensor t) { return *p.offset[static_cast<std::size_t>(p.storage[static_cast<std::size_t>(t.id)])]; };
  CHECK(at(plan, c.q) != at(plan, c.a));  // a is read after q (by r)
  for (const Tensor t : {c.r, c.n, c.e}) CHECK(at(plan, t) == at(plan, c.a));  // a conv's residual, a batch norm, a dense layer's residual
  CHECK(at(plan, c.d) != at(plan, c.a));  // f (n's view) is read after d
  CHECK(at(plan, c.s) != at(plan, c.e));  // both of s's inputs are e
  CHECK(at(plan, c.t) != at(plan, c.s));  // u reads s after t
  CHECK(at(plan, c.u) == at(plan, c.t));
  CHECK(plan.inPlaceOutputs == 4);  // r, n, e and u
  const MemoryPlan keepingA = planMemory(c.graph, {c.a}, 256);
  CHECK(at(keepingA, c.r) != at(keepingA, c.q));  // q is r's X, read by the GEMM: never overwritten by r
  CHECK(at(keepingA, c.n) == at(keepingA, c.r));
  const MemoryPlan keepingN = planMemory(c.graph, {c.n}, 256);
  CHECK(at(keepingN, c.e) != at(keepingN, c.a));  // e would lie in a kept tensor
  CHECK(at(keepingN, c.r) == at(keepingN, c.a));
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
  const std::vector<std::size_t> scratch = inferenceScratchBytes(graph, false);
  REQUIRE(scratch.size() == 2);
  CHECK(scratch[0] == WinogradConvOp::scratchBytes({2, 4, 9, 9, 6, 3, 3, 1}));
  CHECK(scratch[1] == 0);  // weights fed as an input: nothing to prepare, the implicit GEMM
  CHECK(planMemory(graph, {}, 256, scratch).scratchOffset[0].has_value());
  // With the workspaces, the implicit GEMM's is the second op's: its bytes whatever they are, the first's scratch alike.
  const std::vector<std::size_t> withWorkspaces = inferenceScratchBytes(graph, true);
  CHECK(withWorkspaces[0] == scratch[0]);
  CHECK(withWorkspaces[1] == graph.ops()[1].op->inferenceWorkspaceBytes({{2, 6, 9, 9}, {6, 6, 3, 3}, {6}}));
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

  TEST_CASE("ops' workspaces placed in the arena by liveness: two split dense layers and their sum agree with float64") {
    Context& context = test::glContext();
    auto random = test::generator(612);
    // 33 rows and a long sum: the rule splits each dense layer's sum, into partials in its workspace.
    Graph graph;
    const Tensor x = graph.input("x", {33, 2048});
    const auto parameter = [&](const char* name, const Shape& shape) {
      return graph.parameter(name, shape, test::uniformFloats(random, elementCount(shape), -0.05f, 0.05f));
    };
    const Tensor y = graph.dense(x, parameter("w1", {40, 2048}), parameter("b1", {40}), Activation::relu);
    const Tensor z = graph.dense(x, parameter("w2", {40, 2048}), parameter("b2", {40}), Activation::none);
    const Tensor out = graph.apply(broadcastOp(BinaryKind::add), {y, z}, "out");
    const std::vector<std::size_t> runBytes = inferenceScratchBytes(graph, true);
    REQUIRE(runBytes.size() == 3);
    REQUIRE(runBytes[0] > 0);
    REQUIRE(runBytes[1] > 0);
    CompiledGraph reused(context, graph, CompiledGraph::Memory::reused);
    // The two workspaces, never alive together and the largest blocks, share their bytes.
    const MemoryPlan plan = planMemory(graph, {out}, 256, runBytes);
    CHECK(plan.scratchOffset[0] == plan.scratchOffset[1]);
    const std::vector<float> xs = test::uniformFloats(random, 33 * 2048, -1, 1);
    Plan run = reused.forwardPlan([](Plan&) {});
    reused.upload(x, xs.data(), xs.size() * sizeof(float));
    run.run();
    const std::vector<std::vector<double>> reference = referenceValues(graph, {{x.id, test::widen(xs)}});
    std::vector<float> result(33 * 40);
    const BufferView view = reused.view(out);
    run.read(*view.buffer, result.data(), result.size() * sizeof(float), view.offset);
    test::checkClose(result, reference[static_cast<std::size_t>(out.id)], 1e-5, 1e-4);
  }

  TEST_CASE("a joined concatenation records no dispatch, and its producers' outputs and its readers' agree with float64") {
    for (const std::uint32_t batch : {1u, 3u}) {
      CAPTURE(batch);
      const Fire fire(batch, 8);  // parts of 6·64 and 5·64 floats: multiples of 256 bytes, so any device joins at batch 1
      auto random = test::generator(612);
      const std::vector<float> x = test::uniformFloats(random, batch * 3 * 8 * 8, -2, 2);
      const std::vector<std::string> labels = runReused(fire.graph, fire.x, x, {fire.s, fire.e1, fire.e3, fire.c}, {fire.e1, fire.e3, fire.c, fire.y});
      CHECK(concatCopies(labels) == (batch > 1 ? 1u : 0u));
    }
  }

  TEST_CASE("ops that write in place of an input (a convolution's and a dense layer's residual, a batch norm, adds) agree with float64") {
    const InPlaceChain c;
    auto random = test::generator(616);
    const std::vector<float> x = test::uniformFloats(random, 2 * 3 * 6 * 6, -2, 2);
    runReused(c.graph, c.x, x, {}, {c.y});
    // Each kept in turn: its value when nothing may overwrite it.
    for (const Tensor kept : {c.a, c.n, c.e, c.t}) {
      CAPTURE(c.graph.tensor(kept).name);
      const std::vector<std::vector<double>> reference = referenceValues(c.graph, {{c.x.id, test::widen(x)}});
      CompiledGraph compiled(test::glContext(), c.graph, CompiledGraph::Memory::reused, {kept});
      Plan plan = compiled.forwardPlan([](Plan&) {});
      compiled.upload(c.x, x.data(), x.size() * sizeof(float));
      plan.run();
      for (const Tensor t : {kept, c.y}) {
        std::vector<float> out(elementCount(c.graph.tensor(t).shape));
        const BufferView view = compiled.view(t);
        plan.read(*view.buffer, out.data(), out.size() * sizeof(float), view.offset);
        test::checkClose(out, reference[static_cast<std::size_t>(t.id)], 1e-5, 1e-4);
      }
    }
  }

  TEST_CASE("each op writing in place of an input, along each of its paths, agrees with float64") {
    auto random = test::generator(617);
    const auto parameter = [&](Graph& graph, const char* name, const Shape& shape, float low = -0.1f, float high = 0.1f) {
      return graph.parameter(name, shape, test::uniformFloats(random, elementCount(shape), low, high));
    };
    // `op` applied to its inputs, of which `taken` is source = -x (computed, read by nothing later) and `others` are
    // graph inputs or parameters; y = tanh(op's output). The op must write in place of the source, run the dispatch
    // that `label` names, and give y as float64 does.
    const auto check = [&](const char* what, const std::shared_ptr<const Op>& op, const Shape& shape, std::vector<Tensor> inputs, std::size_t taken,
                           Graph& graph, Tensor x, const std::string& label) {
      CAPTURE(what);
      const Tensor source = graph.apply(pointwiseOp({PointwiseKind::negate}), {x}, "source");
      inputs.insert(inputs.begin() + static_cast<std::ptrdiff_t>(taken), source);
      const Tensor written = graph.apply(op, inputs, "written");
      const Tensor y = graph.apply(pointwiseOp({PointwiseKind::tanh}), {written}, "y");
      std::map<int, std::vector<double>> feeds;
      std::vector<std::vector<float>> values;
      CompiledGraph compiled(test::glContext(), graph, CompiledGraph::Memory::reused);
      CHECK(compiled.view(written).buffer == compiled.view(source).buffer);
      CHECK(compiled.view(written).offset == compiled.view(source).offset);
      Plan plan = compiled.forwardPlan([](Plan&) {});
      for (int id = 0; id < static_cast<int>(graph.tensors().size()); ++id) {
        const Tensor t{id};
        if (graph.tensor(t).role != TensorRole::input) continue;
        values.push_back(test::uniformFloats(random, elementCount(graph.tensor(t).shape), -1, 1));
        compiled.upload(t, values.back().data(), values.back().size() * sizeof(float));
        feeds[t.id] = test::widen(values.back());
      }
      plan.run();
      const std::vector<std::string> labels = plan.labels();
      CHECK(std::any_of(labels.begin(), labels.end(), [&](const std::string& l) { return l.find(label) != std::string::npos; }));
      const std::vector<std::vector<double>> reference = referenceValues(graph, feeds);
      std::vector<float> out(elementCount(shape));
      const BufferView view = compiled.view(y);
      plan.read(*view.buffer, out.data(), out.size() * sizeof(float), view.offset);
      test::checkClose(out, reference[static_cast<std::size_t>(y.id)], 1e-5, 1e-4);
    };
    for (const auto& [rows, inputs, outputs, label] : std::vector<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t, std::string>>{
             {3, 20, 24, "dense"}, {37, 48, 40, "dense"}, {33, 2048, 40, "split-K"}, {1300, 1300, 1300, "on transposes"}}) {
      Graph graph;
      const Tensor x = graph.input("x", {rows, outputs});
      const Tensor in = graph.input("in", {rows, inputs});
      check("a dense layer's residual", denseResidualOp(), {rows, outputs},
            {in, parameter(graph, "w", {outputs, inputs}, -0.03f, 0.03f), parameter(graph, "b", {outputs})}, 3, graph, x, label);
    }
    for (const ConvAlgorithm algorithm : {ConvAlgorithm::implicitGemm, ConvAlgorithm::winograd}) {
      const ForcedConvAlgorithm forced(algorithm);
      Graph graph;
      const Tensor x = graph.input("x", {2, 8, 9, 9});
      const Tensor in = graph.input("in", {2, 5, 9, 9});
      check("a convolution's residual", conv2dResidualOp(1), {2, 8, 9, 9},
            {in, parameter(graph, "w", {8, 5, 3, 3}), parameter(graph, "b", {8})}, 3, graph, x, algorithm == ConvAlgorithm::winograd ? "winograd" : "conv");
    }
    {
      Graph graph;
      const Tensor x = graph.input("x", {3, 4, 5, 7});
      const Tensor in = graph.input("in", {3, 4, 5, 7});
      const std::vector<Tensor> statistics{parameter(graph, "gamma", {4}), parameter(graph, "beta", {4}), parameter(graph, "mean", {4}),
                                           parameter(graph, "var", {4}, 0.5f, 2.0f)};
      std::vector<Tensor> inputs{in};
      inputs.insert(inputs.end(), statistics.begin(), statistics.end());
      check("a batch normalization's residual", batchNormOp(false, 0.1f, 1e-5f, Activation::relu, true), {3, 4, 5, 7}, inputs, 5, graph, x, "batch norm");
    }
    {
      Graph graph;
      const Tensor x = graph.input("x", {3, 4, 5, 8});
      check("a channel affine map (vec4)", channelAffineOp(true), {3, 4, 5, 8}, {parameter(graph, "scale", {4}), parameter(graph, "shift", {4})}, 0,
            graph, x, "channel affine");
    }
    for (const bool add : {true, false}) {
      Graph graph;
      const Tensor x = graph.input("x", {5, 33});
      const Tensor other = graph.input("other", {5, 33});
      check("an add or a multiply", add ? addOp(Activation::relu) : multiplyOp(), {5, 33}, {other}, 1, graph, x, add ? "add" : "multiply");
    }
    {
      Graph graph;
      const Tensor x = graph.input("x", {5, 33});
      check("an activation", activationOp(Activation::sigmoid), {5, 33}, {}, 0, graph, x, "activation");
    }
  }

  TEST_CASE("a DenseNet block with its concatenations joined agrees with float64") {
    for (const std::uint32_t batch : {1u, 2u}) {
      CAPTURE(batch);
      const DenseBlock block(batch);
      auto random = test::generator(614);
      const std::vector<float> x = test::uniformFloats(random, batch * 4 * 8 * 8, -2, 2);
      const std::vector<std::string> labels = runReused(block.graph, block.x, x, {block.x0, block.f1, block.f2, block.c3}, {block.c3, block.y});
      CHECK(concatCopies(labels) == (batch > 1 ? 3u : 0u));
    }
  }
}
