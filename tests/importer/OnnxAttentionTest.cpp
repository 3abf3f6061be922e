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
using test::run;
using test::summaries;
using Model = test::OnnxTestModel;

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
    // split along its last axis (GPT-2's c_attn).
    enum class Form { apart, valueReadTwice, split };
    for (const Form form : {Form::apart, Form::valueReadTwice, Form::split}) {
      const bool valueReadTwice = form == Form::valueReadTwice;
      CAPTURE(static_cast<int>(form));
      Model m;
      m.input("x", {B, S, in}).constant("heads", {4}, {B, S, H, D}).constant("merged", {3}, {B, S, width});
      m.constant("scale", {}, {scale}, false);
      const char* names[] = {"q", "k", "v"};
      if (form == Form::split) {
        std::vector<double> joinedWeight(in * 3 * width), joinedBias;
        for (std::size_t p = 0; p < 3; ++p) {
          for (std::size_t i = 0; i < in; ++i)
            for (std::size_t o = 0; o < width; ++o) joinedWeight[i * 3 * width + p * width + o] = w[p][i * width + o];
          joinedBias.insert(joinedBias.end(), b[p].begin(), b[p].end());
        }
        m.constant("wqkv", {in, 3 * width}, joinedWeight, false).constant("bqkv", {3 * width}, joinedBias, false);
        m.constant("sizes", {3}, {width, width, width});
        m.node("MatMul", {"x", "wqkv"}, "qkv0");
        m.node("Add", {"qkv0", "bqkv"}, "qkv");
        onnx::NodeProto& split = m.node("Split", {"qkv", "sizes"}, "q1");
        split.add_output("k1");
        split.add_output("v1");
        attribute(split, "axis", -1);
      }
      for (std::size_t p = 0; p < 3; ++p) {
        const std::string n = names[p];
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
      attributeInts(m.node("Transpose", {"o"}, "om"), "perm", {0, 2, 1, 3});
      m.node("Reshape", {"om", "merged"}, valueReadTwice ? "attended" : "y");
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
      if (form != Form::split) {
        for (const int matmul : {1, 6, 11}) {
          CHECK(became.at(named("MatMul", matmul)) == (valueReadTwice ? "dense" : "dense (joined with the attention's other projections)"));
        }
      }
      // Joined or split: one dense layer and the attention (the split's slices never run); else three dense layers,
      // the attention and the Add.
      CHECK(opsRun(m) == (valueReadTwice ? 5u : 2u));
    }
  }

  TEST_CASE("a causal Where before Softmax is the fused attention's causal flag alone, an additive mask beside a padding mask; found from ·V back when the scale comes after Q·Kᵀ") {
    constexpr std::size_t B = 2, H = 2, S = 5, D = 3;
    const float lowest = std::numeric_limits<float>::lowest();
    std::mt19937 random = test::generator(53);
    const std::vector<float> q = test::uniformFloats(random, B * H * S * D, -2, 2), k = test::uniformFloats(random, B * H * S * D, -2, 2),
                             v = test::uniformFloats(random, B * H * S * D, -2, 2);
    // The padding mask as GPT-2 makes it: 0 for a real token, the lowest float for padding (the second row's first two).
    std::vector<float> mask(B * S, 0.0f);
    mask[S] = mask[S + 1] = lowest;
    std::vector<double> triangle(S * S);
    for (std::size_t i = 0; i < S; ++i)
      for (std::size_t j = 0; j < S; ++j) triangle[i * S + j] = j <= i ? 1 : 0;
    const double scale = 0.5;
    for (const bool masked : {false, true}) {
      for (const bool lateScale : {false, true}) {
        CAPTURE(masked);
        CAPTURE(lateScale);
        Model m;
        m.input("q", {B, H, S, D}).input("k", {B, H, S, D}).input("v", {B, H, S, D});
        if (masked) m.input("mask", {B, 1, 1, S});
        m.constant("causal", {1, 1, S, S}, triangle).constant("lowest", {}, {lowest}, false);
        attributeInts(m.node("Transpose", {"k"}, "kt"), "perm", {0, 1, 3, 2});
        m.node("MatMul", {"q", "kt"}, "scores");
        if (lateScale) {
          // The divisor made after the product, as GPT-2's export computes √D from the shapes.
          m.constantNode("two", {}, {1.0});
          m.constantNode("one", {}, {1.0});
          m.node("Add", {"two", "one"}, "divisor");
          m.node("Div", {"scores", "divisor"}, "scaled");
        } else {
          m.constant("scale", {}, {scale}, false);
          m.node("Mul", {"scores", "scale"}, "scaled");
        }
        m.node("Where", {"causal", "scaled", "lowest"}, masked ? "kept" : "logits");
        if (masked) m.node("Add", {"kept", "mask"}, "logits");
        attribute(m.node("Softmax", {"logits"}, "p"), "axis", -1);
        m.node("MatMul", {"p", "v"}, "y");
        // Float64 but for the sums with the lowest float, which overflow in float32 as in the export.
        std::vector<double> want(B * H * S * D, 0.0);
        for (std::size_t b = 0; b < B; ++b)
          for (std::size_t h = 0; h < H; ++h)
            for (std::size_t i = 0; i < S; ++i) {
              const std::size_t base = (b * H + h) * S * D;
              std::vector<double> logit(S);
              double largest = -INFINITY, total = 0;
              for (std::size_t j = 0; j < S; ++j) {
                double s = 0;
                for (std::size_t d = 0; d < D; ++d) s += double{q[base + i * D + d]} * k[base + j * D + d];
                s *= lateScale ? 0.5 : scale;
                const float kept = j <= i ? static_cast<float>(s) : lowest;
                logit[j] = masked ? static_cast<double>(kept + mask[b * S + j]) : (j <= i ? s : double{lowest});
                largest = std::max(largest, logit[j]);
              }
              for (double& l : logit) total += l = std::exp(l - largest);
              for (std::size_t j = 0; j < S; ++j)
                for (std::size_t d = 0; d < D; ++d) want[base + i * D + d] += logit[j] / total * v[base + j * D + d];
            }
        std::vector<std::vector<float>> inputs{q, k, v};
        if (masked) inputs.push_back(mask);
        test::checkClose(run(m, inputs), want, 1e-5, 1e-5);
        REQUIRE(!fusedAttention(m).empty());
        const std::map<std::string, std::string> became = summaries(m);
        const auto product = became.find(named("MatMul", 2));  // Q·Kᵀ: listed where it was imported before it fused
        CHECK((product == became.end() || product->second == "fused into the attention"));
        // Alone, the causal flag: the attention is the one op. With the mask: the Where's 0 or lowest, added to it.
        CHECK(opsRun(m) == (masked ? 3u : 1u));
      }
    }
  }
}
