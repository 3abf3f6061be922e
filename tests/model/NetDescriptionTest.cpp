#include "base/check.h"
#include "model/NetDescription.h"
#include "model/Network.h"
#include "support/TempDir.h"

#include <doctest/doctest.h>

#include <set>

using namespace glnet;

namespace {

// The one-line error a description gets, or "" when it is accepted (shapes checked by building the network).
std::string refusal(const std::string& text) {
  try {
    Network::fromDescription(parseNetDescription(text, "net.json"), 0, "net.json");
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

std::string withLayers(const std::string& layers) { return R"({"input": [1, 8, 8], "layers": [)" + layers + "]}"; }

}  // namespace

TEST_CASE("a network description that is wrong is refused in one line naming the layer and what is wrong") {
  const std::string dense = R"({"name": "fc", "kind": "dense", "outputs": 3})";
  CHECK(refusal(withLayers(dense)) == "");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{", "net.json is not valid JSON"},
      // Only whitespace may follow the JSON value; a NUL once ended the parse, whatever came after it.
      {withLayers(dense) + std::string("\0garbage", 8), "net.json is not valid JSON (a NUL byte at byte 79)"},
      {withLayers(dense) + " x", "net.json is not valid JSON (syntax error at byte 81)"},
      {"[]", "net.json: a network description is a JSON object"},
      {R"({"input": [1, 8, 8], "layers": [], "extra": 1})", "net.json: unknown field \"extra\""},
      {R"({"input": [0, 8, 8], "layers": [{"name": "a", "kind": "relu"}]})", "net.json: input size must be a whole number from 1"},
      {R"({"input": [8, 8], "layers": [{"name": "a", "kind": "relu"}]})", "net.json: \"input\" must be the shape of one input"},
      {R"({"input": [1, 8, 8], "layers": []})", "net.json: \"layers\" must be a list of 1 to 4096 layers"},
      {withLayers(R"({"kind": "relu"})"), "net.json: layer 1 needs a \"name\""},
      {withLayers(R"({"name": "a b", "kind": "relu"})"), "net.json: layer 1 needs a \"name\""},
      {withLayers(R"({"name": "a", "kind": "lstm"})"), "net.json: layer 'a': \"kind\" must be one of"},
      {withLayers(R"({"name": "a", "kind": "relu"}, {"name": "a", "kind": "relu"})"), "net.json: layer 'a': a second layer of this name"},
      {withLayers(R"({"name": "input", "kind": "relu"})"), "net.json: layer 'input': the name 'input' stands for"},
      {withLayers(R"({"name": "a", "kind": "conv", "outputs": 4})"), "net.json: layer 'a': a conv layer needs \"kernel\""},
      {withLayers(R"({"name": "a", "kind": "dense"})"), "net.json: layer 'a': a dense layer needs \"outputs\""},
      {withLayers(R"({"name": "a", "kind": "conv", "outputs": 4, "kernel": 3, "strid": 2})"),
       "net.json: layer 'a': a conv layer has no attribute \"strid\""},
      {withLayers(R"({"name": "a", "kind": "conv", "outputs": -4, "kernel": 3})"), "net.json: layer 'a': outputs must be a whole number from 1"},
      {withLayers(R"({"name": "a", "kind": "conv", "outputs": 2.5, "kernel": 3})"), "net.json: layer 'a': outputs must be a whole number"},
      {withLayers(R"({"name": "a", "kind": "dense", "outputs": 3, "activation": "gelu"})"), "net.json: layer 'a': \"activation\" must be"},
      {withLayers(R"({"name": "a", "kind": "dense", "outputs": 3, "activation": 1})"),
       "net.json: layer 'a': \"activation\" must be none, relu, tanh or sigmoid"},
      // The work of one layer is bounded: its kernel, then its multiply-adds once the shapes are known.
      {withLayers(R"({"name": "a", "kind": "conv", "outputs": 4, "kernel": 1000})"), "net.json: layer 'a': kernel must be a whole number from 1 to 64, not 1000"},
      {withLayers(R"({"name": "a", "kind": "maxpool", "kernel": 65})"), "net.json: layer 'a': kernel must be a whole number from 1 to 64, not 65"},
      {withLayers(R"({"name": "a", "kind": "conv", "outputs": 64, "kernel": 3, "padding": 20000}, )" + dense),
       "net.json: layer 'a': 922 billion multiply-adds per image (output [1, 64, 40006, 40006], kernel 3x3), more than the 17.2 billion glnet takes in one layer"},
      {withLayers(R"({"name": "a", "kind": "batchnorm", "momentum": 0})"), "net.json: layer 'a': momentum must be a number in (0, 1]"},
      {withLayers(R"({"name": "a", "kind": "relu", "inputs": ["b"]}, {"name": "b", "kind": "relu"})"),
       "net.json: layer 'a': input 'b' is not an earlier layer (nor 'input')"},
      {withLayers(R"({"name": "a", "kind": "add", "inputs": ["input"]})"), "net.json: layer 'a': a add layer reads 2 inputs, not 1"},
      {withLayers(R"({"name": "a", "kind": "maxpool", "kernel": 2, "padding": 2})"), "net.json: layer 'a': padding must be at most half"},
      {withLayers(R"({"name": "a", "kind": "concat"})"), "net.json: layer 'a': a concat layer reads 2 to 32 inputs, not 1"},
      {withLayers(R"({"name": "a", "kind": "dropout", "rate": 1})"), "net.json: layer 'a': rate must be a number in [0, 1), not 1"},
      {withLayers(R"({"name": "a", "kind": "dropout", "rate": "half"})"), "net.json: layer 'a': rate must be a number in [0, 1)"},
      {withLayers(R"({"name": "a", "kind": "attention"})"), "net.json: layer 'a': a attention layer needs \"heads\""},
      {withLayers(R"({"name": "a", "kind": "attention", "heads": 2, "causal": 1})"), "net.json: layer 'a': causal must be true or false, not 1"},
      {withLayers(R"({"name": "a", "kind": "gelu", "approximate": "erf"})"), "net.json: layer 'a': approximate must be \"none\" or \"tanh\", not a JSON string"},
      {withLayers(R"({"name": "a", "kind": "layernorm", "heads": 2})"), "net.json: layer 'a': a layernorm layer has no attribute \"heads\""},
      {withLayers(R"({"name": "a", "kind": "conv", "outputs": 2, "kernel": 3, "stride": 2}, {"name": "b", "kind": "concat", "inputs": ["a", "input"]}, )" + dense),
       "net.json: layer 'b': concat's inputs differ off its axis"},
      // Shapes, found when the network is built.
      {withLayers(R"({"name": "a", "kind": "dense", "outputs": 4}, {"name": "b", "kind": "attention", "heads": 2}, )" + dense),
       "net.json: layer 'b': attention reads [N, ..., positions, features], not [1, 4]"},
      {withLayers(R"({"name": "a", "kind": "attention", "heads": 3}, )" + dense), "net.json: layer 'a': its 8 features do not split into 3 heads"},
      {withLayers(R"({"name": "a", "kind": "dense", "outputs": 4}, {"name": "b", "kind": "tokens"}, )" + dense),
       "net.json: layer 'b': tokens reads [N, C, H, W], not [1, 4]"},
      {withLayers(R"({"name": "a", "kind": "conv", "outputs": 2, "kernel": 9, "padding": 0}, )" + dense),
       "net.json: layer 'a': conv2d none takes X [N, C, H, W]"},
      {withLayers(R"({"name": "a", "kind": "conv", "outputs": 2, "kernel": 3}, {"name": "b", "kind": "add", "inputs": ["a", "input"]}, )" + dense),
       "net.json: layer 'b': add takes two tensors of one shape; got [1, 2, 8, 8] and [1, 1, 8, 8]"},
      {withLayers(R"({"name": "a", "kind": "flatten"}, {"name": "b", "kind": "conv", "outputs": 2, "kernel": 3})"),
       "net.json: layer 'b': a convolution reads [N, C, H, W], not [1, 64]"},
      {withLayers(R"({"name": "a", "kind": "conv", "outputs": 2, "kernel": 3})"),
       "net.json: the last layer gives [1, 2, 8, 8] per batch of one, not class scores [N, classes]"},
  };
  for (const auto& [text, expected] : cases) {
    CAPTURE(text);
    const std::string error = refusal(text);
    CAPTURE(error);
    CHECK(error.rfind(expected, 0) == 0);
    CHECK(error.find('\n') == std::string::npos);
  }
}

TEST_CASE("the built-in networks parse, build and take MNIST images") {
  for (const char* name : {"lenet5", "resnet8"}) {
    CAPTURE(name);
    REQUIRE(builtinNet(name) != nullptr);
    const Network network = Network::create(name, Activation::relu, 1);
    CHECK(network.inputShape == Shape{1, 28, 28});
    CHECK(network.classes() == 10);
    CHECK(network.architecture == name);
  }
  CHECK(builtinNet("resnet9000") == nullptr);
  const Network resnet = Network::create("resnet8", Activation::relu, 1);
  // PyTorch's names and its batch-norm initialisation.
  CHECK(resnet.parameters.at("layer2.shortcut.conv.weight").shape == std::vector<std::int64_t>{32, 16, 1, 1});
  CHECK(resnet.parameters.at("bn1.running_var").values == std::vector<float>(16, 1.0f));
  CHECK(resnet.parameters.at("bn1.running_mean").values == std::vector<float>(16, 0.0f));
}

TEST_CASE("an activation that alone reads a batch normalization or an add runs inside that layer's op, in training and inference") {
  const NetDescription description = parseNetDescription(withLayers(R"({"name": "conv", "kind": "conv", "outputs": 2, "kernel": 3},
      {"name": "bn", "kind": "batchnorm"},
      {"name": "relu", "kind": "relu"},
      {"name": "sum", "kind": "add", "inputs": ["relu", "conv"]},
      {"name": "squash", "kind": "tanh"},
      {"name": "bn2", "kind": "batchnorm"},
      {"name": "relu2", "kind": "relu"},
      {"name": "joined", "kind": "add", "inputs": ["relu2", "bn2"]},
      {"name": "head", "kind": "dense", "outputs": 3})"),
                                                           "net.json");
  const Network network = Network::fromDescription(description, 1, "net.json");
  for (const bool training : {true, false}) {
    CAPTURE(training);
    std::multiset<std::string> names;
    const NetworkGraph built = buildGraph(network, 2, training);
    for (const OpNode& node : built.graph.ops()) names.insert(node.op->name());
    const std::string normalization = training ? "batch norm (training)" : "batch norm";
    CHECK(names.count(normalization + " + relu") == 1);
    CHECK(names.count("add + tanh") == 1);
    // bn2's output is read by `joined` as well: its ReLU stays an op of its own.
    CHECK(names.count(normalization) == 1);
    CHECK(names.count("relu") == 1);
    CHECK(names.count("add") == 1);
    CHECK(names.count("tanh") == 0);
  }
}

TEST_CASE("a described network's model file records its description and loads back the same") {
  test::TempDir directory;
  Network network = Network::create("resnet8", Activation::relu, 3);
  network.input = {{0.25f}, {0.5f}};
  const std::string path = directory.file("model.safetensors");
  network.save(path);
  const Network loaded = Network::load(path);
  REQUIRE(loaded.description.has_value());
  CHECK(toJson(*loaded.description) == toJson(*network.description));
  CHECK(loaded.parameterNames == network.parameterNames);
  CHECK(loaded.parameterValues() == network.parameterValues());
  CHECK(loaded.input.mean == std::vector<float>{0.25f});
  CHECK(loaded.classes() == 10);
  // The canonical JSON parses to itself.
  CHECK(toJson(parseNetDescription(toJson(*network.description), "again")) == toJson(*network.description));

  TensorFile file = network.toTensors();
  file.tensors.erase("fc.bias");
  writeSafetensors(directory.file("missing.safetensors"), file);
  CHECK_THROWS_WITH(Network::load(directory.file("missing.safetensors")), doctest::Contains("the network's tensor fc.bias is missing"));
  file = network.toTensors();
  file.tensors["fc.bias"].shape = {5, 2};
  writeSafetensors(directory.file("shape.safetensors"), file);
  CHECK_THROWS_WITH(Network::load(directory.file("shape.safetensors")), doctest::Contains("tensor fc.bias is not shaped as the network's layer fc needs"));
}

TEST_CASE("concatenation and dropout layers spell out in the recorded JSON and parse back the same") {
  const NetDescription description = parseNetDescription(withLayers(R"({"name": "a", "kind": "conv", "outputs": 2, "kernel": 3},
      {"name": "b", "kind": "concat", "inputs": ["a", "input", "a"]}, {"name": "c", "kind": "dropout", "rate": 0.25},
      {"name": "fc", "kind": "dense", "outputs": 3})"),
                                                          "net.json");
  const std::string json = toJson(description);
  CHECK(json.find(R"("inputs":["a","input","a"])") != std::string::npos);
  CHECK(json.find(R"("rate":0.25)") != std::string::npos);
  CHECK(toJson(parseNetDescription(json, "again")) == json);
  CHECK(parseNetDescription(withLayers(R"({"name": "d", "kind": "dropout"}, {"name": "fc", "kind": "dense", "outputs": 3})"), "net.json").layers[0].rate == 0.5f);
}
