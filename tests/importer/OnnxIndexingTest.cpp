// The importer's indexing ops on small hand-made ONNX graphs: Gather (an embedding lookup at computed ids), GatherND,
// ScatterND, Trilu, Einsum and Slice, folded where their inputs are constants and run on the GPU where one is computed,
// against values worked out here; and their refusals, one line naming the node.
#include "graph/CompiledGraph.h"
#include "importer/Onnx.h"
#include "support/Compare.h"
#include "support/GlContext.h"
#include "support/OnnxTestModel.h"
#include "support/Random.h"
#include "support/TempDir.h"

#include <onnx/onnx_pb.h>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

using namespace glnet;

using test::attribute;
using test::attributeInts;
using test::iota;
using test::named;
using test::opsRun;
using test::refusal;
using test::run;
using test::summaries;
using Model = test::OnnxTestModel;

TEST_SUITE("gl") {
  TEST_CASE("an embedding lookup at computed ids, and Gather along any axis, run on the GPU; an id outside the table gives NaN") {
    std::vector<double> table;
    for (int i = 0; i < 20; ++i) table.push_back(0.5 * i - 3);
    Model m;
    m.input("ids", {2, 3}).constant("table", {5, 4}, table, false);
    attribute(m.node("Gather", {"table", "ids"}, "y"), "axis", 0);
    Shape shape;
    const std::vector<float> y = run(m, {{0, 4, -1, 2, 5, -6}}, &shape);
    CHECK(shape == Shape{2, 3, 4});
    const int rows[6] = {0, 4, 4, 2, -1, -1};  // -1 wraps to 4; 5 and -6 are outside the table
    for (int r = 0; r < 6; ++r) {
      for (int d = 0; d < 4; ++d) {
        if (rows[r] < 0) CHECK(std::isnan(y[r * 4 + d]));
        else CHECK(y[r * 4 + d] == static_cast<float>(table[rows[r] * 4 + d]));
      }
    }
    // Along axis 1 of a computed tensor, at computed indices [2].
    Model g;
    g.input("x", {2, 3, 2}).input("i", {2});
    attribute(g.node("Gather", {"x", "i"}, "y"), "axis", -2);
    CHECK(run(g, {iota(12), {2, -3}}, &shape) == std::vector<float>{4, 5, 0, 1, 10, 11, 6, 7});
    CHECK(shape == Shape{2, 2, 2});
    // Several constant indices of a computed tensor: one gather, not a slice per index.
    Model c;
    c.input("x", {2, 3}).constant("i", {2, 2}, {2, 0, 1, -1});
    attribute(c.node("Gather", {"x", "i"}, "y"), "axis", 1);
    CHECK(run(c, {iota(6)}) == std::vector<float>{2, 0, 1, 2, 5, 3, 4, 5});
    Model bad;
    bad.input("x", {2, 3}).constant("i", {2}, {0, 3});
    attribute(bad.node("Gather", {"x", "i"}, "y"), "axis", 1);
    CHECK(refusal(bad).find("index 3 is outside an axis of 3") != std::string::npos);
  }

  TEST_CASE("GatherND and ScatterND run on the GPU with computed data and fold on constants") {
    // BERT's torch.export mask: a computed [B, S] tensor at constant (b, s) pairs.
    Model m;
    m.input("mask", {2, 3}).constant("i", {2, 2, 2}, {0, 2, 1, 0, 1, 1, -1, -1});
    m.node("GatherND", {"mask", "i"}, "y");
    CHECK(run(m, {{1, 2, 3, 4, 5, 6}}) == std::vector<float>{3, 4, 5, 6});
    Model batched;
    batched.input("x", {2, 3, 2}).input("i", {2, 1, 1});
    attribute(batched.node("GatherND", {"x", "i"}, "y"), "batch_dims", 1);
    Shape shape;
    const std::vector<float> y = run(batched, {iota(12), {2, 3}}, &shape);
    CHECK(shape == Shape{2, 1, 2});
    CHECK(y[0] == 4);
    CHECK(y[1] == 5);
    CHECK(std::isnan(y[2]));  // index 3 of an axis of 3
    CHECK(std::isnan(y[3]));
    // Swin's mask: ConstantOfShape, then ScatterND of constants, folded; added to x to read it.
    Model folded;
    folded.input("x", {3, 2}).constant("shape", {2}, {3, 2}).constant("i", {2, 1}, {2, 0}).constant("u", {2, 2}, {1, 2, 3, 4}, false);
    folded.node("ConstantOfShape", {"shape"}, "zeros");
    folded.node("ScatterND", {"zeros", "i", "u"}, "mask");
    folded.node("Add", {"x", "mask"}, "y");
    CHECK(run(folded, {{0, 0, 0, 0, 0, 0}}) == std::vector<float>{3, 4, 0, 0, 1, 2});
    Model gpu;
    gpu.input("x", {3, 2}).constant("i", {2, 1}, {2, 0}).constant("u", {2, 2}, {1, 2, 3, 4}, false);
    gpu.node("ScatterND", {"x", "i", "u"}, "y");
    CHECK(run(gpu, {iota(6, 10)}) == std::vector<float>{3, 4, 12, 13, 1, 2});
    Model twice;
    twice.input("x", {3, 2}).constant("i", {2, 1}, {2, -1}).constant("u", {2, 2}, {1, 2, 3, 4}, false);
    twice.node("ScatterND", {"x", "i", "u"}, "y");
    CHECK(refusal(twice).find("two index rows name the same place") != std::string::npos);
    Model computed;
    computed.input("x", {3, 2}).input("i", {2, 1}).constant("u", {2, 2}, {1, 2, 3, 4}, false);
    computed.node("ScatterND", {"x", "i", "u"}, "y");
    CHECK(refusal(computed).find("the indices must be constants") != std::string::npos);
  }

  TEST_CASE("Trilu runs on the GPU and folds on constants") {
    Model m(14);
    m.input("x", {2, 3}).constant("k", {}, {1});
    attribute(m.node("Trilu", {"x", "k"}, "y"), "upper", 0);
    CHECK(run(m, {{1, 2, 3, 4, 5, 6}}) == std::vector<float>{1, 2, 0, 4, 5, 6});
    Model folded(14);
    folded.input("x", {3, 3}).constant("shape", {2}, {3, 3});
    onnx::NodeProto& ones = folded.node("ConstantOfShape", {"shape"}, "ones");
    onnx::AttributeProto& value = *ones.add_attribute();
    value.set_name("value");
    value.set_type(onnx::AttributeProto::TENSOR);
    value.mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
    value.mutable_t()->add_dims(1);
    value.mutable_t()->add_float_data(1.0f);
    folded.node("Trilu", {"ones"}, "causal");  // upper, k = 0
    folded.node("Add", {"x", "causal"}, "y");
    CHECK(run(folded, {std::vector<float>(9, 0.0f)}) == std::vector<float>{1, 1, 1, 0, 1, 1, 0, 0, 1});
  }

  TEST_CASE("Einsum runs MaxViT's and attention's equations as batched products, folds any, and refuses others naming them") {
    // 'B G H I D, B G H J D -> B G H I J' (MaxViT's spelling, spaces and capitals) and its partner.
    const std::uint32_t B = 1, G = 2, H = 2, I = 3, J = 4, D = 5;
    Model scores;
    scores.input("q", {B, G, H, I, D}).input("k", {B, G, H, J, D});
    attribute(scores.node("Einsum", {"q", "k"}, "y"), "equation", std::string("B G H I D, B G H J D -> B G H I J"));
    const std::vector<float> q = iota(B * G * H * I * D, -7), k = iota(B * G * H * J * D, -30);
    std::vector<double> want;
    for (std::uint32_t bgh = 0; bgh < B * G * H; ++bgh) {
      for (std::uint32_t i = 0; i < I; ++i) {
        for (std::uint32_t j = 0; j < J; ++j) {
          double sum = 0;
          for (std::uint32_t d = 0; d < D; ++d) sum += q[(bgh * I + i) * D + d] * k[(bgh * J + j) * D + d];
          want.push_back(sum);
        }
      }
    }
    Shape shape;
    test::checkClose(run(scores, {q, k}, &shape), want, 1e-6, 1e-6);
    CHECK(shape == Shape{B, G, H, I, J});
    Model values;
    values.input("p", {B, G, H, I, J}).input("v", {B, G, H, J, D});
    attribute(values.node("Einsum", {"p", "v"}, "y"), "equation", std::string("bghij,bghjd->bghid"));
    const std::vector<float> p = iota(B * G * H * I * J, -5), v = iota(B * G * H * J * D, -11);
    want.clear();
    for (std::uint32_t bgh = 0; bgh < B * G * H; ++bgh) {
      for (std::uint32_t i = 0; i < I; ++i) {
        for (std::uint32_t d = 0; d < D; ++d) {
          double sum = 0;
          for (std::uint32_t j = 0; j < J; ++j) sum += p[(bgh * I + i) * J + j] * v[(bgh * J + j) * D + d];
          want.push_back(sum);
        }
      }
    }
    test::checkClose(run(values, {p, v}), want, 1e-6, 1e-6);
    // Attention's and plain products (and an outer product, and a sum over batches of rows) on the GPU against the same
    // equation folded on constants, which sums over every letter directly.
    const std::map<char, std::int64_t> sizes{{'b', 2}, {'h', 3}, {'i', 4}, {'j', 5}, {'d', 3}, {'k', 2}};
    for (const std::string equation : {"bhid,bhjd->bhij", "bhij,bhjd->bhid", "ij,jk->ik", "bij,bjk->bik", "i,j->ij", "bij,bij->bi"}) {
      CAPTURE(equation);
      const std::size_t comma = equation.find(','), arrow = equation.find("->");
      const std::string terms[2] = {equation.substr(0, comma), equation.substr(comma + 1, arrow - comma - 1)};
      std::vector<std::int64_t> shapes[2], out;
      std::vector<float> operands[2];
      for (int t = 0; t < 2; ++t) {
        std::size_t count = 1;
        for (const char c : terms[t]) {
          shapes[t].push_back(sizes.at(c));
          count *= static_cast<std::size_t>(sizes.at(c));
        }
        for (std::size_t n = 0; n < count; ++n) operands[t].push_back(static_cast<float>((n * 7 + static_cast<std::size_t>(t) * 3) % 11) / 4 - 1);
      }
      for (const char c : equation.substr(arrow + 2)) out.push_back(sizes.at(c));
      Model gpu;
      gpu.input("a", shapes[0]).input("b", shapes[1]);
      attribute(gpu.node("Einsum", {"a", "b"}, "y"), "equation", equation);
      Model folded;
      folded.input("x", out).constant("a", shapes[0], {operands[0].begin(), operands[0].end()}, false);
      folded.constant("b", shapes[1], {operands[1].begin(), operands[1].end()}, false);
      attribute(folded.node("Einsum", {"a", "b"}, "e"), "equation", equation);
      folded.node("Add", {"x", "e"}, "y");
      std::size_t outCount = 1;
      for (const std::int64_t d : out) outCount *= static_cast<std::size_t>(d);
      const std::vector<float> want = run(folded, {std::vector<float>(outCount, 0.0f)});
      test::checkClose(run(gpu, {operands[0], operands[1]}), std::vector<double>(want.begin(), want.end()), 1e-6, 1e-6);
    }
    // An output in another order than the product's: 'ij,jk->ki' with a constant right operand.
    Model transposed;
    transposed.input("a", {2, 3}).constant("b", {3, 2}, {1, 2, 3, 4, 5, 6}, false);
    attribute(transposed.node("Einsum", {"a", "b"}, "y"), "equation", std::string("ij,jk->ki"));
    CHECK(run(transposed, {{1, 0, 2, 0, 1, -1}}) == std::vector<float>{11, -2, 14, -2});
    // Folded: a trace-like sum over a diagonal ('ii->i'), which the GPU path refuses.
    Model folded;
    folded.input("x", {2}).constant("m", {2, 2}, {1, 2, 3, 4}, false);
    attribute(folded.node("Einsum", {"m"}, "diagonal"), "equation", std::string("ii->i"));
    folded.node("Add", {"x", "diagonal"}, "y");
    CHECK(run(folded, {{0, 0}}) == std::vector<float>{1, 4});
    Model diagonal;
    diagonal.input("x", {2, 2});
    attribute(diagonal.node("Einsum", {"x"}, "y"), "equation", std::string("ii->i"));
    CHECK(refusal(diagonal).find("equation 'ii->i' is not supported on the GPU: glnet runs products of two operands") != std::string::npos);
    Model ellipsis;
    ellipsis.input("x", {2, 2}).input("z", {2, 2});
    attribute(ellipsis.node("Einsum", {"x", "z"}, "y"), "equation", std::string("...ij,...jk->...ik"));
    CHECK(refusal(ellipsis).find("equation '...ij,...jk->...ik': glnet reads letters only (no ellipsis)") != std::string::npos);
  }

  TEST_CASE("MaxViT's attention written as Einsum runs as one fused op; a mask that varies along the windows leaves the products") {
    // q scaled by a Mul, 'bghid,bghjd->bghij', a constant bias Add, Softmax, 'bghij,bghjd->bghid': as torchvision's
    // MaxViT exports its relative-position attention.
    const std::uint32_t B = 2, G = 3, H = 2, S = 5, D = 4;
    std::mt19937 random = test::generator(94);
    const std::vector<float> q = test::uniformFloats(random, B * G * H * S * D, -2.0f, 2.0f), k = test::uniformFloats(random, B * G * H * S * D, -2.0f, 2.0f),
                             v = test::uniformFloats(random, B * G * H * S * D);
    for (const bool perWindow : {false, true}) {
      CAPTURE(perWindow);
      const std::uint32_t maskWindows = perWindow ? G : 1;
      const std::vector<float> mask = test::uniformFloats(random, maskWindows * H * S * S, -3.0f, 3.0f);
      Model m;
      m.input("q", {B, G, H, S, D}).input("k", {B, G, H, S, D}).input("v", {B, G, H, S, D});
      m.constant("scale", {}, {0.5}, false).constant("bias", {maskWindows, H, S, S}, test::widen(mask), false);
      m.node("Mul", {"q", "scale"}, "qs");
      attribute(m.node("Einsum", {"qs", "k"}, "scores"), "equation", std::string("bghid,bghjd->bghij"));
      m.node("Add", {"scores", "bias"}, "biased");
      m.node("Softmax", {"biased"}, "p");
      attribute(m.node("Einsum", {"p", "v"}, "y"), "equation", std::string("bghij,bghjd->bghid"));
      std::vector<double> want(B * G * H * S * D);
      for (std::uint32_t b = 0; b < B; ++b) {
        for (std::uint32_t g = 0; g < G; ++g) {
          for (std::uint32_t h = 0; h < H; ++h) {
            const std::size_t head = (b * G + g) * H + h, maskAt = (perWindow ? g : 0) * H + h;
            for (std::uint32_t i = 0; i < S; ++i) {
              std::vector<double> scores(S);
              double largest = -INFINITY, total = 0;
              for (std::uint32_t j = 0; j < S; ++j) {
                double dot = 0;
                for (std::uint32_t d = 0; d < D; ++d) dot += 0.5 * q[(head * S + i) * D + d] * k[(head * S + j) * D + d];
                scores[j] = dot + mask[(maskAt * S + i) * S + j];
                largest = std::max(largest, scores[j]);
              }
              for (double& score : scores) total += score = std::exp(score - largest);
              for (std::uint32_t d = 0; d < D; ++d) {
                double sum = 0;
                for (std::uint32_t j = 0; j < S; ++j) sum += scores[j] / total * v[(head * S + j) * D + d];
                want[(head * S + i) * D + d] = sum;
              }
            }
          }
        }
      }
      test::checkClose(run(m, {q, k, v}), want, 1e-6, 1e-5);
      const std::string became = summaries(m).at(named("Einsum", 2));
      CHECK(became.rfind(perWindow ? "batched matmul" : "attention (fused", 0) == 0);
      if (!perWindow) CHECK(opsRun(m) == 1);
    }
  }

  TEST_CASE("MaxViT's Q, K and V as three Slices of one projection, split into heads by Reshape and Transpose, Q and K scaled: the fused Einsum attention reads them in place") {
    // qkv [B, G, S, 3·H·D] (torch.chunk's Slices along the last axis), each [B, G, S, H, D] transposed to [B, G, H, S, D];
    // Q·0.5 and K/4 into the scores, a bias per head, Softmax, ·V, the heads merged back by a Transpose.
    const std::uint32_t B = 2, G = 3, H = 2, S = 5, D = 4, E = H * D;
    std::mt19937 random = test::generator(95);
    std::vector<float> qkv = test::uniformFloats(random, B * G * S * 3 * E, -2.0f, 2.0f);
    const std::vector<float> bias = test::uniformFloats(random, H * S * S, -3.0f, 3.0f);
    qkv[((1 * G + 2) * S + 4) * 3 * E + 2 * E + D + 3] = std::nanf("");  // V at window (1, 2), token 4, head 1, feature 3: that feature of the head's every query NaN
    Model m;
    m.input("qkv", {B, G, S, 3 * E}).constant("heads", {5}, {B, G, S, H, D}).constant("axis", {1}, {-1});
    m.constant("half", {}, {0.5}, false).constant("four", {}, {4.0}, false).constant("bias", {1, H, S, S}, test::widen(bias), false);
    const char* names[] = {"q", "k", "v"};
    for (std::uint32_t p = 0; p < 3; ++p) {
      const std::string n = names[p];
      m.constant(n + "start", {1}, {static_cast<double>(p * E)}).constant(n + "end", {1}, {static_cast<double>((p + 1) * E)});
      m.node("Slice", {"qkv", n + "start", n + "end", "axis"}, n + "1");
      m.node("Reshape", {n + "1", "heads"}, n + "2");
      attributeInts(m.node("Transpose", {n + "2"}, n), "perm", {0, 1, 3, 2, 4});
    }
    m.node("Mul", {"q", "half"}, "qs");
    m.node("Div", {"k", "four"}, "ks");
    attribute(m.node("Einsum", {"qs", "ks"}, "scores"), "equation", std::string("bghid,bghjd->bghij"));
    m.node("Add", {"scores", "bias"}, "biased");
    m.node("Softmax", {"biased"}, "p");
    attribute(m.node("Einsum", {"p", "v"}, "o"), "equation", std::string("bghij,bghjd->bghid"));
    attributeInts(m.node("Transpose", {"o"}, "y"), "perm", {0, 1, 3, 2, 4});
    // y [B, G, S, H, D] in float64; head (b, g, h) NaN where its V holds the NaN.
    std::vector<double> want(B * G * S * E);
    const auto at = [&](std::uint32_t b, std::uint32_t g, std::uint32_t token, std::uint32_t part, std::uint32_t h, std::uint32_t d) {
      return qkv[((b * G + g) * S + token) * 3 * E + part * E + h * D + d];
    };
    for (std::uint32_t b = 0; b < B; ++b)
      for (std::uint32_t g = 0; g < G; ++g)
        for (std::uint32_t h = 0; h < H; ++h)
          for (std::uint32_t i = 0; i < S; ++i) {
            std::vector<double> scores(S);
            double largest = -INFINITY, total = 0;
            for (std::uint32_t j = 0; j < S; ++j) {
              double dot = 0;
              for (std::uint32_t d = 0; d < D; ++d) dot += 0.5 * at(b, g, i, 0, h, d) * at(b, g, j, 1, h, d) / 4;
              scores[j] = dot + bias[(h * S + i) * S + j];
              largest = std::max(largest, scores[j]);
            }
            for (double& score : scores) total += score = std::exp(score - largest);
            for (std::uint32_t d = 0; d < D; ++d) {
              double sum = 0;
              for (std::uint32_t j = 0; j < S; ++j) sum += scores[j] / total * at(b, g, j, 2, h, d);
              want[((b * G + g) * S + i) * E + h * D + d] = sum;
            }
          }
    Shape shape;
    const std::vector<float> got = run(m, {qkv}, &shape);
    CHECK(shape == Shape{B, G, S, H, D});
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(std::isnan(got[i]) == std::isnan(want[i]));
    std::vector<float> gotFinite;
    std::vector<double> wantFinite;
    for (std::size_t i = 0; i < got.size(); ++i) {
      if (std::isnan(want[i])) continue;
      gotFinite.push_back(got[i]);
      wantFinite.push_back(want[i]);
    }
    CHECK(wantFinite.size() == want.size() - S);  // each query of that head, at the NaN's feature
    test::checkClose(gotFinite, wantFinite, 1e-6, 1e-5);
    const std::string became = test::fusedAttention(m);
    CHECK(became.find("Q, K and V read in place from one tensor through their views") != std::string::npos);
    CHECK(opsRun(m) == 1);
  }

  TEST_CASE("a Transpose that moves only axes of length 1 is a view; one that reorders longer axes runs; NaN passes either way") {
    const float nan = std::nanf("");
    // nn.MultiheadAttention's [1, S, E] -> [S, 1, E] at batch 1, here [1, 3, 1, 2] -> [1, 3, 2, 1]: the axes of 3 and 2
    // keep their order, so no element moves. An Add reads the view.
    Model unit;
    unit.input("x", {1, 3, 1, 2}).constant("one", {1}, {1});
    attributeInts(unit.node("Transpose", {"x"}, "t"), "perm", {2, 1, 3, 0});
    unit.node("Add", {"t", "one"}, "y");
    CHECK(summaries(unit).at(named("Transpose", 1)) == "view (only axes of length 1 move)");
    CHECK(opsRun(unit) == 1);
    Shape shape;
    std::vector<float> y = run(unit, {{1, nan, 3, 4, 5, -6}}, &shape);
    CHECK(shape == Shape{1, 3, 2, 1});
    CHECK(y[0] == 2);
    CHECK(std::isnan(y[1]));
    CHECK(std::vector<float>(y.begin() + 2, y.end()) == std::vector<float>{4, 5, 6, -5});
    // [2, 1, 3] -> [3, 1, 2]: the axes of 2 and 3 swap, a transpose on the GPU.
    Model moved;
    moved.input("x", {2, 1, 3}).constant("one", {1}, {1});
    attributeInts(moved.node("Transpose", {"x"}, "t"), "perm", {2, 1, 0});
    moved.node("Add", {"t", "one"}, "y");
    CHECK(summaries(moved).at(named("Transpose", 1)) == "transpose");
    CHECK(opsRun(moved) == 2);
    y = run(moved, {{1, 2, nan, 4, 5, 6}}, &shape);
    CHECK(shape == Shape{3, 1, 2});
    CHECK(y[0] == 2);
    CHECK(y[1] == 5);
    CHECK(y[2] == 3);
    CHECK(y[3] == 6);
    CHECK(std::isnan(y[4]));
    CHECK(y[5] == 7);
    // A repeated axis is refused, not taken for a view.
    Model repeated;
    repeated.input("x", {1, 3});
    attributeInts(repeated.node("Transpose", {"x"}, "y"), "perm", {1, 1});
    CHECK(refusal(repeated).find("transpose's permutation is not one of the axes 0 to 1") != std::string::npos);
  }

  TEST_CASE("a Slice of every element and a Pad of nothing are the tensor itself; a Slice or Pad that changes it runs; NaN passes either way") {
    const float nan = std::nanf("");
    // Swin's crop to [:, :H, :W, :] and its pad to a multiple of the window, where H and W need neither: no op runs but
    // the Add reading them.
    for (const bool padded : {false, true}) {
      CAPTURE(padded);
      for (const std::int64_t amount : {0, 1}) {
        CAPTURE(amount);
        Model m;
        m.input("x", {1, 2, 3}).constant("one", {1}, {1});
        if (padded) {
          m.constant("pads", {6}, {0, 0, 0, 0, 0, static_cast<double>(amount)});
          m.node("Pad", {"x", "pads"}, "p");
        } else {
          m.constant("starts", {2}, {0, 0}).constant("ends", {2}, {2, static_cast<double>(3 - amount)}).constant("axes", {2}, {1, 2});
          m.node("Slice", {"x", "starts", "ends", "axes"}, "p");
        }
        m.node("Add", {"p", "one"}, "y");
        const std::string op = padded ? "Pad" : "Slice";
        CHECK(summaries(m).at(named(op, 1)) == (amount == 0 ? "identity" : padded ? "pad" : "slice"));
        CHECK(opsRun(m) == (amount == 0 ? 1u : 2u));
        Shape shape;
        const std::vector<float> y = run(m, {{1, nan, 3, 4, 5, -6}}, &shape);
        CHECK(shape == (amount == 0 ? Shape{1, 2, 3} : padded ? Shape{1, 2, 4} : Shape{1, 2, 2}));
        const std::vector<float> want = amount == 0 ? std::vector<float>{2, nan, 4, 5, 6, -5}
                                        : padded    ? std::vector<float>{2, nan, 4, 1, 5, 6, -5, 1}
                                                    : std::vector<float>{2, nan, 5, 6};
        REQUIRE(y.size() == want.size());
        for (std::size_t i = 0; i < y.size(); ++i) CHECK((std::isnan(want[i]) ? std::isnan(y[i]) : y[i] == want[i]));
      }
    }
  }

  TEST_CASE("Slices of one tensor joined by Concats (torch.roll along two axes, Swin's patch merging) run as one op of region copies; a Slice read elsewhere too still runs; NaN passes") {
    const std::uint32_t H = 5, W = 4, C = 3;
    std::mt19937 random = test::generator(96);
    std::vector<float> x = test::uniformFloats(random, H * W * C, -2.0f, 2.0f);
    x[(2 * W + 3) * C + 1] = std::nanf("");
    const auto at = [&](std::uint32_t h, std::uint32_t w, std::uint32_t c) { return x[(h * W + w) * C + c]; };
    const auto slice = [](Model& m, const std::string& in, const std::string& out, std::int64_t start, std::int64_t end, std::int64_t axis,
                          std::int64_t step) {
      m.constant(out + "s", {1}, {static_cast<double>(start)}).constant(out + "e", {1}, {static_cast<double>(end)});
      m.constant(out + "a", {1}, {static_cast<double>(axis)}).constant(out + "t", {1}, {static_cast<double>(step)});
      m.node("Slice", {in, out + "s", out + "e", out + "a", out + "t"}, out);
    };
    for (const bool readElsewhere : {false, true}) {
      CAPTURE(readElsewhere);
      // torch.roll(x, (-2, -1), (1, 2)) of [1, H, W, C]: y[h, w] = x[(h + 2) mod H, (w + 1) mod W].
      Model roll;
      roll.input("x", {1, H, W, C});
      slice(roll, "x", "a0", 2, H, 1, 1);
      slice(roll, "x", "a1", 0, 2, 1, 1);
      attribute(roll.node("Concat", {"a0", "a1"}, "r"), "axis", 1);
      slice(roll, "r", "b0", 1, W, 2, 1);
      slice(roll, "r", "b1", 0, 1, 2, 1);
      attribute(roll.node("Concat", {"b0", "b1"}, readElsewhere ? "rolled" : "y"), "axis", 2);
      if (readElsewhere) {
        roll.node("Shape", {"a1"}, "unused");  // a reader of its shape alone does not keep a Slice
        roll.node("Neg", {"b1"}, "negated");   // b1's values read again: its Slice runs too
        attribute(roll.node("Concat", {"rolled", "negated"}, "y"), "axis", 2);
      }
      std::vector<double> want;
      for (std::uint32_t h = 0; h < H; ++h) {
        for (std::uint32_t w = 0; w < W + (readElsewhere ? 1 : 0); ++w) {
          for (std::uint32_t c = 0; c < C; ++c) want.push_back(w < W ? at((h + 2) % H, (w + 1) % W, c) : -double{at((h + 2) % H, 0, c)});
        }
      }
      Shape shape;
      const std::vector<float> y = run(roll, {x}, &shape);
      CHECK(shape == Shape{1, H, W + (readElsewhere ? 1 : 0), C});
      REQUIRE(y.size() == want.size());
      for (std::size_t i = 0; i < y.size(); ++i) CHECK((std::isnan(want[i]) ? std::isnan(y[i]) : y[i] == static_cast<float>(want[i])));
      const std::map<std::string, std::string> became = summaries(roll);
      CHECK(became.at(named("Concat", 6)).rfind("concat of 4 regions of one tensor", 0) == 0);
      // The regions; with b1 read again also its Slice, the first roll's Concat (as regions) that the Slice reads, the
      // Neg and the last Concat.
      CHECK(opsRun(roll) == (readElsewhere ? 5u : 1u));
    }
    // Swin's patch merging of [1, H - 1, W, C]: x[:, 0::2, 0::2], x[:, 1::2, 0::2], x[:, 0::2, 1::2], x[:, 1::2, 1::2]
    // joined along the channels, each a Slice of a Slice with steps of 2.
    Model merging;
    merging.input("x", {1, H - 1, W, C});
    const std::vector<float> even(x.begin(), x.begin() + (H - 1) * W * C);
    std::vector<std::string> parts;
    for (const std::int64_t column : {0, 1}) {
      for (const std::int64_t row : {0, 1}) {
        const std::string name = "p" + std::to_string(row) + std::to_string(column);
        slice(merging, "x", name + "r", row, H - 1, 1, 2);
        slice(merging, name + "r", name, column, W, 2, 2);
        parts.push_back(name);
      }
    }
    attribute(merging.node("Concat", parts, "y"), "axis", -1);
    std::vector<double> want;
    for (std::uint32_t h = 0; h < (H - 1) / 2; ++h) {
      for (std::uint32_t w = 0; w < W / 2; ++w) {
        for (const std::uint32_t column : {0u, 1u}) {
          for (const std::uint32_t row : {0u, 1u}) {
            for (std::uint32_t c = 0; c < C; ++c) want.push_back(at(2 * h + row, 2 * w + column, c));
          }
        }
      }
    }
    Shape shape;
    const std::vector<float> y = run(merging, {even}, &shape);
    CHECK(shape == Shape{1, (H - 1) / 2, W / 2, 4 * C});
    REQUIRE(y.size() == want.size());
    for (std::size_t i = 0; i < y.size(); ++i) CHECK((std::isnan(want[i]) ? std::isnan(y[i]) : y[i] == static_cast<float>(want[i])));
    CHECK(std::count_if(want.begin(), want.end(), [](double v) { return std::isnan(v); }) == 1);
    CHECK(opsRun(merging) == 1u);
  }

  TEST_CASE("Slice folds constants of any rank, with every start, end, axis and step, and Transpose folds constants") {
    // BERT's position_ids buffer [1, 8] sliced to the sequence, then every second id.
    Model m;
    m.input("x", {1, 3}).constant("ids", {1, 8}, {0, 1, 2, 3, 4, 5, 6, 7}).constant("starts", {2}, {0, 2}).constant("ends", {2}, {1, 7});
    m.constant("axes", {2}, {0, -1}).constant("steps", {2}, {1, 2});
    m.node("Slice", {"ids", "starts", "ends", "axes", "steps"}, "positions");
    m.node("Add", {"x", "positions"}, "y");
    CHECK(run(m, {{0, 0, 0}}) == std::vector<float>{2, 4, 6});
    // A 1-D constant with a negative step along axis -1 (once refused, its axis and step once ignored).
    Model reversed;
    reversed.input("x", {3}).constant("c", {10}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}).constant("starts", {1}, {8}).constant("ends", {1}, {0});
    reversed.constant("axes", {1}, {-1}).constant("steps", {1}, {-3});
    reversed.node("Slice", {"c", "starts", "ends", "axes", "steps"}, "part");
    reversed.node("Add", {"x", "part"}, "y");
    CHECK(run(reversed, {{0, 0, 0}}) == std::vector<float>{8, 5, 2});
    Model outside;
    outside.input("x", {3}).constant("c", {10}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}).constant("starts", {2}, {0, 0}).constant("ends", {2}, {3, 3});
    outside.node("Slice", {"c", "starts", "ends"}, "part");
    outside.node("Add", {"x", "part"}, "y");
    CHECK(refusal(outside).find("axis 1 is outside rank 1") != std::string::npos);
    Model transposed;
    transposed.input("x", {3, 2}).constant("c", {2, 3}, {1, 2, 3, 4, 5, 6}, false);
    transposed.node("Transpose", {"c"}, "t");  // no perm: the axes reversed
    transposed.node("Add", {"x", "t"}, "y");
    CHECK(run(transposed, {{0, 0, 0, 0, 0, 0}}) == std::vector<float>{1, 4, 2, 5, 3, 6});
  }
}
