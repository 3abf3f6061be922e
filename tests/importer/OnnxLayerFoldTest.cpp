// Constants folded at import into the dense or conv layer before them, on small hand-made ONNX graphs: a scale per
// output channel (ConvNeXt's layer scale, past its block's Transpose) and BatchNormalization; and where they must not
// fold (read elsewhere, not per channel, infinite, or past a function the layer applies); against float64 worked out
// here, with what each node became.
#include "importer/Onnx.h"
#include "support/Compare.h"
#include "support/OnnxTestModel.h"
#include "support/Random.h"

#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

using namespace glnet;

using test::affine;
using test::attributeInts;
using test::named;
using test::opsRun;
using test::run;
using test::summaries;
using Model = test::OnnxTestModel;

namespace {

// [N, H, W, C] → [N, C, H, W], as ConvNeXt's block permutes its Linear layers' output back.
std::vector<double> channelsFirst(const std::vector<double>& nhwc, std::size_t n, std::size_t h, std::size_t w, std::size_t c) {
  std::vector<double> nchw(nhwc.size());
  for (std::size_t b = 0; b < n; ++b)
    for (std::size_t y = 0; y < h; ++y)
      for (std::size_t x = 0; x < w; ++x)
        for (std::size_t k = 0; k < c; ++k) nchw[((b * c + k) * h + y) * w + x] = nhwc[((b * h + y) * w + x) * c + k];
  return nchw;
}

}  // namespace

TEST_SUITE("gl") {
  TEST_CASE("a constant scale per output channel after a dense layer folds into its weights, also past the Transpose of ConvNeXt's block") {
    std::mt19937 random = test::generator(91);
    const std::vector<float> x = test::uniformFloats(random, 2 * 3 * 5 * 4);
    const std::vector<double> w = test::widen(test::uniformFloats(random, 4 * 6)), b = test::widen(test::uniformFloats(random, 6)),
                              gamma = test::widen(test::uniformFloats(random, 6, -2.0f, 2.0f));
    for (const bool transposed : {false, true}) {
      CAPTURE(transposed);
      Model m;
      if (transposed) m.input("x", {2, 3, 5, 4});
      else m.input("x", {30, 4});
      m.constant("w", {4, 6}, w, false).constant("b", {6}, b, false);
      if (transposed) m.constant("gamma", {6, 1, 1}, gamma, false);
      else m.constant("gamma", {6}, gamma, false);
      m.node("MatMul", {"x", "w"}, "xw");
      m.node("Add", {"xw", "b"}, "z");
      if (transposed) attributeInts(m.node("Transpose", {"z"}, "zt"), "perm", {0, 3, 1, 2});
      m.node("Mul", {transposed ? "zt" : "z", "gamma"}, "y");
      std::vector<double> want = affine(x, w, b, 4);
      for (std::size_t i = 0; i < want.size(); ++i) want[i] *= gamma[i % 6];
      if (transposed) want = channelsFirst(want, 2, 3, 5, 6);
      test::checkClose(run(m, {x}), want, 1e-6, 1e-5);
      CHECK(summaries(m).at(named("Mul", transposed ? 4 : 3)) == "folded");
      CHECK(opsRun(m) == (transposed ? 2u : 1u));
    }
  }

  TEST_CASE("a scale after a dense layer stays a Mul where its output is read elsewhere, the scale is not per channel, or infinite") {
    std::mt19937 random = test::generator(92);
    const std::vector<float> x = test::uniformFloats(random, 2 * 3 * 5 * 4);
    const std::vector<double> w = test::widen(test::uniformFloats(random, 4 * 6)), b = test::widen(test::uniformFloats(random, 6));
    for (const char* name : {"read elsewhere", "per position", "infinite"}) {
      const std::string kind = name;
      CAPTURE(kind);
      const bool perPosition = kind == "per position";
      std::vector<double> gamma = test::widen(test::uniformFloats(random, perPosition ? 5 : 6, -2.0f, 2.0f));
      if (kind == "infinite") gamma[2] = INFINITY;
      Model m;
      m.input("x", {2, 3, 5, 4}).constant("w", {4, 6}, w, false).constant("b", {6}, b, false);
      // Per position: along W (5) of [N, C, H, W], not along the channels.
      if (perPosition) m.constant("gamma", {1, 1, 5}, gamma, false);
      else m.constant("gamma", {6, 1, 1}, gamma, false);
      m.node("MatMul", {"x", "w"}, "xw");
      m.node("Add", {"xw", "b"}, "z");
      attributeInts(m.node("Transpose", {"z"}, "zt"), "perm", {0, 3, 1, 2});
      m.node("Mul", {"zt", "gamma"}, kind == "read elsewhere" ? "scaled" : "y");
      if (kind == "read elsewhere") m.node("Add", {"scaled", "zt"}, "y");
      const std::vector<double> z = channelsFirst(affine(x, w, b, 4), 2, 3, 5, 6);
      std::vector<double> want(z.size());
      for (std::size_t i = 0; i < z.size(); ++i) {
        const std::size_t channel = i / 15 % 6, column = i % 5;
        want[i] = z[i] * gamma[perPosition ? column : channel] + (kind == "read elsewhere" ? z[i] : 0.0);
      }
      test::checkClose(run(m, {x}), want, 1e-6, 1e-5);
      CHECK(summaries(m).at(named("Mul", 4)) != "folded");
    }
  }

  TEST_CASE("a constant after a dense layer folds only along its channels and only where nothing else reads the layer under any name") {
    std::mt19937 random = test::generator(95);
    const std::vector<float> x = test::uniformFloats(random, 3 * 3);
    const std::vector<double> w = test::widen(test::uniformFloats(random, 3 * 3)), b = test::widen(test::uniformFloats(random, 3)),
                              c = test::widen(test::uniformFloats(random, 3, -2.0f, 2.0f));
    const std::vector<double> z = affine(x, w, b, 3);  // [3 rows, 3 channels]
    // A Transpose moves the channels to axis 0: an Add along the last axis then adds per row, not per channel.
    Model transposed;
    transposed.input("x", {3, 3}).constant("w", {3, 3}, w, false).constant("b", {3}, b, false).constant("c", {3}, c, false);
    transposed.node("MatMul", {"x", "w"}, "xw");
    transposed.node("Add", {"xw", "b"}, "z");
    attributeInts(transposed.node("Transpose", {"z"}, "zt"), "perm", {1, 0});
    transposed.node("Add", {"zt", "c"}, "y");
    std::vector<double> want(9);
    for (std::size_t channel = 0; channel < 3; ++channel)
      for (std::size_t row = 0; row < 3; ++row) want[channel * 3 + row] = z[row * 3 + channel] + c[row];
    test::checkClose(run(transposed, {x}), want, 1e-6, 1e-5);
    // The layer's output under a second name (a Pad of nothing, a whole Slice, an Identity) scaled, then added to the
    // output under its first name: the scale must not reach the first.
    for (const std::string alias : {"Pad", "Slice", "Identity"}) {
      CAPTURE(alias);
      Model m;
      m.input("x", {3, 3}).constant("w", {3, 3}, w, false).constant("b", {3}, b, false).constant("c", {3}, c, false);
      m.constant("pads", {4}, {0, 0, 0, 0}).constant("starts", {1}, {0}).constant("ends", {1}, {3});
      m.node("MatMul", {"x", "w"}, "xw");
      m.node("Add", {"xw", "b"}, "z");
      if (alias == "Pad") m.node("Pad", {"z", "pads"}, "p");
      else if (alias == "Slice") m.node("Slice", {"z", "starts", "ends"}, "p");
      else m.node("Identity", {"z"}, "p");
      m.node("Mul", {"p", "c"}, "scaled");
      m.node("Add", {"scaled", "z"}, "y");
      for (std::size_t i = 0; i < 9; ++i) want[i] = z[i] * c[i % 3] + z[i];
      test::checkClose(run(m, {x}), want, 1e-6, 1e-5);
      CHECK(summaries(m).at(named(alias, 3)) == "identity");
    }
  }

  TEST_CASE("a BatchNormalization or a scale after a function fused past the first BatchNormalization of a convolution does not fold before that function") {
    std::mt19937 random = test::generator(93);
    const std::vector<float> x = test::uniformFloats(random, 2 * 2 * 3 * 3);
    const std::vector<double> w = test::widen(test::uniformFloats(random, 3 * 2)), b = test::widen(test::uniformFloats(random, 3));
    // Per channel: scale, shift, mean, variance of each normalization; the second's scales negative, so that folding it
    // into the weights (before the ReLU) would give a different answer.
    const std::vector<double> scale1{1.5, 0.5, 2.0}, shift1{0.1, -0.2, 0.3}, mean1{0.2, -0.1, 0.0}, var1{1.0, 0.5, 2.0};
    const std::vector<double> scale2{-1.0, -0.5, -2.0}, shift2{0.4, -0.3, 0.2}, mean2{0.5, 0.1, -0.2}, var2{0.25, 1.0, 4.0};
    for (const bool secondIsScale : {false, true}) {
      CAPTURE(secondIsScale);
      Model m;
      m.input("x", {2, 2, 3, 3}).constant("w", {3, 2, 1, 1}, w, false).constant("b", {3}, b, false);
      m.constant("s1", {3}, scale1, false).constant("t1", {3}, shift1, false).constant("m1", {3}, mean1, false).constant("v1", {3}, var1, false);
      m.constant("s2", {3}, scale2, false).constant("t2", {3}, shift2, false).constant("m2", {3}, mean2, false).constant("v2", {3}, var2, false);
      m.constant("gamma", {3, 1, 1}, scale2, false);
      m.node("Conv", {"x", "w", "b"}, "c");
      m.node("BatchNormalization", {"c", "s1", "t1", "m1", "v1"}, "n");
      m.node("Relu", {"n"}, "r");
      if (secondIsScale) m.node("Mul", {"r", "gamma"}, "y");
      else m.node("BatchNormalization", {"r", "s2", "t2", "m2", "v2"}, "y");
      std::vector<double> want(2 * 3 * 9);
      for (std::size_t n = 0; n < 2; ++n) {
        for (std::size_t o = 0; o < 3; ++o) {
          for (std::size_t p = 0; p < 9; ++p) {
            double v = b[o];
            for (std::size_t i = 0; i < 2; ++i) v += w[o * 2 + i] * x[(n * 2 + i) * 9 + p];
            v = std::max(0.0, (v - mean1[o]) / std::sqrt(var1[o] + 1e-5) * scale1[o] + shift1[o]);
            want[(n * 3 + o) * 9 + p] = secondIsScale ? v * scale2[o] : (v - mean2[o]) / std::sqrt(var2[o] + 1e-5) * scale2[o] + shift2[o];
          }
        }
      }
      test::checkClose(run(m, {x}), want, 1e-6, 1e-5);
      const auto became = summaries(m);
      CHECK(became.at(named("BatchNormalization", 2)) == "folded");
      CHECK(became.at(secondIsScale ? named("Mul", 4) : named("BatchNormalization", 4)) != "folded");
    }
  }
}
