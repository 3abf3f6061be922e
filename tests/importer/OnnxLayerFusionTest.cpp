// The importer's fusions of transformer layers on small hand-made ONNX graphs: a MatMul's bias Add of any rank of A
// and GELU (written out as exporters write it, or ONNX's Gelu) run inside the dense layer, GELU alone as one op, a
// residual Add read only by LayerNormalization summed as it reads it; against float64 worked out here, with what each
// node became.
#include "importer/Onnx.h"
#include "support/Compare.h"
#include "support/OnnxTestModel.h"
#include "support/Random.h"
#include "support/TempDir.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

using namespace glnet;

using test::affine;
using test::attribute;
using test::named;
using test::opsRun;
using test::run;
using test::summaries;
using Model = test::OnnxTestModel;

namespace {

double geluErf(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double geluTanh(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }

// GELU of "z" into "y", as exporters write it out: erf form (Div by √2, or Mul by 1/√2) or GPT-2's tanh form, and the
// three products x·(1 + f)·0.5 (order 0), x·((1 + f)·0.5) (1) or (x·0.5)·(1 + f) (2); its Constant nodes first.
void writeGelu(Model& m, bool tanh, bool divides, int order) {
  m.constantNode("half", {}, {0.5});
  m.constantNode("one", {}, {1.0});
  if (tanh) {
    m.constantNode("three", {}, {3.0});
    m.constantNode("k", {}, {0.044715});
    m.constantNode("c", {}, {0.7978846});
    if (order == 2) m.node("Mul", {"half", "z"}, "h");
    m.node("Pow", {"z", "three"}, "cube");
    m.node("Mul", {"cube", "k"}, "kc");
    m.node("Add", {"z", "kc"}, "inner");
    m.node("Mul", {"c", "inner"}, "u");
    m.node("Tanh", {"u"}, "t");
    m.node("Add", {"t", "one"}, "p");
  } else {
    m.constantNode("root", {}, {divides ? 1.4142135 : 0.70710678});
    if (order == 2) m.node("Mul", {"z", "half"}, "h");
    m.node(divides ? "Div" : "Mul", {"z", "root"}, "s");
    m.node("Erf", {"s"}, "e");
    m.node("Add", {"one", "e"}, "p");
  }
  if (order == 0) {
    m.node("Mul", {"z", "p"}, "zp");
    m.node("Mul", {"zp", "half"}, "y");
  } else if (order == 1) {
    m.node("Mul", {"p", "half"}, "ph");
    m.node("Mul", {"ph", "z"}, "y");
  } else {
    m.node("Mul", {"h", "p"}, "y");
  }
}

}  // namespace

TEST_SUITE("gl") {
  TEST_CASE("a MatMul of [B, S, H] and its bias Add run as one dense layer with GELU inside it, written out in any order or ONNX's Gelu") {
    std::mt19937 random = test::generator(46);
    const std::vector<float> x = test::uniformFloats(random, 2 * 3 * 5, -2, 2);
    const std::vector<double> w = test::widen(test::uniformFloats(random, 5 * 7)), b = test::widen(test::uniformFloats(random, 7));
    const std::vector<double> z = affine(x, w, b, 5);
    struct Form {
      const char* label;
      bool tanh, divides, onnxOp;
      int order;
    };
    for (const Form form : {Form{"erf, Div, x·(1+f)·0.5", false, true, false, 0}, Form{"erf, Mul, x·((1+f)·0.5)", false, false, false, 1},
                            Form{"erf, Div, (x·0.5)·(1+f)", false, true, false, 2}, Form{"tanh, x·(1+f)·0.5", true, false, false, 0},
                            Form{"tanh, x·((1+f)·0.5)", true, false, false, 1}, Form{"tanh, (0.5·x)·(1+f)", true, false, false, 2},
                            Form{"Gelu", false, false, true, 0}, Form{"Gelu tanh", true, false, true, 0}}) {
      CAPTURE(std::string(form.label));
      Model m;  // ONNX's Gelu (opset 20) is read at any opset
      m.input("x", {2, 3, 5}).constant("w", {5, 7}, w, false).constant("b", {7}, b, false);
      m.node("MatMul", {"x", "w"}, "xw");
      m.node("Add", {"b", "xw"}, "z");  // the bias first, as TorchScript writes nn.Linear
      if (form.onnxOp) {
        onnx::NodeProto& gelu = m.node("Gelu", {"z"}, "y");
        if (form.tanh) attribute(gelu, "approximate", "tanh");
      } else {
        writeGelu(m, form.tanh, form.divides, form.order);
      }
      std::vector<double> want(z.size());
      for (std::size_t i = 0; i < z.size(); ++i) want[i] = form.tanh ? geluTanh(z[i]) : geluErf(z[i]);
      Shape shape;
      test::checkClose(run(m, {x}, &shape), want, 1e-5, 1e-5);
      CHECK(shape == Shape{2, 3, 7});
      const std::map<std::string, std::string> became = summaries(m);
      CHECK(became.at(named("MatMul", 1)) == std::string("dense + ") + (form.tanh ? "gelu (tanh)" : "gelu"));
      for (const auto& [name, op] : became) {
        if (name != named("MatMul", 1) && op != "folded") CHECK_MESSAGE(op == "fused", name);
      }
      CHECK(opsRun(m) == 1);
    }
  }

  TEST_CASE("GPT-2's Gemm, its [B, S, O] view and GELU run as one dense layer; NaN in a row gives NaN in that row") {
    std::mt19937 random = test::generator(47);
    std::vector<float> x = test::uniformFloats(random, 4 * 6, -2, 2);
    const std::vector<double> w = test::widen(test::uniformFloats(random, 6 * 9)), b = test::widen(test::uniformFloats(random, 9));
    Model m;
    m.input("x", {4, 6}).constant("w", {6, 9}, w, false).constant("b", {9}, b, false).constant("shape", {3}, {2, 2, 9});
    m.node("Gemm", {"x", "w", "b"}, "g");
    m.node("Reshape", {"g", "shape"}, "z");
    writeGelu(m, true, false, 2);
    x[6 + 2] = NAN;  // row 1
    std::vector<double> want = affine(x, w, b, 6);
    for (double& v : want) v = geluTanh(v);
    test::checkNanPropagated(run(m, {x}), want, 1e-5, 1e-5);
    const std::map<std::string, std::string> became = summaries(m);
    CHECK(became.at(named("Gemm", 1)) == "dense + gelu (tanh)");
    CHECK(became.at(named("Reshape", 2)) == "view");
    CHECK(opsRun(m) == 1);
  }

  TEST_CASE("GELU written out after no dense layer runs as one pointwise op; a chain that is no GELU runs node by node") {
    std::mt19937 random = test::generator(48);
    const std::vector<float> x = test::uniformFloats(random, 3 * 4, -3, 3);
    {
      Model m;
      m.input("z", {3, 4});
      writeGelu(m, false, true, 1);
      std::vector<double> want;
      for (const float v : x) want.push_back(geluErf(v));
      test::checkClose(run(m, {x}), want, 1e-6, 1e-5);
      CHECK(summaries(m).at(named("Div", 4)) == "gelu (fused: 5 nodes)");
      CHECK(opsRun(m) == 1);
    }
    {
      // 2 + erf(x/√2): no GELU, so each node runs (Erf inside the Div's kernel as before).
      Model m;
      m.input("z", {3, 4}).constant("two", {}, {2.0}, false).constant("half", {}, {0.5}, false).constant("root", {}, {1.4142135}, false);
      m.node("Div", {"z", "root"}, "s");
      m.node("Erf", {"s"}, "e");
      m.node("Add", {"e", "two"}, "p");
      m.node("Mul", {"z", "p"}, "zp");
      m.node("Mul", {"zp", "half"}, "y");
      std::vector<double> want;
      for (const float v : x) want.push_back(0.5 * v * (2 + std::erf(v / 1.4142135)));
      test::checkClose(run(m, {x}), want, 1e-6, 1e-5);
      CHECK(summaries(m).at(named("Div", 1)) == "broadcast");
      CHECK(opsRun(m) == 4);
    }
  }

  TEST_CASE("a MatMul's bias joins its dense layer only as a row of its outputs; a constant per position stays an add") {
    std::mt19937 random = test::generator(49);
    const std::vector<float> x = test::uniformFloats(random, 2 * 3 * 4);
    const std::vector<double> w = test::widen(test::uniformFloats(random, 4 * 5)), perPosition = test::widen(test::uniformFloats(random, 3 * 5));
    for (const bool row : {true, false}) {
      CAPTURE(row);
      Model m;
      m.input("x", {2, 3, 4}).constant("w", {4, 5}, w, false);
      if (row) m.constant("c", {1, 1, 5}, {perPosition.begin(), perPosition.begin() + 5}, false);
      else m.constant("c", {3, 5}, perPosition, false);
      m.node("MatMul", {"x", "w"}, "xw");
      m.node("Add", {"xw", "c"}, "y");
      std::vector<double> want = affine(x, w, std::vector<double>(5, 0.0), 4);
      for (std::size_t i = 0; i < want.size(); ++i) want[i] += perPosition[row ? i % 5 : i % 15];
      test::checkClose(run(m, {x}), want, 1e-6, 1e-5);
      CHECK(summaries(m).at(named("Add", 2)) == (row ? "fused" : "add"));
      CHECK(opsRun(m) == (row ? 1u : 2u));
    }
  }

  TEST_CASE("a residual Add read only by LayerNormalization is summed as the normalization reads it; read elsewhere too, it is stored") {
    std::mt19937 random = test::generator(50);
    const std::vector<float> x = test::uniformFloats(random, 2 * 3 * 6, -2, 2), r = test::uniformFloats(random, 2 * 3 * 6, -2, 2);
    const std::vector<double> gamma = test::widen(test::uniformFloats(random, 6)), beta = test::widen(test::uniformFloats(random, 6));
    std::vector<double> normalized(x.size());
    for (std::size_t row = 0; row < 6; ++row) {
      double mean = 0, variance = 0;
      for (std::size_t k = 0; k < 6; ++k) mean += (double{x[row * 6 + k]} + r[row * 6 + k]) / 6;
      for (std::size_t k = 0; k < 6; ++k) variance += std::pow(double{x[row * 6 + k]} + r[row * 6 + k] - mean, 2) / 6;
      for (std::size_t k = 0; k < 6; ++k) {
        normalized[row * 6 + k] = (double{x[row * 6 + k]} + r[row * 6 + k] - mean) / std::sqrt(variance + 1e-5) * gamma[k] + beta[k];
      }
    }
    for (const bool alsoRead : {false, true}) {
      CAPTURE(alsoRead);
      Model m;
      m.input("x", {2, 3, 6}).input("r", {2, 3, 6}).constant("gamma", {6}, gamma, false).constant("beta", {6}, beta, false);
      m.node("Add", {"x", "r"}, "sum");
      m.node("LayerNormalization", {"sum", "gamma", "beta"}, alsoRead ? "n" : "y");
      std::vector<double> want = normalized;
      if (alsoRead) {  // the next residual connection of a pre-LN layer (GPT-2, ViT) reads the sum too
        m.node("Add", {"n", "sum"}, "y");
        for (std::size_t i = 0; i < want.size(); ++i) want[i] += double{x[i]} + r[i];
      }
      test::checkClose(run(m, {x, r}), want, 1e-5, 1e-4);
      const std::map<std::string, std::string> became = summaries(m);
      CHECK(became.at(named("Add", 1)) == (alsoRead ? "add" : "fused into the layer normalization reading it"));
      CHECK(became.at(named("LayerNormalization", 2)) == (alsoRead ? "layer normalization" : "layer normalization + residual"));
      CHECK(opsRun(m) == (alsoRead ? 3u : 1u));
    }
  }

  TEST_CASE("a residual Add after a MatMul and its bias is added by the dense layer; its sum may have other readers (pre-LN layers)") {
    std::mt19937 random = test::generator(51);
    const std::vector<float> x = test::uniformFloats(random, 2 * 3 * 5), r = test::uniformFloats(random, 2 * 3 * 7);
    const std::vector<double> w = test::widen(test::uniformFloats(random, 5 * 7)), b = test::widen(test::uniformFloats(random, 7));
    for (const bool broadcast : {false, true}) {
      CAPTURE(broadcast);
      Model m;
      m.input("x", {2, 3, 5}).input("r", {broadcast ? 1 : 2, 3, 7}).constant("w", {5, 7}, w, false).constant("b", {7}, b, false);
      m.node("MatMul", {"x", "w"}, "xw");
      m.node("Add", {"xw", "b"}, "z");
      m.node("Add", {"r", "z"}, "sum");
      m.node("Sigmoid", {"sum"}, "s");
      m.node("Add", {"s", "sum"}, "y");  // the sum read twice, as a pre-LN layer's LayerNorm and next residual read it
      std::vector<float> residual = r;
      if (broadcast) std::copy(r.begin(), r.begin() + 21, residual.begin() + 21);  // [1, 3, 7] read for both batches
      std::vector<double> want = affine(x, w, b, 5);
      for (std::size_t i = 0; i < want.size(); ++i) {
        const double v = want[i] + residual[i];
        want[i] = 1 / (1 + std::exp(-v)) + v;
      }
      test::checkClose(run(m, {x, broadcast ? std::vector<float>(r.begin(), r.begin() + 21) : r}), want, 1e-5, 1e-5);
      const std::map<std::string, std::string> became = summaries(m);
      CHECK(became.at(named("MatMul", 1)) == (broadcast ? "dense" : "dense + residual"));
      CHECK(became.at(named("Add", 3)) == (broadcast ? "add" : "fused"));
      CHECK(opsRun(m) == (broadcast ? 4u : 3u));
    }
  }

  TEST_CASE("a residual Add after a Gemm given another shape (Reshape, a Transpose of axes of length 1) is added by the dense layer; a Transpose that moves elements, or a view read elsewhere too, keeps the Add") {
    // torchvision's ViT at batch 1: out_proj's Gemm [S, E], Reshape to [S, 1, E], Transpose to [1, S, E], then the skip
    // connection's Add; a Shape node reads the Gemm's output, as the export's does. A NaN in a row stays in that row.
    constexpr std::size_t S = 3, in = 5, out = 4;
    std::mt19937 random = test::generator(53);
    std::vector<float> x = test::uniformFloats(random, S * in), r = test::uniformFloats(random, S * out);
    x[in + 2] = std::nanf("");
    const std::vector<double> w = test::widen(test::uniformFloats(random, out * in)), b = test::widen(test::uniformFloats(random, out));
    enum class Form { unitAxes, movesElements, viewReadElsewhere, aliasReadElsewhere };
    for (const Form form : {Form::unitAxes, Form::movesElements, Form::viewReadElsewhere, Form::aliasReadElsewhere}) {
      CAPTURE(static_cast<int>(form));
      const bool fuses = form == Form::unitAxes;
      Model m;
      m.input("x", {S, in}).input("r", {1, S, out}).constant("w", {out, in}, w, false).constant("b", {out}, b, false);
      m.constant("rows", {3}, {S, 1, out});
      attribute(m.node("Gemm", {"x", "w", "b"}, "z"), "transB", 1);
      m.node("Shape", {"z"}, "zshape");
      // The walk back from the Add meets the projection under an Identity's name; the Gemm's own output is read by
      // the last node too.
      if (form == Form::aliasReadElsewhere) m.node("Identity", {"z"}, "zi");
      m.node("Reshape", {form == Form::aliasReadElsewhere ? "zi" : "z", "rows"}, "zr");
      if (form == Form::movesElements) {
        m.constant("columns", {3}, {1, out, S});
        m.node("Reshape", {"zr", "columns"}, "zc");  // [1, 4, 3]: the Transpose below moves its 4 and 3
        test::attributeInts(m.node("Transpose", {"zc"}, "zt"), "perm", {0, 2, 1});
      } else {
        test::attributeInts(m.node("Transpose", {"zr"}, "zt"), "perm", {1, 0, 2});
      }
      m.node("Add", {"r", "zt"}, "sum");
      if (form == Form::viewReadElsewhere) m.node("Sub", {"sum", "zt"}, "y");
      else if (form == Form::aliasReadElsewhere) m.node("Sub", {"sum", "z"}, "y");  // [1, S, out] − [S, out]
      else m.node("Identity", {"sum"}, "y");
      // z = x·wᵀ + b, then as the graph reads it.
      std::vector<double> z(S * out);
      for (std::size_t s = 0; s < S; ++s)
        for (std::size_t o = 0; o < out; ++o) {
          z[s * out + o] = b[o];
          for (std::size_t i = 0; i < in; ++i) z[s * out + o] += double{x[s * in + i]} * w[o * in + i];
        }
      // [1, S, out]; where the Transpose moves elements, zt[0][a][c] is z's value c·S + a (z's 12 values in order as
      // [1, out, S], transposed).
      std::vector<double> want(S * out);
      for (std::size_t a = 0; a < S; ++a)
        for (std::size_t c = 0; c < out; ++c) {
          const std::size_t at = a * out + c;
          const double viewed = form == Form::movesElements ? z[c * S + a] : z[at];
          const bool subtracts = form == Form::viewReadElsewhere || form == Form::aliasReadElsewhere;
          want[at] = subtracts ? (r[at] + viewed) - viewed : r[at] + viewed;
        }
      Shape shape;
      const std::vector<float> y = run(m, {x, r}, &shape);
      CHECK(shape == Shape{1, S, out});
      std::vector<float> rest;
      std::vector<double> restWanted;
      for (std::size_t i = 0; i < y.size(); ++i) {
        CHECK(std::isnan(y[i]) == std::isnan(want[i]));
        if (std::isnan(want[i])) continue;
        rest.push_back(y[i]);
        restWanted.push_back(want[i]);
      }
      CHECK(rest.size() < y.size());
      test::checkClose(rest, restWanted, 1e-5, 1e-5);
      const std::map<std::string, std::string> became = summaries(m);
      CHECK(became.at(named("Gemm", 1)) == (fuses ? "dense + residual (the Add after its views)" : "dense"));
      const int addIndex = form == Form::movesElements || form == Form::aliasReadElsewhere ? 6 : 5;
      CHECK((became.at(named("Add", addIndex)) == "fused") == fuses);
    }
  }
}
