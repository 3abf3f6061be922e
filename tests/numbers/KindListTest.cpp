#include "numbers/Activation.h"
#include "numbers/AxisKinds.h"
#include "numbers/OptimizerKinds.h"
#include "numbers/PointwiseKinds.h"

#include <doctest/doctest.h>

#include <set>
#include <sstream>
#include <string>

using namespace glnet;

// A row whose GLSL suffix repeats another's would define one name twice in every program; one whose ONNX op type
// repeats another's would leave that op type mapping to whichever row came first.
TEST_CASE("the kind lists give shaders one define per kind, numbered in list order, and each ONNX op type one kind") {
  std::istringstream lines(allKindDefines());
  std::set<std::string> defined;
  std::string line;
  while (std::getline(lines, line)) {
    CAPTURE(line);
    std::istringstream words(line);
    std::string directive, name, number;
    REQUIRE((words >> directive >> name >> number));
    CHECK(directive == "#define");
    CHECK(defined.insert(name).second);
  }
  CHECK(defined.count("POINTWISE_ERF"));
  CHECK(allKindDefines().find("#define POINTWISE_ERF " + std::to_string(kindNumber(PointwiseKind::erf)) + "\n") != std::string::npos);
  for (std::size_t number = 0; number < kindCount<AxisKind>(); ++number) {
    const std::string define = std::string("#define AXIS_OP_") + KindList<AxisKind>::glsl[number] + " " + std::to_string(number) + "\n";
    CHECK_MESSAGE(allKindDefines().find(define) != std::string::npos, define);
  }
  CHECK(std::string(kindName(PointwiseKind::geluTanh)) == "gelu (tanh)");

  std::set<std::string> onnxTypes;
#define GLNET_CHECK_ONNX(cpp, glsl, name, onnx, ...) \
  if (*onnx) CHECK_MESSAGE(onnxTypes.insert(onnx).second, onnx);
  GLNET_POINTWISE_KINDS(GLNET_CHECK_ONNX)
#undef GLNET_CHECK_ONNX
  for (const AxisOnnxOp& op : axisOnnxOps()) {
    if (*op.type) CHECK_MESSAGE(onnxTypes.insert(op.type).second, op.type);
  }
  CHECK(onnxTypes.count("Relu"));
  CHECK(onnxTypes.count("Hardmax"));
}

// Names are read back through the lists themselves, so a new row is parsed and offered without a second list to update.
TEST_CASE("a kind is parsed by its list's name, and a wrong name gets the list's choices") {
  for (std::size_t number = 0; number < kindCount<OptimizerKind>(); ++number) {
    const auto kind = static_cast<OptimizerKind>(number);
    CHECK(parseKind<OptimizerKind>(kindName(kind), "optimizer") == kind);
  }
  CHECK(parseActivation("sigmoid") == Activation::sigmoid);
  CHECK(findKind<Activation>("Relu") == std::nullopt);
  CHECK_THROWS_WITH_AS(parseKind<OptimizerKind>("rmsprop", "optimizer"), "unknown optimizer 'rmsprop' (sgd, momentum, adam or adamw)",
                       UsageError);
  CHECK_THROWS_WITH_AS(parseActivation("gelu"), "unknown activation 'gelu' (none, relu, tanh or sigmoid)", UsageError);
}
