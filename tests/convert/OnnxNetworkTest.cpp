// glnet's own ONNX export read back as a trainable network: the same layers and, bit for bit, the same weights.
#include "convert/OnnxExport.h"
#include "convert/OnnxNetwork.h"
#include "base/check.h"
#include "support/TempDir.h"

#include <doctest/doctest.h>

using namespace glnet;

TEST_CASE("an exported described network reads back as the same trainable network with the same weights") {
  test::TempDir directory;
  const NetDescription description = parseNetDescription(R"({"name": "every-kind", "input": [3, 12, 12], "layers": [
      {"name": "stem", "kind": "conv", "outputs": 8, "kernel": 3, "stride": 2, "activation": "relu"},
      {"name": "stem.bn", "kind": "batchnorm", "momentum": 0.25, "epsilon": 0.001},
      {"name": "dw", "kind": "conv", "outputs": 8, "kernel": 3, "groups": 8},
      {"name": "dw.act", "kind": "silu"},
      {"name": "hs", "kind": "hardswish", "inputs": ["stem.bn"]},
      {"name": "sum", "kind": "add", "inputs": ["dw.act", "hs"]},
      {"name": "cat", "kind": "concat", "inputs": ["sum", "stem.bn"]},
      {"name": "t", "kind": "tanh"},
      {"name": "max", "kind": "maxpool", "kernel": 3, "stride": 1, "padding": 1},
      {"name": "avg", "kind": "avgpool", "kernel": 2},
      {"name": "global", "kind": "globalavgpool"},
      {"name": "flat", "kind": "flatten"},
      {"name": "drop", "kind": "dropout", "rate": 0.2},
      {"name": "fc1", "kind": "dense", "outputs": 9, "activation": "sigmoid"},
      {"name": "fc2", "kind": "dense", "outputs": 4}]})",
                                                         "test net");
  Network network = Network::fromDescription(description, 3, "test net");
  network.input = {{0.125f, 0.25f, 0.5f}, {0.75f, 0.5f, 0.25f}};
  const std::string path = directory.file("every-kind.onnx");
  writeOnnx(network, path);

  const OnnxNetwork read = readOnnxNetwork(path);
  REQUIRE(read.input.has_value());
  CHECK(read.input->mean == std::vector<float>{0.125f, 0.25f, 0.5f});
  CHECK(read.input->std == std::vector<float>{0.75f, 0.5f, 0.25f});
  std::vector<std::string> kinds, expectedKinds;
  for (const LayerDescription& layer : read.description.layers) kinds.push_back(layer.kind + ":" + layer.name);
  for (const LayerDescription& layer : description.layers) expectedKinds.push_back(layer.kind + ":" + layer.name);
  CHECK(kinds == expectedKinds);
  CHECK(read.description.layers[0].activation == Activation::relu);
  CHECK(read.description.layers[1].momentum == doctest::Approx(0.25).epsilon(1e-6));
  CHECK(read.description.layers[1].epsilon == 0.001f);
  CHECK(read.description.layers[2].groups == 8);
  CHECK(read.description.layers[6].inputs == std::vector<std::string>{"sum", "stem.bn"});
  CHECK(read.description.layers[12].rate == 0.2f);
  CHECK(read.description.layers[13].activation == Activation::sigmoid);

  Network again = Network::fromDescription(read.description, 0, path);
  again.setParameterValues(again.valuesIn(read.weights, path));
  CHECK(again.parameterNames == network.parameterNames);
  CHECK(again.parameterValues() == network.parameterValues());
  CHECK(again.classes() == 4);
}

TEST_CASE("a file that is no ONNX model is refused in one line") {
  test::TempDir directory;
  const std::string path = directory.write("torn.onnx", "\x08\x07\x12");
  CHECK_THROWS_WITH(readOnnxNetwork(path), doctest::Contains("torn.onnx: not an ONNX model"));
  CHECK_THROWS_WITH(readOnnxNetwork(directory.file("missing.onnx")), doctest::Contains("missing.onnx"));
}

TEST_CASE("glnet_info's fine-tunes column: layers, parts of layers read whole, and the rest") {
  CHECK(onnxOpFineTuning("Conv") == "yes");
  CHECK(onnxOpFineTuning("LayerNormalization") == "yes");
  CHECK(onnxOpFineTuning("MatMul") == "in layers");
  CHECK(onnxOpFineTuning("Erf") == "in layers");
  CHECK(onnxOpFineTuning("Pad") == "no");
}
