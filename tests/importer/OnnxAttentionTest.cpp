// The importer's fused attention on small hand-made ONNX graphs: Q, K and V read in place from one dense layer of
// their projections joined or from their split, and the causal Where of GPT-2's eager export (as the op's causal flag,
// or an additive mask beside a padding mask; found from the product with V back where the scale comes after Q·Kᵀ);
// against float64 worked out here (float32 where the export's lowest float overflows), with what each node became.
#include "importer/Onnx.h"
#include "support/Compare.h"
#include "support/OnnxTestModel.h"
#include "support/Random.h"

#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

using namespace glnet;

using test::affine;
using test::attribute;
using test::attributeInts;
using test::fusedAttention;
using test::named;
using test::opsRun;
using test::refusal;
using test::run;
using test::summaries;
using Model = test::OnnxTestModel;

namespace {

// softmax(Q·Kᵀ·scale + mask)·V of [N, S, D] arrays in float64; the mask [S, S] (empty: none), the same for every n.
std::vector<double> attend(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v, std::size_t n,
                           std::size_t s, std::size_t d, double scale, const std::vector<float>& mask) {
  std::vector<double> out(n * s * d, 0.0);
  for (std::size_t b = 0; b < n; ++b)
    for (std::size_t i = 0; i < s; ++i) {
      std::vector<double> p(s);
      double largest = -INFINITY, total = 0;
      for (std::size_t j = 0; j < s; ++j) {
        for (std::size_t e = 0; e < d; ++e) p[j] += double{q[(b * s + i) * d + e]} * k[(b * s + j) * d + e];
        p[j] = p[j] * scale + (mask.empty() ? 0.0 : mask[i * s + j]);
        largest = std::max(largest, p[j]);
      }
      for (double& x : p) total += x = std::exp(x - largest);
      for (std::size_t j = 0; j < s; ++j)
        for (std::size_t e = 0; e < d; ++e) out[(b * s + i) * d + e] += p[j] / total * v[(b * s + j) * d + e];
    }
  return out;
}

// [S, N, D] as [N, S, D].
std::vector<float> batchFirst(const std::vector<float>& x, std::size_t s, std::size_t n, std::size_t d) {
  std::vector<float> y(x.size());
  for (std::size_t i = 0; i < s; ++i)
    for (std::size_t b = 0; b < n; ++b)
      for (std::size_t e = 0; e < d; ++e) y[(b * s + i) * d + e] = x[(i * n + b) * d + e];
  return y;
}

}  // namespace

TEST_SUITE("gl") {
  TEST_CASE("an attention's Q, K and V projections of one input run as one dense layer read in place, a split projection is read in place; a projection read elsewhere too keeps its own") {
    // x [B, S, in] projected to Q, K, V [B, S, H·D] (MatMul and bias), each split into heads by Reshape and Transpose, K
    // transposed again (BERT's eager export), scaled scores, Softmax, ·V, the heads merged.
    constexpr std::size_t B = 2, S = 5, in = 4, H = 2, D = 3, width = H * D;
    std::mt19937 random = test::generator(52);
    const std::vector<float> x = test::uniformFloats(random, B * S * in, -2, 2);
    std::array<std::vector<double>, 3> w, b, projected;
    for (std::size_t p = 0; p < 3; ++p) {
      w[p] = test::widen(test::uniformFloats(random, in * width));
      b[p] = test::widen(test::uniformFloats(random, width));
      projected[p] = affine(x, w[p], b[p], in);  // [B·S, H·D]
    }
    const double scale = 1 / std::sqrt(double{D});
    std::vector<double> attended(B * S * width);  // [B, S, H·D]
    for (std::size_t n = 0; n < B; ++n)
      for (std::size_t h = 0; h < H; ++h)
        for (std::size_t i = 0; i < S; ++i) {
          const auto at = [&](std::size_t row, std::size_t d) { return (n * S + row) * width + h * D + d; };
          std::vector<double> p(S);
          double largest = -INFINITY, total = 0;
          for (std::size_t j = 0; j < S; ++j) {
            for (std::size_t d = 0; d < D; ++d) p[j] += projected[0][at(i, d)] * projected[1][at(j, d)] * scale;
            largest = std::max(largest, p[j]);
          }
          for (double& v : p) total += v = std::exp(v - largest);
          for (std::size_t d = 0; d < D; ++d) {
            for (std::size_t j = 0; j < S; ++j) attended[at(i, d)] += p[j] / total * projected[2][at(j, d)];
          }
        }
    // The three projections apart; the same with V's also read by a later Add; one projection of the three side by side
    // split along its last axis (GPT-2's c_attn); one projection of the three, sequence first, reshaped, transposed and
    // gathered into Q, K and V, each split into heads with batch and heads as one axis between (PyTorch 2's export of
    // nn.MultiheadAttention, as in torchvision's ViT; at B = 2 that axis is no single stride of the projection).
    enum class Form { apart, valueReadTwice, split, gathered };
    for (const Form form : {Form::apart, Form::valueReadTwice, Form::split, Form::gathered}) {
      const bool valueReadTwice = form == Form::valueReadTwice;
      CAPTURE(static_cast<int>(form));
      Model m;
      m.input("x", {B, S, in}).constant("heads", {4}, {B, S, H, D}).constant("merged", {3}, {B, S, width});
      m.constant("scale", {}, {scale}, false);
      const char* names[] = {"q", "k", "v"};
      if (form == Form::split || form == Form::gathered) {
        std::vector<double> joinedWeight(in * 3 * width), joinedBias;
        for (std::size_t p = 0; p < 3; ++p) {
          for (std::size_t i = 0; i < in; ++i)
            for (std::size_t o = 0; o < width; ++o) joinedWeight[i * 3 * width + p * width + o] = w[p][i * width + o];
          joinedBias.insert(joinedBias.end(), b[p].begin(), b[p].end());
        }
        m.constant("wqkv", {in, 3 * width}, joinedWeight, false).constant("bqkv", {3 * width}, joinedBias, false);
        m.constant("sizes", {3}, {width, width, width});
        if (form == Form::gathered) {
          m.constant("parts", {4}, {S, B, 3, width}).constant("first", {1}, {0}).constant("fourth", {1}, {3});
          m.constant("rowsOfHeads", {3}, {S, B * H, D}).constant("batchHeads", {4}, {B, H, S, D});
          attributeInts(m.node("Transpose", {"x"}, "xs"), "perm", {1, 0, 2});
          m.node("MatMul", {"xs", "wqkv"}, "qkv0");
          m.node("Add", {"qkv0", "bqkv"}, "qkv");
          m.node("Reshape", {"qkv", "parts"}, "qkv1");
          m.node("Unsqueeze", {"qkv1", "first"}, "qkv2");
          attributeInts(m.node("Transpose", {"qkv2"}, "qkv3"), "perm", {3, 1, 2, 0, 4});
          m.node("Squeeze", {"qkv3", "fourth"}, "qkv4");
        } else {
          m.node("MatMul", {"x", "wqkv"}, "qkv0");
          m.node("Add", {"qkv0", "bqkv"}, "qkv");
          onnx::NodeProto& split = m.node("Split", {"qkv", "sizes"}, "q1");
          split.add_output("k1");
          split.add_output("v1");
          attribute(split, "axis", -1);
        }
      }
      for (std::size_t p = 0; p < 3; ++p) {
        const std::string n = names[p];
        if (form == Form::gathered) {
          m.constant(n + "index", {}, {static_cast<double>(p) - 3});  // -3, -2, -1: counted from the end
          attribute(m.node("Gather", {"qkv4", n + "index"}, n + "1"), "axis", 0);
          m.node("Reshape", {n + "1", "rowsOfHeads"}, n + "2");
          attributeInts(m.node("Transpose", {n + "2"}, n + "3"), "perm", {1, 0, 2});
          m.node("Reshape", {n + "3", "batchHeads"}, n);
          continue;
        }
        if (form != Form::split) {
          m.constant("w" + n, {in, width}, w[p], false).constant("b" + n, {width}, b[p], false);
          m.node("MatMul", {"x", "w" + n}, n + "0");
          m.node("Add", {n + "0", "b" + n}, n + "1");
        }
        m.node("Shape", {n + "1"}, n + "shape");  // read for its shape alone, as exports do: no reader of the data
        m.node("Reshape", {n + "1", "heads"}, n + "2");
        attributeInts(m.node("Transpose", {n + "2"}, n), "perm", {0, 2, 1, 3});
      }
      attributeInts(m.node("Transpose", {"k"}, "kt"), "perm", {0, 1, 3, 2});
      m.node("MatMul", {"q", "kt"}, "scores");
      m.node("Mul", {"scores", "scale"}, "scaled");
      attribute(m.node("Softmax", {"scaled"}, "p"), "axis", -1);
      m.node("MatMul", {"p", "v"}, "o");
      if (form == Form::gathered) {
        // Sequence first again, [S, B, H, D], as nn.MultiheadAttention merges the heads (the op writes in that order),
        // then batch first.
        m.constant("sequenceFirst", {3}, {S, B, width});
        attributeInts(m.node("Transpose", {"o"}, "om"), "perm", {2, 0, 1, 3});
        m.node("Reshape", {"om", "sequenceFirst"}, "ys");
        attributeInts(m.node("Transpose", {"ys"}, "y"), "perm", {1, 0, 2});
      } else {
        attributeInts(m.node("Transpose", {"o"}, "om"), "perm", {0, 2, 1, 3});
        m.node("Reshape", {"om", "merged"}, valueReadTwice ? "attended" : "y");
      }
      std::vector<double> want = attended;
      if (valueReadTwice) {
        m.node("Add", {"attended", "v1"}, "y");
        for (std::size_t i = 0; i < want.size(); ++i) want[i] += projected[2][i];
      }
      Shape shape;
      test::checkClose(run(m, {x}, &shape), want, 1e-5, 1e-5);
      CHECK(shape == Shape{B, S, width});
      const std::map<std::string, std::string> became = summaries(m);
      const std::string attention = fusedAttention(m);
      REQUIRE(!attention.empty());
      CHECK((attention.find("Q, K and V from one dense layer") != std::string::npos) == (form == Form::apart));
      CHECK((attention.find("Q, K and V read in place from their split") != std::string::npos) == (form == Form::split));
      CHECK((attention.find("Q, K and V read in place from one tensor through their views") != std::string::npos) == (form == Form::gathered));
      if (form == Form::apart || form == Form::valueReadTwice) {
        for (const int matmul : {1, 6, 11}) {
          CHECK(became.at(named("MatMul", matmul)) == (valueReadTwice ? "dense" : "dense (joined with the attention's other projections)"));
        }
      }
      // Joined or split: one dense layer and the attention (the split's slices never run); else three dense layers,
      // the attention and the Add. Gathered: the input's transpose and the output's too (the Transposes, Gathers and
      // Reshapes between never run).
      CHECK(opsRun(m) == (valueReadTwice ? 5u : form == Form::gathered ? 4u : 2u));
    }
  }

  TEST_CASE("an attention reading another's output through the Transpose that attention wrote in its order reads it as written") {
    // Attention 1 over x [1, H, S, D] writes [1, S, H, D] as the Transpose after it asks; attention 2 takes that output
    // for its Q, K and V of [1, H', S', D] (S = H, so the shapes agree either way): the Transpose never ran, and is no
    // view to take again.
    constexpr std::size_t H = 4, S = 4, D = 8;
    std::mt19937 random = test::generator(54);
    const std::vector<float> x = test::uniformFloats(random, H * S * D, -1, 1);
    Model m;
    m.input("x", {1, H, S, D});
    attributeInts(m.node("Transpose", {"x"}, "xt"), "perm", {0, 1, 3, 2});
    m.node("MatMul", {"x", "xt"}, "s1");
    attribute(m.node("Softmax", {"s1"}, "p1"), "axis", -1);
    m.node("MatMul", {"p1", "x"}, "o1");
    attributeInts(m.node("Transpose", {"o1"}, "y1"), "perm", {0, 2, 1, 3});
    attributeInts(m.node("Transpose", {"y1"}, "y1t"), "perm", {0, 1, 3, 2});
    m.node("MatMul", {"y1", "y1t"}, "s2");
    attribute(m.node("Softmax", {"s2"}, "p2"), "axis", -1);
    m.node("MatMul", {"p2", "y1"}, "y");
    const std::vector<double> first = attend(x, x, x, H, S, D, 1, {});  // [H, S, D]
    std::vector<float> merged(H * S * D);  // [S, H, D]
    for (std::size_t h = 0; h < H; ++h)
      for (std::size_t i = 0; i < S; ++i)
        for (std::size_t d = 0; d < D; ++d) merged[(i * H + h) * D + d] = static_cast<float>(first[(h * S + i) * D + d]);
    test::checkClose(run(m, {x}), attend(merged, merged, merged, S, H, D, 1, {}), 1e-5, 1e-5);
  }

  TEST_CASE("a causal Where before Softmax is the fused attention's causal flag alone, an additive mask beside a padding mask or for another condition; found from ·V back when the scale comes after Q·Kᵀ") {
    constexpr std::size_t B = 2, H = 2, Sk = 5, D = 3;
    const float lowest = std::numeric_limits<float>::lowest();
    std::mt19937 random = test::generator(53);
    // The padding mask as GPT-2 makes it: 0 for a real token, the lowest float for padding (the second row's first two).
    std::vector<float> mask(B * Sk, 0.0f);
    mask[Sk] = mask[Sk + 1] = lowest;
    struct Case {
      bool masked, lateScale;
      std::size_t sq;
      int shift;  // key j kept for query i where j + Sq <= i + Sk + shift: 0 is causal, -1 hides each query's own key too
    };
    for (const Case c : {Case{false, false, Sk, 0}, Case{false, true, Sk, 0}, Case{true, false, Sk, 0}, Case{true, true, Sk, 0},
                         Case{false, false, Sk, -1}, Case{false, true, 3, 0}}) {
      CAPTURE(c.masked);
      CAPTURE(c.lateScale);
      CAPTURE(c.sq);
      CAPTURE(c.shift);
      const std::size_t Sq = c.sq;
      const std::vector<float> q = test::uniformFloats(random, B * H * Sq * D, -2, 2), k = test::uniformFloats(random, B * H * Sk * D, -2, 2),
                               v = test::uniformFloats(random, B * H * Sk * D, -2, 2);
      const auto kept = [&](std::size_t i, std::size_t j) { return static_cast<int>(j + Sq) <= static_cast<int>(i + Sk) + c.shift; };
      std::vector<double> condition(Sq * Sk);
      for (std::size_t i = 0; i < Sq; ++i)
        for (std::size_t j = 0; j < Sk; ++j) condition[i * Sk + j] = kept(i, j) ? 1 : 0;
      Model m;
      m.input("q", {B, H, static_cast<std::int64_t>(Sq), D}).input("k", {B, H, Sk, D}).input("v", {B, H, Sk, D});
      if (c.masked) m.input("mask", {B, 1, 1, Sk});
      m.constant("keep", {1, 1, static_cast<std::int64_t>(Sq), Sk}, condition).constant("lowest", {}, {lowest}, false);
      attributeInts(m.node("Transpose", {"k"}, "kt"), "perm", {0, 1, 3, 2});
      const std::string product = m.node("MatMul", {"q", "kt"}, "scores").name();
      std::string scaling;
      if (c.lateScale) {
        // A divisor of 2 made after the product, as GPT-2's export computes √D from the shapes.
        m.constantNode("one", {}, {1.0});
        m.constantNode("another", {}, {1.0});
        m.node("Add", {"one", "another"}, "divisor");
        scaling = m.node("Div", {"scores", "divisor"}, "scaled").name();
      } else {
        m.constant("half", {}, {0.5}, false);
        scaling = m.node("Mul", {"scores", "half"}, "scaled").name();
      }
      m.node("Where", {"keep", "scaled", "lowest"}, c.masked ? "kept" : "logits");
      if (c.masked) m.node("Add", {"kept", "mask"}, "logits");
      attribute(m.node("Softmax", {"logits"}, "p"), "axis", -1);
      m.node("MatMul", {"p", "v"}, "y");
      // Float64 but for the sums with the lowest float, which overflow in float32 as in the export.
      std::vector<double> want(B * H * Sq * D, 0.0);
      for (std::size_t b = 0; b < B; ++b)
        for (std::size_t h = 0; h < H; ++h)
          for (std::size_t i = 0; i < Sq; ++i) {
            const std::size_t qBase = (b * H + h) * Sq * D, kBase = (b * H + h) * Sk * D;
            std::vector<double> logit(Sk);
            double largest = -INFINITY, total = 0;
            for (std::size_t j = 0; j < Sk; ++j) {
              double score = 0;
              for (std::size_t d = 0; d < D; ++d) score += double{q[qBase + i * D + d]} * k[kBase + j * D + d];
              score *= 0.5;
              const float where = kept(i, j) ? static_cast<float>(score) : lowest;
              logit[j] = c.masked ? static_cast<double>(where + mask[b * Sk + j]) : kept(i, j) ? score : double{lowest};
              largest = std::max(largest, logit[j]);
            }
            for (double& l : logit) total += l = std::exp(l - largest);
            for (std::size_t j = 0; j < Sk; ++j)
              for (std::size_t d = 0; d < D; ++d) want[qBase + i * D + d] += logit[j] / total * v[kBase + j * D + d];
          }
      std::vector<std::vector<float>> inputs{q, k, v};
      if (c.masked) inputs.push_back(mask);
      test::checkClose(run(m, inputs), want, 1e-5, 1e-5);
      REQUIRE(!fusedAttention(m).empty());
      const std::map<std::string, std::string> became = summaries(m);
      // A scale made after the product: the ops made before the product with V was found are listed as fused.
      if (c.lateScale) {
        CHECK(became.at(product) == "fused into the attention");
        CHECK(became.at(scaling) == "fused into the attention");
      }
      // The causal condition alone: the attention is the one op (the causal flag). With the padding mask: the Where's
      // 0 or lowest, added to it; another condition: the Where's 0 or lowest as the mask.
      const bool causalFlag = !c.masked && c.shift == 0;
      CHECK(opsRun(m) == (causalFlag ? 1u : c.masked ? 3u : 2u));
    }
  }
  TEST_CASE("PyTorch 1's nn.MultiheadAttention, its in-projection chunked by three Slices, read in place; at batch 3 batch and heads (no single stride together) as the op's two axes, a mask per batch and head read so; the heads' merge Transpose written by the op") {
    // qkv [S, B, 3·H·D] sliced along its last axis into Q, K and V, each viewed as [S, B·H, D] and transposed to
    // [B·H, S, D], Q scaled by a Div, Kᵀ by a second Transpose, with or without a mask [B·H, 1, S] added (a key padding
    // mask as PyTorch 1 adds it), Softmax, ·V, with or without the heads merged back to [S, B·H, D] by a Transpose,
    // which the op's output then takes.
    constexpr std::size_t S = 5, H = 2, D = 3, E = H * D;
    for (const std::size_t B : {std::size_t{1}, std::size_t{3}}) {  // 3, not H: the mask's batch and heads must not be taken for each other
      for (const int form : {0, 1, 2, 3}) {
        const bool masked = form & 1, merged = form & 2;  // merged: the heads back, sequence first, by the Transpose after ·V
        CAPTURE(B);
        CAPTURE(masked);
        CAPTURE(merged);
        std::mt19937 random = test::generator(57 + static_cast<unsigned>(B));
        std::vector<float> qkv = test::uniformFloats(random, S * B * 3 * E, -2, 2);
        const std::vector<float> mask = test::uniformFloats(random, B * H * S, -3, 3);
        // At B = 3 one element of K (row 3, batch 1, head 1): that head's every query meets it, NaN in, NaN out.
        const std::size_t nanHead = B > 1 ? 3 : B * H;
        if (B > 1) qkv[(3 * B + 1) * 3 * E + E + D + 1] = std::nanf("");
        const auto part = [&](std::size_t which, std::size_t n) {  // head n of [B·H, S, D]
          std::vector<float> x(S * D);
          for (std::size_t i = 0; i < S; ++i)
            for (std::size_t d = 0; d < D; ++d) x[i * D + d] = qkv[(i * B + n / H) * 3 * E + which * E + n % H * D + d];
          return x;
        };
        Model m;
        m.input("qkv", {S, static_cast<std::int64_t>(B), 3 * E}).constant("rowsOfHeads", {3}, {S, static_cast<double>(B * H), D});
        m.constant("root", {}, {std::sqrt(double{D})}, false).constant("axis", {1}, {-1});
        if (masked) m.constant("mask", {static_cast<std::int64_t>(B * H), 1, S}, test::widen(mask), false);
        const char* names[] = {"q", "k", "v"};
        for (std::size_t p = 0; p < 3; ++p) {
          const std::string n = names[p];
          m.constant(n + "start", {1}, {static_cast<double>(p * E)}).constant(n + "end", {1}, {static_cast<double>((p + 1) * E)});
          m.node("Slice", {"qkv", n + "start", n + "end", "axis"}, n + "1");
          m.node("Reshape", {n + "1", "rowsOfHeads"}, n + "2");
          attributeInts(m.node("Transpose", {n + "2"}, p == 0 ? "q3" : n), "perm", {1, 0, 2});
        }
        m.node("Div", {"q3", "root"}, "q");
        attributeInts(m.node("Transpose", {"k"}, "kt"), "perm", {0, 2, 1});
        m.node("MatMul", {"q", "kt"}, "scores");
        if (masked) m.node("Add", {"scores", "mask"}, "maskedScores");
        attribute(m.node("Softmax", {masked ? "maskedScores" : "scores"}, "p"), "axis", -1);
        m.node("MatMul", {"p", "v"}, merged ? "o" : "y");
        if (merged) attributeInts(m.node("Transpose", {"o"}, "y"), "perm", {1, 0, 2});
        std::vector<double> want;
        for (std::size_t n = 0; n < B * H; ++n) {
          std::vector<float> headMask;
          for (std::size_t i = 0; masked && i < S; ++i) headMask.insert(headMask.end(), mask.begin() + static_cast<std::ptrdiff_t>(n * S), mask.begin() + static_cast<std::ptrdiff_t>((n + 1) * S));
          const std::vector<double> head = attend(part(0, n), part(1, n), part(2, n), 1, S, D, 1 / std::sqrt(double{D}), headMask);
          want.insert(want.end(), head.begin(), head.end());
        }
        Shape shape;
        std::vector<float> got = run(m, {qkv}, &shape);
        CHECK(shape == (merged ? Shape{S, static_cast<std::uint32_t>(B * H), D} : Shape{static_cast<std::uint32_t>(B * H), S, D}));
        if (merged) {  // back to [B·H, S, D], to compare
          const std::vector<float> sequenceFirst = got;
          for (std::size_t i = 0; i < S; ++i)
            for (std::size_t n = 0; n < B * H; ++n)
              for (std::size_t d = 0; d < D; ++d) got[(n * S + i) * D + d] = sequenceFirst[(i * B * H + n) * D + d];
        }
        REQUIRE(got.size() == want.size());
        for (std::size_t i = 0; i < got.size(); ++i) CHECK(std::isnan(got[i]) == (i / (S * D) == nanHead));
        std::vector<float> gotFinite;
        std::vector<double> wantFinite;
        for (std::size_t i = 0; i < got.size(); ++i) {
          if (i / (S * D) == nanHead) continue;
          gotFinite.push_back(got[i]);
          wantFinite.push_back(want[i]);
        }
        CHECK(gotFinite.size() == (B * H - (B > 1 ? 1 : 0)) * S * D);
        test::checkClose(gotFinite, wantFinite, 1e-5, 1e-5);
        CHECK(fusedAttention(m).find("Q, K and V read in place from one tensor through their views") != std::string::npos);
        CHECK(opsRun(m) == 1u);
      }
    }
  }

  TEST_CASE("a rank-4 attention of one head whose batch axis is two strides of its source is no rank-3 one: its batch stays one axis, its output and mask the model's") {
    // x [A, S, C, 3·D]: Q, K and V its last axis' thirds, each transposed to [A, C, S, D] and viewed as [A·C, 1, S, D]
    // (the batch A·C two strides of x, the head one), a mask [A·C, 1, S, S], softmax(Q·Kᵀ/√D + mask)·V, then the head
    // moved after the sequence ([A·C, S, 1, D]) and viewed as [A·C·S, D].
    constexpr std::size_t A = 2, S = 5, C = 3, D = 4;
    std::mt19937 random = test::generator(58);
    const std::vector<float> x = test::uniformFloats(random, A * S * C * 3 * D, -2, 2), mask = test::uniformFloats(random, A * C * S * S, -2, 2);
    Model m;
    m.input("x", {A, S, C, 3 * D}).constant("axis", {1}, {-1}).constant("oneHead", {4}, {A * C, 1, S, D}).constant("rows", {2}, {A * C * S, D});
    m.constant("root", {}, {std::sqrt(double{D})}, false).constant("mask", {A * C, 1, S, S}, test::widen(mask), false);
    const char* names[] = {"q", "k", "v"};
    for (std::size_t p = 0; p < 3; ++p) {
      const std::string n = names[p];
      m.constant(n + "start", {1}, {static_cast<double>(p * D)}).constant(n + "end", {1}, {static_cast<double>((p + 1) * D)});
      m.node("Slice", {"x", n + "start", n + "end", "axis"}, n + "1");
      attributeInts(m.node("Transpose", {n + "1"}, n + "2"), "perm", {0, 2, 1, 3});
      m.node("Reshape", {n + "2", "oneHead"}, n);
    }
    attributeInts(m.node("Transpose", {"k"}, "kt"), "perm", {0, 1, 3, 2});
    m.node("MatMul", {"q", "kt"}, "scores");
    m.node("Div", {"scores", "root"}, "scaled");
    m.node("Add", {"scaled", "mask"}, "masked");
    attribute(m.node("Softmax", {"masked"}, "p"), "axis", -1);
    m.node("MatMul", {"p", "v"}, "o");
    attributeInts(m.node("Transpose", {"o"}, "om"), "perm", {0, 2, 1, 3});
    m.node("Reshape", {"om", "rows"}, "y");
    std::vector<double> want;  // [A·C, S, D]
    for (std::size_t n = 0; n < A * C; ++n) {
      const auto part = [&](std::size_t which) {
        std::vector<float> t(S * D);
        for (std::size_t i = 0; i < S; ++i)
          for (std::size_t d = 0; d < D; ++d) t[i * D + d] = x[((n / C * S + i) * C + n % C) * 3 * D + which * D + d];
        return t;
      };
      const std::vector<float> headMask(mask.begin() + static_cast<std::ptrdiff_t>(n * S * S), mask.begin() + static_cast<std::ptrdiff_t>((n + 1) * S * S));
      const std::vector<double> head = attend(part(0), part(1), part(2), 1, S, D, 1 / std::sqrt(double{D}), headMask);
      want.insert(want.end(), head.begin(), head.end());
    }
    Shape shape;
    test::checkClose(run(m, {x}, &shape), want, 1e-5, 1e-5);
    CHECK(shape == Shape{A * C * S, D});
    CHECK(!fusedAttention(m).empty());
  }

  TEST_CASE("rank-3 attention (batch · heads as one axis, sequence first before its Transposes) runs fused, with an inference Dropout; a 4-D mask or a training Dropout keeps the ops") {
    constexpr std::size_t S = 6, N = 3, D = 4;
    std::mt19937 random = test::generator(54);
    const std::vector<float> qs = test::uniformFloats(random, S * N * D, -2, 2), ks = test::uniformFloats(random, S * N * D, -2, 2),
                             vs = test::uniformFloats(random, S * N * D, -2, 2), mask = test::uniformFloats(random, S * S, -1, 1);
    const std::vector<float> q = batchFirst(qs, S, N, D), k = batchFirst(ks, S, N, D), v = batchFirst(vs, S, N, D);
    enum class Form { plain, dropout, wideMask, trainingDropout };
    for (const Form form : {Form::plain, Form::dropout, Form::wideMask, Form::trainingDropout}) {
      CAPTURE(static_cast<int>(form));
      Model m;
      m.input("qs", {S, N, D}).input("ks", {S, N, D}).input("vs", {S, N, D}).constant("scale", {}, {0.5}, false);
      if (form == Form::wideMask) m.constant("mask", {1, 1, S, S}, test::widen(mask), false);
      attributeInts(m.node("Transpose", {"qs"}, "q"), "perm", {1, 0, 2});
      m.node("Mul", {"q", "scale"}, "qscaled");
      attributeInts(m.node("Transpose", {"ks"}, "kt"), "perm", {1, 2, 0});  // [N, D, S] at once
      attributeInts(m.node("Transpose", {"vs"}, "v"), "perm", {1, 0, 2});
      m.node("MatMul", {"qscaled", "kt"}, "scores");
      if (form == Form::wideMask) m.node("Add", {"scores", "mask"}, "masked");
      attribute(m.node("Softmax", {form == Form::wideMask ? "masked" : "scores"}, "p"), "axis", -1);
      std::string probabilities = "p";
      if (form == Form::dropout || form == Form::trainingDropout) {
        m.constant("ratio", {}, {0.5}, false).constant("training", {}, {form == Form::trainingDropout ? 1.0 : 0.0});
        m.node("Dropout", {"p", "ratio", "training"}, "kept");
        probabilities = "kept";
      }
      m.node("MatMul", {probabilities, "v"}, "y");
      if (form == Form::trainingDropout) {
        CHECK_MESSAGE(refusal(m).find("training mode is not supported") != std::string::npos, refusal(m));
        continue;
      }
      Shape shape;
      test::checkClose(run(m, {qs, ks, vs}, &shape), attend(q, k, v, N, S, D, 0.5, form == Form::wideMask ? mask : std::vector<float>{}), 1e-5, 1e-5);
      // The [1, 1, S, S] mask widens the scores and the output to rank 4, which the ops give and the fused op would not.
      CHECK(shape == (form == Form::wideMask ? Shape{1, N, S, D} : Shape{N, S, D}));
      CHECK(fusedAttention(m).empty() == (form == Form::wideMask));
      if (form != Form::wideMask) CHECK(opsRun(m) == 1u);
    }
  }
}
