// The importer's fusions of transformer layers on small hand-made ONNX graphs: a MatMul's bias Add of any rank of A
// and GELU (written out as exporters write it, or ONNX's Gelu) run inside the dense layer, GELU alone as one op, a
// residual Add read only by LayerNormalization summed as it reads it, an attention's Q, K and V projections joined
// into one dense layer; against float64 worked out here, with what each node became.
#include "importer/Onnx.h"
#include "support/Compare.h"
#include "support/OnnxTestModel.h"
#include "support/Random.h"
#include "support/TempDir.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <string>
#include <vector>

using namespace glnet;

using test::attribute;
using test::run;
using Model = test::OnnxTestModel;

namespace {

double geluErf(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double geluTanh(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }

// What each node became, by output name.
std::map<std::string, std::string> summaries(const Model& model) {
  test::TempDir dir;
  const OnnxModel m = readOnnx(model.save(dir), 0);
  std::map<std::string, std::string> became;
  for (const OnnxNodeSummary& node : m.nodes) became[node.name] = node.glnetOp;
  return became;
}

// What the model's fused attention became ("attention (fused: ...)"), or "" without one.
std::string fusedAttention(const Model& model) {
  test::TempDir dir;
  const OnnxModel m = readOnnx(model.save(dir), 0);
  for (const OnnxNodeSummary& node : m.nodes) {
    if (node.glnetOp.rfind("attention (fused", 0) == 0) return node.glnetOp;
  }
  return "";
}

// The GPU ops the model runs (views left out).
std::size_t opsRun(const Model& model) {
  test::TempDir dir;
  const OnnxModel m = readOnnx(model.save(dir), 0);
  std::size_t count = 0;
  for (const OpNode& op : m.graph.ops()) count += op.op->isView() ? 0 : 1;
  return count;
}

// x [rows, inputs] · w [inputs, outputs] + b, in float64.
std::vector<double> affine(const std::vector<float>& x, const std::vector<double>& w, const std::vector<double>& b, std::size_t inputs) {
  const std::size_t outputs = b.size(), rows = x.size() / inputs;
  std::vector<double> z(rows * outputs);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t o = 0; o < outputs; ++o) {
      double sum = b[o];
      for (std::size_t i = 0; i < inputs; ++i) sum += double{x[r * inputs + i]} * w[i * outputs + o];
      z[r * outputs + o] = sum;
    }
  }
  return z;
}

// The node names Model::node gives: "/Op_index", index counting every node before it.
std::string named(const std::string& op, int index) { return "/" + op + "_" + std::to_string(index); }

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

// A Transpose's perm attribute.
void permute(onnx::NodeProto& transpose, const std::vector<std::int64_t>& perm) {
  onnx::AttributeProto& a = *transpose.add_attribute();
  a.set_name("perm");
  a.set_type(onnx::AttributeProto::INTS);
  for (const std::int64_t axis : perm) a.add_ints(axis);
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
        permute(m.node("Transpose", {n + "2"}, n), {0, 2, 1, 3});
      }
      permute(m.node("Transpose", {"k"}, "kt"), {0, 1, 3, 2});
      m.node("MatMul", {"q", "kt"}, "scores");
      m.node("Mul", {"scores", "scale"}, "scaled");
      attribute(m.node("Softmax", {"scaled"}, "p"), "axis", -1);
      m.node("MatMul", {"p", "v"}, "o");
      permute(m.node("Transpose", {"o"}, "om"), {0, 2, 1, 3});
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
}
