// The table of ONNX operators the importer dispatches on (importer/OnnxOps.h).
#include "importer/OnnxOps.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <set>

using namespace glnet;

TEST_CASE("ONNX op table: one row per op type, each imported or folded, at opsets glnet reads") {
  const std::vector<OnnxOp>& ops = onnxOps();
  REQUIRE(ops.size() > 80);
  std::set<std::string> folded;
  for (const OnnxOp& op : ops) {
    CAPTURE(op.type);
    CHECK(findOnnxOp(op.type) == &op);  // sorted, no type twice
    CHECK(op.firstOpset >= 6);
    CHECK(op.firstOpset <= op.lastOpset);
    CHECK(op.lastOpset <= 18);
    CHECK((op.import != nullptr || op.folding != OnnxFolding::never));
    CHECK(!op.description.empty());
    // Every pointwise function folds on constants by its float64 reference; the rest are listed below.
    const bool pointwise = op.description.rfind("pointwise ", 0) == 0;
    if ((op.folding == OnnxFolding::constantInputs || op.folding == OnnxFolding::always) && !pointwise) folded.insert(op.type);
    if (pointwise) CHECK(op.folding == OnnxFolding::constantInputs);
  }
  // The shape arithmetic and the products that fold at load: what fold() computes.
  CHECK(folded == std::set<std::string>{"Add", "And", "Cast", "Concat", "ConstantOfShape", "Div", "Einsum", "Equal", "Expand", "Gather",
                                        "GatherND", "Greater", "GreaterOrEqual", "IsInf", "IsNaN", "Less", "LessOrEqual", "MatMul", "Mod", "Mul", "Not",
                                        "Or", "Range", "Reshape", "ScatterND", "Shape", "Slice", "Squeeze", "Sub", "Transpose", "Trilu",
                                        "Unsqueeze", "Where", "Xor"});
  CHECK(findOnnxOp("Resize") == nullptr);
  CHECK(findOnnxOp("relu") == nullptr);  // op types are case-sensitive
  const OnnxOp* relu = findOnnxOp("Relu");  // a row of pointwiseOf's functions
  REQUIRE(relu);
  CHECK(relu->import != nullptr);
  const std::string markdown = onnxOpsTable(true, [](const std::string& type) { return std::string(type == "Relu" ? "yes" : type == "MatMul" ? "in layers" : "no"); });
  CHECK(static_cast<std::size_t>(std::count(markdown.begin(), markdown.end(), '\n')) == ops.size() + 2);
  CHECK(markdown.find("| `Relu` | 6-18 | runs; folded on constants | yes | pointwise relu |\n") != std::string::npos);
  CHECK(markdown.find("| `MatMul` | ") != std::string::npos);
  CHECK(markdown.find("| in layers | ") != std::string::npos);
}
