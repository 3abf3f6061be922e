// An ONNX model is parsed once: what holds it (a runner, an imported network) binds the parsed model to a new batch
// size without reading its file again, so a file replaced or removed meanwhile changes nothing.
#include "convert/OnnxExport.h"
#include "model/Network.h"
#include "model/OnnxRunner.h"
#include "support/GlContext.h"
#include "support/TempDir.h"

#include <doctest/doctest.h>

#include <filesystem>

using namespace glnet;

TEST_CASE("an imported ONNX network builds its graph for a new batch size from the model parsed when it was loaded") {
  test::TempDir directory;
  const std::string path = directory.file("mlp.onnx");
  writeOnnx(Network::create("6-5-3", Activation::relu, 7), path);
  const Network network = Network::fromOnnx(path);
  directory.write("mlp.onnx", "no longer a model");
  const NetworkGraph graph = buildGraph(network, 4, false);
  CHECK(graph.graph.tensor(graph.images).shape == Shape{4, 6});
  CHECK(graph.graph.tensor(graph.logits).shape == Shape{4, 3});
  // What an imported network cannot do is refused naming the file it was parsed from (the one record of it).
  CHECK_THROWS_WITH_AS(buildGraph(network, 4, true), (path + ": training an imported ONNX model is not supported yet").c_str(), Error);
  CHECK_THROWS_WITH_AS(writeOnnx(network, directory.file("again.onnx")),
                       (path + ": an imported ONNX model is exported as it was read; copy the file").c_str(), Error);
  CHECK_THROWS_WITH_AS(network.withClasses(2, 0, path), doctest::Contains((path + ": an imported ONNX model keeps its classes").c_str()), Error);
}

TEST_SUITE("gl") {
  TEST_CASE("an ONNX runner runs a new batch size without reading its file again") {
    test::TempDir directory;
    const std::string path = directory.file("mlp.onnx");
    writeOnnx(Network::create("6-5-3", Activation::relu, 7), path);
    OnnxRunner runner(test::glContext(), path);
    const std::vector<float> rows{0.1f, 0.9f, 0.3f, 0.0f, 0.5f, 0.7f,  //
                                  0.8f, 0.2f, 0.6f, 0.4f, 1.0f, 0.1f,  //
                                  0.3f, 0.3f, 0.9f, 0.2f, 0.0f, 0.6f};
    std::vector<float> one;
    for (std::size_t r = 0; r < 3; ++r) {
      const std::vector<float> row = runner.run({rows.data() + r * 6}, 1).at(0);
      one.insert(one.end(), row.begin(), row.end());
    }
    std::filesystem::remove(path);
    const std::vector<std::vector<float>> three = runner.run({rows.data()}, 3);
    REQUIRE(three.size() == 1);
    REQUIRE(three[0].size() == one.size());
    for (std::size_t i = 0; i < one.size(); ++i) CHECK(three[0][i] == doctest::Approx(one[i]).epsilon(1e-5));
  }
}
