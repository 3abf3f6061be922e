// The fused attention op (graph/AttentionOps.cpp, shaders/Attention.glsl) against its float64 reference and against
// the unfused chain of glnet's own ops: odd batches, heads and sequences, D from 1 to 128, every mask shape, causal
// blocks at the end of a cache, fully masked rows, NaN inputs, transposed and head-split layouts, outputs poisoned.
// The gl suite runs under GL and ES (GLNET_API=gles); GLNET_MINIMUM_DEVICE=1 takes ES's 16 KiB of shared memory.
#include "graph/CompiledGraph.h"
#include "graph/InferenceOps.h"
#include "graph/ReferenceGraph.h"
#include "support/Compare.h"
#include "support/GlContext.h"
#include "support/Random.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>

using namespace glnet;

namespace {

using Layout = AttentionSettings::Layout;

// Q, K, V (and mask) values of the given stored shapes, in [-1, 1] unless set.
struct Inputs {
  std::vector<Shape> shapes;
  std::vector<std::vector<float>> values;
};

Inputs randomInputs(std::uint32_t stream, const std::vector<Shape>& shapes, float maskLow = -3.0f, float maskHigh = 3.0f) {
  auto random = test::generator(stream);
  Inputs in{shapes, {}};
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    in.values.push_back(i < 3 ? test::uniformFloats(random, elementCount(shapes[i]), -1.0f, 1.0f)
                              : test::uniformFloats(random, elementCount(shapes[i]), maskLow, maskHigh));
  }
  return in;
}

struct Result {
  std::vector<float> gpu;
  std::vector<double> reference;
  std::vector<std::string> labels;
};

// Runs `op` on the inputs through a CompiledGraph's plan, its output poisoned with NaN first; `sources` (when given)
// names the input each of the op's inputs is, so that one tensor may feed several.
Result run(const std::shared_ptr<const Op>& op, const Inputs& in, std::vector<std::size_t> sources = {}) {
  Context& context = test::glContext();
  Graph graph;
  std::vector<Tensor> tensors;
  std::map<int, std::vector<double>> feeds;
  for (std::size_t i = 0; i < in.shapes.size(); ++i) {
    tensors.push_back(graph.input("x" + std::to_string(i), in.shapes[i]));
    feeds[tensors.back().id] = test::widen(in.values[i]);
  }
  std::vector<Tensor> operands;
  if (sources.empty()) operands = tensors;
  for (const std::size_t source : sources) operands.push_back(tensors.at(source));
  const Tensor y = graph.apply(op, operands);
  CompiledGraph compiled(context, graph, CompiledGraph::Memory::kept, {y});
  Plan plan = compiled.forwardPlan([](Plan&) {});
  for (std::size_t i = 0; i < tensors.size(); ++i) compiled.upload(tensors[i], in.values[i].data(), in.values[i].size() * sizeof(float));
  Result result;
  result.gpu.assign(elementCount(graph.tensor(y).shape), NAN);
  compiled.upload(y, result.gpu.data(), result.gpu.size() * sizeof(float));
  plan.run();
  const BufferView out = compiled.view(y);
  plan.read(*out.buffer, result.gpu.data(), result.gpu.size() * sizeof(float), out.offset);
  result.reference = referenceValues(graph, feeds)[static_cast<std::size_t>(y.id)];
  result.labels = plan.labels();
  return result;
}

std::string shapesText(const std::vector<Shape>& shapes) {
  std::string text;
  for (const Shape& s : shapes) text += describe(s) + " ";
  return text;
}

// fp32 scores of up to 128 products summed, then exp and a weighted mean of values in [-1, 1]: a few ulps of scores
// near 1 in magnitude.
constexpr double tolerance = 3e-6, relativeTolerance = 3e-5;

void checkAgainstReference(const std::shared_ptr<const Op>& op, const Inputs& in) {
  CAPTURE(shapesText(in.shapes));
  const Result r = run(op, in);
  test::checkClose(r.gpu, r.reference, tolerance, relativeTolerance);
}

Shape permuted(const Shape& logical, const Layout& layout) {
  Shape stored(4);
  for (std::size_t k = 0; k < 4; ++k) stored[layout[k]] = logical[k];
  return stored;
}

AttentionSettings scaled(std::uint32_t d, bool causal = false) {
  AttentionSettings s;
  s.scale = 1.0f / std::sqrt(static_cast<float>(d));
  s.causal = causal;
  return s;
}

}  // namespace

TEST_SUITE("gl") {
  TEST_CASE("attention matches float64 over odd batches, heads and sequences, D from 1 to 128") {
    std::uint32_t stream = 4600;
    // B, H, Sq, Sk, D, Dv: query blocks of 16, 32 and 64 (the op's picks), key tiles cut short, D = Dv and not.
    const std::vector<std::array<std::uint32_t, 6>> sizes{{1, 1, 1, 1, 1, 1},    {3, 2, 7, 5, 8, 8},     {1, 3, 17, 40, 64, 64},
                                                          {2, 1, 33, 65, 80, 80}, {1, 2, 19, 37, 128, 128}, {1, 1, 100, 3, 64, 32},
                                                          {1, 1, 5, 197, 1, 7},  {1, 1, 197, 197, 64, 64}};
    for (const auto& size : sizes) {
      const std::uint32_t b = size[0], h = size[1], sq = size[2], sk = size[3], d = size[4], dv = size[5];
      CAPTURE(d);
      checkAgainstReference(attentionOp(scaled(d)), randomInputs(stream++, {{b, h, sq, d}, {b, h, sk, d}, {b, h, sk, dv}}));
    }
  }

  TEST_CASE("attention adds masks of every broadcast shape, and the causal flag hides later keys") {
    std::uint32_t stream = 4640;
    const std::uint32_t b = 3, h = 2, sq = 7, sk = 11, d = 8;
    const std::vector<Shape> qkv{{b, h, sq, d}, {b, h, sk, d}, {b, h, sk, d}};
    for (const Shape& mask : std::vector<Shape>{{b, 1, 1, sk}, {1, 1, sq, sk}, {b, h, sq, sk}, {sq, sk}, {sk}, {1}, {b, 1, sq, 1}}) {
      std::vector<Shape> shapes = qkv;
      shapes.push_back(mask);
      CAPTURE(describe(mask));
      checkAgainstReference(attentionOp(scaled(d)), randomInputs(stream++, shapes));
      checkAgainstReference(attentionOp(scaled(d, true)), randomInputs(stream++, shapes));
    }
    // Causal with a block of queries at the end of a cache (Sq < Sk), square, and Sq > Sk (the first queries see no key
    // and give 0), at sizes past one query block and one key tile.
    for (const auto& [queries, keys] : std::vector<std::pair<std::uint32_t, std::uint32_t>>{{1, 9}, {5, 70}, {40, 40}, {70, 70}, {45, 30}, {9, 1}}) {
      const std::uint32_t q = queries, k = keys;
      CAPTURE(q);
      CAPTURE(k);
      checkAgainstReference(attentionOp(scaled(16, true)), randomInputs(stream++, {{2, 1, q, 16}, {2, 1, k, 16}, {2, 1, k, 16}}));
    }
    // A padding mask of 0 and −inf as Hugging Face's SDPA path makes it, with causal.
    Inputs in = randomInputs(stream++, {{b, h, sq, d}, {b, h, sk, d}, {b, h, sk, d}, {b, 1, 1, sk}});
    for (std::uint32_t i = 0; i < b; ++i)
      for (std::uint32_t j = 0; j < sk; ++j) in.values[3][i * sk + j] = j >= sk - i ? -INFINITY : 0.0f;
    checkAgainstReference(attentionOp(scaled(d)), in);
    checkAgainstReference(attentionOp(scaled(d, true)), in);
  }

  TEST_CASE("attention gives 0 for fully masked rows and plain softmax under a finite very negative mask") {
    std::uint32_t stream = 4680;
    const std::uint32_t sq = 5, sk = 40, d = 8;
    Inputs in = randomInputs(stream++, {{1, 2, sq, d}, {1, 2, sk, d}, {1, 2, sk, d}, {1, 1, sq, sk}});
    const float lowest = std::numeric_limits<float>::lowest();  // torch.finfo(float32).min, Hugging Face eager's mask
    for (std::uint32_t j = 0; j < sk; ++j) {
      in.values[3][0 * sk + j] = -INFINITY;                     // row 0: every key −inf
      in.values[3][1 * sk + j] = lowest;                        // row 1: every key finfo.min: uniform weights
      in.values[3][2 * sk + j] = j == 33 ? 0.0f : -INFINITY;    // row 2: one key (in the second tile) left
      in.values[3][3 * sk + j] = j < 20 ? -INFINITY : lowest;   // row 3: −inf and finfo.min: uniform over the last 20
    }
    for (const bool causal : {false, true}) {
      const Result r = run(attentionOp(scaled(d, causal)), in);
      test::checkClose(r.gpu, r.reference, tolerance, relativeTolerance);
      // The reference's own answers, stated: 0, the mean of V's rows, V's row 33.
      for (std::uint32_t head = 0; head < 2; ++head) {
        for (std::uint32_t f = 0; f < d; ++f) {
          const std::size_t row0 = (head * sq + 0) * d + f, row1 = (head * sq + 1) * d + f, row2 = (head * sq + 2) * d + f;
          CHECK(r.reference[row0] == 0.0);
          CHECK(r.gpu[row0] == 0.0f);
          double mean = 0;
          const std::uint32_t seen = causal ? 1 + sk - sq + 1 : sk;  // query 1 sees keys 0 .. 1 + Sk − Sq
          for (std::uint32_t j = 0; j < seen; ++j) mean += in.values[2][(head * sk + j) * d + f];
          CHECK(r.reference[row1] == doctest::Approx(mean / seen).epsilon(1e-12));
          CHECK(r.reference[row2] == doctest::Approx(in.values[2][(head * sk + 33) * d + f]).epsilon(1e-12));
        }
      }
    }
    // A row whose maximum comes from its first tile of keys, then a whole tile hidden, then a tile far below: the
    // running maximum must outlast the hidden tile (restarted from −inf, the last tile's rescale would drop the first's).
    {
      const std::uint32_t keys = 96;
      Inputs tiles = randomInputs(stream++, {{1, 1, 2, d}, {1, 1, keys, d}, {1, 1, keys, d}, {1, 1, 2, keys}});
      for (std::uint32_t j = 0; j < keys; ++j) tiles.values[3][j] = j < 32 ? 0.0f : j < 64 ? -INFINITY : -30.0f;
      checkAgainstReference(attentionOp(scaled(d)), tiles);
    }
    // Without SDPA's guard (a plain Softmax before ·V) a row that sees no key is NaN, as softmax of nothing but −inf is;
    // the others are unchanged. Also through the key splits (Sk long enough, one group).
    for (const std::uint32_t keys : {sk, 600u}) {
      Inputs plain = randomInputs(stream++, {{1, 1, 2, d}, {1, 1, keys, d}, {1, 1, keys, d}, {1, 1, 2, keys}});
      for (std::uint32_t j = 0; j < keys; ++j) plain.values[3][j] = -INFINITY;
      AttentionSettings settings = scaled(d);
      settings.emptyRowsZero = false;
      const Result r = run(attentionOp(settings), plain);
      for (std::uint32_t f = 0; f < d; ++f) {
        CHECK(std::isnan(r.reference[f]));
        CHECK(std::isnan(r.gpu[f]));
        CHECK(!std::isnan(r.gpu[d + f]));
      }
      test::checkClose(std::vector<float>(r.gpu.begin() + d, r.gpu.end()), std::vector<double>(r.reference.begin() + d, r.reference.end()), tolerance,
                       relativeTolerance);
    }
  }

  TEST_CASE("NaN in Q, K, V or the mask gives NaN out of attention where PyTorch's gives it") {
    std::uint32_t stream = 4700;
    const std::uint32_t b = 2, h = 3, sq = 19, sk = 37, d = 64;
    const std::vector<Shape> shapes{{b, h, sq, d}, {b, h, sk, d}, {b, h, sk, d}, {b, 1, sq, sk}};
    // One NaN in each operand in turn: Q's spoils its query, K's every query that sees its key, V's its feature of
    // every query that sees its key (even one the mask gives weight 0, as 0·NaN), the mask's its query.
    for (std::size_t operand = 0; operand < 4; ++operand) {
      for (const bool causal : {false, true}) {
        CAPTURE(operand);
        CAPTURE(causal);
        Inputs in = randomInputs(stream++, shapes);
        in.values[operand][in.values[operand].size() / 2 + 5] = NAN;
        const Result r = run(attentionOp(scaled(d, causal)), in);
        test::checkNanPropagated(r.gpu, r.reference, tolerance, relativeTolerance);
      }
    }
    // A NaN in V at the last key, which the causal flag hides from every query but the last: only that query's
    // feature is NaN (hidden keys are left out, not weighted by 0), across query blocks of 16, 32 and 64.
    for (const std::uint32_t n : {13u, 19u, 70u}) {
      CAPTURE(n);
      Inputs in = randomInputs(stream++, {{1, 1, n, d}, {1, 1, n, d}, {1, 1, n, d}});
      in.values[2][(n - 1) * d + 3] = NAN;
      const Result r = run(attentionOp(scaled(d, true)), in);
      test::checkNanPropagated(r.gpu, r.reference, tolerance, relativeTolerance);
      CHECK(std::count_if(r.reference.begin(), r.reference.end(), [](double x) { return std::isnan(x); }) == 1);
      CHECK(std::isnan(r.reference[(n - 1) * d + 3]));
    }
  }

  TEST_CASE("attention reads transposed and head-split operands in place and writes its output in any layout") {
    std::uint32_t stream = 4720;
    const std::uint32_t b = 2, h = 3, sq = 21, sk = 34, d = 16, dv = 24;
    struct Layouts {
      Layout q, k, v, o;
    };
    const Layout split = AttentionSettings::sequenceBeforeHeads, kt = AttentionSettings::swapLastTwo;
    for (const Layouts& l : {Layouts{split, split, split, split}, Layouts{AttentionSettings::contiguous, kt, AttentionSettings::contiguous, split},
                             Layouts{split, {0, 2, 3, 1}, split, AttentionSettings::contiguous}, Layouts{{3, 1, 0, 2}, {2, 0, 3, 1}, {1, 3, 2, 0}, {2, 3, 1, 0}}}) {
      AttentionSettings s = scaled(d, true);
      s.query = l.q;
      s.key = l.k;
      s.value = l.v;
      s.output = l.o;
      const Inputs in = randomInputs(stream++, {permuted({b, h, sq, d}, l.q), permuted({b, h, sk, d}, l.k), permuted({b, h, sk, dv}, l.v), {b, 1, 1, sk}});
      const Result r = run(attentionOp(s), in);
      CHECK(r.gpu.size() == elementCount(permuted({b, h, sq, dv}, l.o)));
      test::checkClose(r.gpu, r.reference, tolerance, relativeTolerance);
    }
    // The reference's layouts against the contiguous form of the same numbers: a head-split Q and output, Kᵀ.
    Inputs contiguous = randomInputs(stream++, {{1, 2, 3, 4}, {1, 2, 5, 4}, {1, 2, 5, 4}});
    Inputs laid = contiguous;
    laid.shapes = {{1, 3, 2, 4}, {1, 2, 4, 5}, {1, 2, 5, 4}};
    for (std::uint32_t hh = 0; hh < 2; ++hh) {
      for (std::uint32_t i = 0; i < 3; ++i)
        for (std::uint32_t f = 0; f < 4; ++f) laid.values[0][(i * 2 + hh) * 4 + f] = contiguous.values[0][(hh * 3 + i) * 4 + f];
      for (std::uint32_t j = 0; j < 5; ++j)
        for (std::uint32_t f = 0; f < 4; ++f) laid.values[1][(hh * 4 + f) * 5 + j] = contiguous.values[1][(hh * 5 + j) * 4 + f];
    }
    AttentionSettings s;
    s.query = split;
    s.key = kt;
    s.output = split;
    const Result plain = run(attentionOp(AttentionSettings{}), contiguous), transposed = run(attentionOp(s), laid);
    for (std::uint32_t hh = 0; hh < 2; ++hh)
      for (std::uint32_t i = 0; i < 3; ++i)
        for (std::uint32_t f = 0; f < 4; ++f) {
          CHECK(transposed.reference[(i * 2 + hh) * 4 + f] == doctest::Approx(plain.reference[(hh * 3 + i) * 4 + f]).epsilon(1e-12));
          CHECK(transposed.gpu[(i * 2 + hh) * 4 + f] == plain.gpu[(hh * 3 + i) * 4 + f]);
        }
  }

  TEST_CASE("attention reads Q, K and V as strided views of one fused projection") {
    // GPT-2's c_attn output [B, S, 3·H·D], split in three along its last axis, each part's heads split: Q, K and V
    // are views of the one tensor at offsets 0, H·D and 2·H·D.
    std::uint32_t stream = 4760;
    const std::uint32_t b = 2, h = 3, s = 23, d = 16;
    const std::uint32_t row = 3 * h * d;
    const Inputs in = randomInputs(stream++, {{b, s, row}, {1, 1, s, s}}), &fused = in;
    AttentionSettings settings = scaled(d, true);
    const auto part = [&](std::uint32_t which) { return AttentionSettings::View{{b, h, s, d}, {s * row, d, row, 1}, which * h * d}; };
    settings.queryView = part(0);
    settings.keyView = part(1);
    settings.valueView = part(2);
    settings.output = AttentionSettings::sequenceBeforeHeads;
    const Result r = run(attentionOp(settings), in, {0, 0, 0, 1});  // the one tensor as Q, K and V
    test::checkClose(r.gpu, r.reference, tolerance, relativeTolerance);
    // The same numbers copied out into contiguous [B, H, S, D] tensors give the same reference and GPU results.
    Inputs split = randomInputs(stream++, {{b, h, s, d}, {b, h, s, d}, {b, h, s, d}, {1, 1, s, s}});
    split.values[3] = fused.values[1];
    for (std::uint32_t which = 0; which < 3; ++which)
      for (std::uint32_t i = 0; i < b; ++i)
        for (std::uint32_t hh = 0; hh < h; ++hh)
          for (std::uint32_t j = 0; j < s; ++j)
            for (std::uint32_t f = 0; f < d; ++f)
              split.values[which][((i * h + hh) * s + j) * d + f] = fused.values[0][(i * s + j) * row + which * h * d + hh * d + f];
    AttentionSettings plainSettings = scaled(d, true);
    plainSettings.output = AttentionSettings::sequenceBeforeHeads;
    const Result plain = run(attentionOp(plainSettings), split);
    std::size_t differences = 0;
    for (std::size_t i = 0; i < r.gpu.size(); ++i) differences += r.reference[i] != plain.reference[i] || r.gpu[i] != plain.gpu[i];
    CHECK(differences == 0u);
    // A view past its tensor's end is refused.
    settings.valueView->offset += 1;
    CHECK_THROWS_WITH(attentionOp(settings)->outputShape({in.shapes[0], in.shapes[0], in.shapes[0]}),
                      doctest::Contains("a view of V inside its tensor (it reaches element 6624): got [2, 23, 144], [2, 23, 144], [2, 23, 144]"));
  }

  TEST_CASE("attention splits long key ranges of few queries across groups and joins the splits") {
    // A decode step (one query per head) over 300 keys: too few groups for a GPU, so the keys are split (5 splits of 64
    // here) and AttentionCombine.glsl joins them; with masks, causal blocks whose last splits see no key, fully masked
    // rows and NaN, as the single pass.
    std::uint32_t stream = 4780;
    const std::uint32_t b = 2, h = 3, sk = 300, d = 64;
    const auto splitLabels = [](const std::vector<std::string>& labels) {
      return std::count_if(labels.begin(), labels.end(), [](const std::string& l) { return l.find(" split ") != std::string::npos; }) == 1 &&
             std::count_if(labels.begin(), labels.end(), [](const std::string& l) { return l.rfind("attention combine ", 0) == 0; }) == 1;
    };
    for (const bool causal : {false, true}) {
      for (const std::uint32_t sq : {1u, 4u}) {
        CAPTURE(causal);
        CAPTURE(sq);
        Inputs in = randomInputs(stream++, {{b, h, sq, d}, {b, h, sk, d}, {b, h, sk, d}, {b, 1, sq, sk}});
        // Batch 0's first query sees no key (−inf throughout); batch 1's first query only finfo.min.
        for (std::uint32_t j = 0; j < sk; ++j) {
          in.values[3][j] = -INFINITY;
          in.values[3][sq * sk + j] = std::numeric_limits<float>::lowest();
        }
        const Result r = run(attentionOp(scaled(d, causal)), in);
        CHECK(splitLabels(r.labels));
        test::checkClose(r.gpu, r.reference, tolerance, relativeTolerance);
        for (std::uint32_t f = 0; f < d; ++f) CHECK(r.gpu[f] == 0.0f);
        const Result unmasked = run(attentionOp(scaled(d, causal)), randomInputs(stream++, {{b, h, sq, d}, {b, h, sk, d}, {b, h, sk, d}}));
        CHECK(splitLabels(unmasked.labels));
        test::checkClose(unmasked.gpu, unmasked.reference, tolerance, relativeTolerance);
      }
    }
    // Causal square: the first query block's keys all lie in the first split, the second split sees none of them.
    const Result square = run(attentionOp(scaled(d, true)), randomInputs(stream++, {{1, 1, 130, d}, {1, 1, 130, d}, {1, 1, 130, d}}));
    CHECK(splitLabels(square.labels));
    test::checkClose(square.gpu, square.reference, tolerance, relativeTolerance);
    // Two split attentions in a row in reused memory (as imported models compile): the second reads the first's output
    // as its queries, and their workspaces are one buffer.
    {
      const Inputs in = randomInputs(stream++, {{b, h, 1, d}, {b, h, sk, d}, {b, h, sk, d}});
      Graph graph;
      const Tensor q = graph.input("q", in.shapes[0]), k = graph.input("k", in.shapes[1]), v = graph.input("v", in.shapes[2]);
      const Tensor y = graph.apply(attentionOp(scaled(d)), {graph.apply(attentionOp(scaled(d)), {q, k, v}), k, v});
      CompiledGraph compiled(test::glContext(), graph, CompiledGraph::Memory::reused, {y});
      Plan plan = compiled.forwardPlan([](Plan&) {});
      const std::vector<Tensor> inputs{q, k, v};
      std::map<int, std::vector<double>> feeds;
      for (std::size_t i = 0; i < 3; ++i) {
        compiled.upload(inputs[i], in.values[i].data(), in.values[i].size() * sizeof(float));
        feeds[inputs[i].id] = test::widen(in.values[i]);
      }
      std::vector<float> result(elementCount(graph.tensor(y).shape), NAN);
      compiled.upload(y, result.data(), result.size() * sizeof(float));
      plan.run();
      plan.read(*compiled.view(y).buffer, result.data(), result.size() * sizeof(float), compiled.view(y).offset);
      const std::vector<std::string> labels = plan.labels();
      CHECK(std::count_if(labels.begin(), labels.end(), [](const std::string& l) { return l.rfind("attention combine ", 0) == 0; }) == 2);
      test::checkClose(result, referenceValues(graph, feeds)[static_cast<std::size_t>(y.id)], tolerance, relativeTolerance);
    }
    // NaN in K (every query that sees its key) and in V (that feature), in one split of several.
    for (std::size_t operand = 1; operand < 3; ++operand) {
      Inputs in = randomInputs(stream++, {{b, h, 1, d}, {b, h, sk, d}, {b, h, sk, d}});
      in.values[operand][(sk + 200) * d + 7] = NAN;
      const Result r = run(attentionOp(scaled(d)), in);
      CHECK(splitLabels(r.labels));
      test::checkNanPropagated(r.gpu, r.reference, tolerance, relativeTolerance);
    }
  }

  TEST_CASE("attention shares K and V heads among query heads and cycles a window mask over the batch") {
    std::uint32_t stream = 4800;
    const std::uint32_t sq = 9, sk = 37, d = 16;
    // Grouped-query attention (6 query heads over 2 K/V heads) and multi-query (over 1), against the same K and V
    // repeated per query head.
    for (const std::uint32_t kvHeads : {2u, 1u}) {
      CAPTURE(kvHeads);
      const std::uint32_t b = 2, h = 6;
      const Inputs shared = randomInputs(stream++, {{b, h, sq, d}, {b, kvHeads, sk, d}, {b, kvHeads, sk, d}, {b, 1, 1, sk}});
      const Result r = run(attentionOp(scaled(d, true)), shared);
      test::checkClose(r.gpu, r.reference, tolerance, relativeTolerance);
      Inputs repeated = shared;
      for (std::size_t operand = 1; operand < 3; ++operand) {
        repeated.shapes[operand] = {b, h, sk, d};
        repeated.values[operand].clear();
        for (std::uint32_t i = 0; i < b; ++i)
          for (std::uint32_t hh = 0; hh < h; ++hh) {
            const auto first = shared.values[operand].begin() + (i * kvHeads + hh / (h / kvHeads)) * sk * d;
            repeated.values[operand].insert(repeated.values[operand].end(), first, first + sk * d);
          }
      }
      const Result plain = run(attentionOp(scaled(d, true)), repeated);
      std::size_t differences = 0;
      for (std::size_t i = 0; i < r.gpu.size(); ++i) differences += r.reference[i] != plain.reference[i] || r.gpu[i] != plain.gpu[i];
      CHECK(differences == 0u);
    }
    // Swin's shifted windows: 2 images of 3 windows each (batch image·3 + window), the mask [3, H, N, N] of the windows
    // (relative position bias and shift mask, −100 where windows must not mix), against it repeated over the images.
    const std::uint32_t images = 2, windows = 3, h = 2, n = 13;
    Inputs windowed = randomInputs(stream++, {{images * windows, h, n, d}, {images * windows, h, n, d}, {images * windows, h, n, d}, {windows, h, n, n}});
    for (std::size_t i = 0; i < windowed.values[3].size(); i += 5) windowed.values[3][i] = -100.0f;
    AttentionSettings s = scaled(d);
    s.maskBatchPeriod = windows;
    const Result r = run(attentionOp(s), windowed);
    test::checkClose(r.gpu, r.reference, tolerance, relativeTolerance);
    Inputs expanded = windowed;
    expanded.shapes[3] = {images * windows, h, n, n};
    expanded.values[3].clear();
    for (std::uint32_t i = 0; i < images; ++i) expanded.values[3].insert(expanded.values[3].end(), windowed.values[3].begin(), windowed.values[3].end());
    const Result plain = run(attentionOp(scaled(d)), expanded);
    std::size_t differences = 0;
    for (std::size_t i = 0; i < r.gpu.size(); ++i) differences += r.reference[i] != plain.reference[i] || r.gpu[i] != plain.gpu[i];
    CHECK(differences == 0u);
  }

  TEST_CASE("attention matches the unfused chain of batched matmul, scale, mask and softmax") {
    // What the importer replaces: MatMul(Q, Kᵀ) → Mul(scale) → Add(mask) → Softmax → MatMul(·, V), each a GPU op: on
    // contiguous Q and V with a Kᵀ tensor, and as exports give them, Q, K and V the [B, S, H, D] reshapes of the
    // projections, transposed by perm [0, 2, 1, 3] (K by [0, 2, 3, 1]) and the output transposed back by [0, 2, 1, 3]:
    // the fused op reads and writes those tensors in place.
    std::uint32_t stream = 4740;
    Context& context = test::glContext();
    for (const bool exported : {false, true}) {
      for (const auto& size : std::vector<std::array<std::uint32_t, 5>>{{2, 3, 17, 23, 64}, {1, 2, 197, 197, 64}, {3, 1, 1, 40, 80}}) {
        const std::uint32_t b = size[0], h = size[1], sq = size[2], sk = size[3], d = size[4];
        CAPTURE(exported);
        CAPTURE(sk);
        const float scale = 1.0f / std::sqrt(static_cast<float>(d));
        const Inputs in = exported ? randomInputs(stream++, {{b, sq, h, d}, {b, sk, h, d}, {b, sk, h, d}, {b, 1, 1, sk}})
                                   : randomInputs(stream++, {{b, h, sq, d}, {b, h, d, sk}, {b, h, sk, d}, {b, 1, 1, sk}});
        Graph graph;
        const std::vector<Tensor> inputs{graph.input("q", in.shapes[0]), graph.input("k", in.shapes[1]), graph.input("v", in.shapes[2]),
                                         graph.input("mask", in.shapes[3])};
        const auto headsFirst = [&](Tensor t, std::vector<std::uint32_t> perm) { return exported ? graph.apply(transposeOp(std::move(perm)), {t}) : t; };
        const Tensor q = headsFirst(inputs[0], {0, 2, 1, 3}), kt = headsFirst(inputs[1], {0, 2, 3, 1}), v = headsFirst(inputs[2], {0, 2, 1, 3});
        const Tensor factor = graph.parameter("scale", {1}, {scale});
        const Tensor scores = graph.apply(broadcastOp(BinaryKind::add),
                                          {graph.apply(broadcastOp(BinaryKind::multiply), {graph.apply(batchedMatMulOp(), {q, kt}), factor}), inputs[3]});
        const Tensor unfused = headsFirst(graph.apply(batchedMatMulOp(), {graph.apply(axisOp(AxisKind::softmax, 3, 4), {scores}), v}), {0, 2, 1, 3});
        AttentionSettings s;
        s.scale = scale;
        s.key = AttentionSettings::swapLastTwo;
        if (exported) s.query = s.key = s.value = s.output = AttentionSettings::sequenceBeforeHeads;
        const Tensor fused = graph.apply(attentionOp(s), inputs);
        CompiledGraph compiled(context, graph, CompiledGraph::Memory::kept, {unfused, fused});
        Plan plan = compiled.forwardPlan([](Plan&) {});
        for (std::size_t i = 0; i < 4; ++i) compiled.upload(inputs[i], in.values[i].data(), in.values[i].size() * sizeof(float));
        CHECK(graph.tensor(fused).shape == graph.tensor(unfused).shape);
        std::vector<float> a(elementCount(graph.tensor(unfused).shape), NAN), f(elementCount(graph.tensor(fused).shape), NAN);
        compiled.upload(fused, f.data(), f.size() * sizeof(float));
        plan.run();
        plan.read(*compiled.view(unfused).buffer, a.data(), a.size() * sizeof(float), compiled.view(unfused).offset);
        plan.read(*compiled.view(fused).buffer, f.data(), f.size() * sizeof(float), compiled.view(fused).offset);
        test::checkClose(f, test::widen(a), tolerance, relativeTolerance);
        const std::vector<std::string> labels = plan.labels();
        CHECK(std::count_if(labels.begin(), labels.end(), [](const std::string& l) { return l.rfind("attention masked D", 0) == 0; }) == 1);
      }
    }
  }

  TEST_CASE("attention refuses inputs that do not fit together, naming the shapes") {
    const auto shapeOf = [](const std::vector<Shape>& in, AttentionSettings s = {}) { return attentionOp(s)->outputShape(in); };
    CHECK(shapeOf({{2, 3, 5, 8}, {2, 3, 7, 8}, {2, 3, 7, 4}}) == Shape{2, 3, 5, 4});
    CHECK(shapeOf({{2, 3, 5, 8}, {2, 3, 7, 8}, {2, 3, 7, 4}, {2, 1, 1, 7}}) == Shape{2, 3, 5, 4});
    AttentionSettings split;
    split.query = split.output = AttentionSettings::sequenceBeforeHeads;
    split.key = {0, 2, 3, 1};
    CHECK(shapeOf({{2, 5, 3, 8}, {2, 8, 3, 7}, {2, 3, 7, 4}}, split) == Shape{2, 5, 3, 4});
    CHECK_THROWS_WITH(shapeOf({{2, 3, 5, 8}, {2, 3, 7, 9}, {2, 3, 7, 4}}),
                      doctest::Contains("Q and K with the same features: got [2, 3, 5, 8], [2, 3, 7, 9], [2, 3, 7, 4]"));
    CHECK_THROWS_WITH(shapeOf({{2, 3, 5, 8}, {2, 3, 7, 8}, {2, 3, 6, 4}}), doctest::Contains("K and V with the same keys"));
    CHECK_THROWS_WITH(shapeOf({{2, 3, 5, 8}, {2, 2, 7, 8}, {2, 2, 7, 4}}), doctest::Contains("K and V with the same heads, a divisor of Q's"));
    CHECK_THROWS_WITH(shapeOf({{2, 4, 5, 8}, {2, 2, 7, 8}, {2, 1, 7, 4}}), doctest::Contains("K and V with the same heads, a divisor of Q's"));
    CHECK_THROWS_WITH(shapeOf({{2, 3, 5, 8}, {1, 3, 7, 8}, {1, 3, 7, 4}}), doctest::Contains("the same batch"));
    AttentionSettings period;
    period.maskBatchPeriod = 4;
    CHECK(shapeOf({{8, 3, 5, 8}, {8, 3, 7, 8}, {8, 3, 7, 4}, {4, 3, 5, 7}}, period) == Shape{8, 3, 5, 4});
    CHECK_THROWS_WITH(shapeOf({{6, 3, 5, 8}, {6, 3, 7, 8}, {6, 3, 7, 4}, {4, 3, 5, 7}}, period), doctest::Contains("a mask [4, ...] for a batch period of 4"));
    CHECK_THROWS_WITH(shapeOf({{8, 3, 5, 8}, {8, 3, 7, 8}, {8, 3, 7, 4}, {3, 5, 7}}, period), doctest::Contains("a mask [4, ...] for a batch period of 4"));
    CHECK_THROWS_WITH(shapeOf({{8, 3, 5, 8}, {8, 3, 7, 8}, {8, 3, 7, 4}, {4, 2, 5, 7}}, period), doctest::Contains("a mask that broadcasts to [8, 3, 5, 7]"));
    CHECK_THROWS_WITH(shapeOf({{2, 3, 5, 8}, {2, 3, 7, 8}, {2, 3, 7, 4}, {5, 6}}), doctest::Contains("a mask that broadcasts to [2, 3, 5, 7]"));
    CHECK_THROWS_WITH(shapeOf({{2, 3, 5, 8}, {2, 3, 7, 8}}), doctest::Contains("3 or 4 inputs"));
    CHECK_THROWS_WITH(shapeOf({{3, 5, 8}, {3, 7, 8}, {3, 7, 4}}), doctest::Contains("Q, K and V of rank 4"));
    // Features past what any device's shared memory holds for one group's blocks: refused when the graph is compiled.
    Graph graph;
    const Tensor y = graph.apply(attentionOp({}), {graph.input("q", {1, 1, 4, 1000}), graph.input("k", {1, 1, 4, 1000}), graph.input("v", {1, 1, 4, 1000})});
    const auto compile = [&] { CompiledGraph(test::glContext(), graph, CompiledGraph::Memory::kept, {y}).forwardPlan([](Plan&) {}); };
    CHECK_THROWS_AS(compile(), DeviceLimitError);
    CHECK_THROWS_WITH(compile(), doctest::Contains("attention over 1000 and 1000 features per head needs 97408 bytes of shared memory"));
    AttentionSettings bad;
    bad.key = {0, 1, 1, 3};
    CHECK_THROWS_WITH(attentionOp(bad), "attention's layout {0, 1, 1, 3} is no permutation of 4 axes");
  }
}
