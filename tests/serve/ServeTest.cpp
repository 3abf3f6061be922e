#include "base/check.h"
#include "graph/ReferenceGraph.h"
#include "ref/Reference.h"
#include "serve/PredictRequest.h"
#include "serve/ServeMetrics.h"
#include "model/WholeMlp.h"
#include "serve/WarmClassifier.h"
#include "support/Compare.h"
#include "support/GlContext.h"
#include "support/Random.h"

#include <doctest/doctest.h>
#include <stb/stb_image_write.h>

#include <algorithm>

using namespace glnet;

TEST_CASE("prediction requests: JSON pixels and images parse; everything else is refused with the reason") {
  std::string pixels = "[";
  for (int i = 0; i < 5; ++i) pixels += (i ? "," : "") + std::to_string(i * 60);
  pixels += "]";
  const PredictRequest one = parsePredictRequest(R"({"pixels": )" + pixels + "}", "application/json", 5);
  CHECK(one.pixels == std::vector<std::uint8_t>{0, 60, 120, 180, 240});
  CHECK(one.names == std::vector<std::string>{"pixels"});
  const PredictRequest two = parsePredictRequest(R"({"images": [)" + pixels + "," + pixels + "]}", "", 5);
  CHECK(two.pixels.size() == 10);
  CHECK(two.names == std::vector<std::string>{"images[0]", "images[1]"});

  const auto refused = [](const std::string& body, const std::string& reason) {
    try {
      parsePredictRequest(body, "application/json", 3);
      FAIL("accepted: " << body);
    } catch (const Error& error) {
      CHECK_MESSAGE(std::string(error.what()).find(reason) != std::string::npos, std::string(error.what()));
      CHECK(std::string(error.what()).find('\n') == std::string::npos);
    }
  };
  refused(R"({"pixels": [1, 2]})", "has 2 values; the model takes 3");
  refused(R"({"pixels": [1, 2, 256]})", "pixels[2] is 256");
  refused(R"({"pixels": [1, -1, 2]})", "pixels[1] is -1");
  refused(R"({"pixels": [1, 2.5, 2]})", "pixels[1] is 2.5");
  refused(R"({"pixels": [1, null, 2]})", "pixels[1] is a JSON null");
  refused(R"({"pixels": [1, "\u00ff\u00fe", 2]})", "pixels[1] is a JSON string, not an integer");
  refused(std::string("{\"pixels\": [1, \"\xff\xfe\", 2]}"), "not valid JSON (syntax error at byte");
  refused(R"({"pixels": )" + std::string(100000, '['), "nested deeper than 32 levels");
  refused(R"({"pixels": [1, 2, 3], "pixels": [1, 2, 3]})", "\"pixels\" appears twice");
  refused(R"({"pixels": [1, 2, 3], "invert": 1})", "\"invert\" must be true or false");
  refused(R"({"pixels": [1, 2, 3], "colour": 1})", "unknown field");
  refused("\x89PNG\r\n\x1a\n", "body is an image sent as application/json; send it with Content-Type image/png");
  refused(R"({"pixels": [1, 2, 1e400]})", "not valid JSON");
  refused(R"({"pixels": "abc"})", "must be an array");
  refused(R"({"images": []})", "non-empty array");
  refused(R"({"images": [[1, 2, 3], [1]]})", "images[1] has 1 values");
  refused(R"({"pixels": [1, 2, 3], "images": [[1, 2, 3]]})", "an object with");
  refused(R"([1, 2, 3])", "an object with");
  refused(R"({"pixels": [NaN, 1, 2]})", "not valid JSON");
  refused("", "no body");
  CHECK_THROWS_WITH_AS(parsePredictRequest("not an image at all", "image/png", 784), doctest::Contains("not a readable image"), Error);
  ImagePreprocessing noImages;
  noImages.resize = ImageResize::none;
  CHECK_THROWS_WITH_AS(parsePredictRequest("\x89PNG....", "image/png", 10, noImages), doctest::Contains("send JSON pixels instead"), Error);
  // Error messages never quote request bytes: every character is printable ASCII.
  for (const std::string& body : {std::string("{\"pixels\": [\"\xc3\x28\"]}"), std::string("\xff\xd8garbage\xff"), std::string("{\"\xf0\": 1}")}) {
    try {
      parsePredictRequest(body, "application/json", 3);
      FAIL("accepted");
    } catch (const Error& error) {
      const std::string message = error.what();
      CHECK_MESSAGE(std::all_of(message.begin(), message.end(), [](char c) { return c >= 0x20 && c < 0x7f; }), message);
    }
  }
}

TEST_CASE("prediction requests: the invert field, blank-image warnings and multipart parts") {
  const PredictRequest inverted = parsePredictRequest(R"({"images": [[0, 100, 255], [7, 7, 7]], "invert": true})", "Application/JSON; charset=utf-8", 3);
  CHECK(inverted.pixels == std::vector<std::uint8_t>{255, 155, 0, 248, 248, 248});
  CHECK(inverted.warnings[0].empty());
  CHECK(inverted.warnings[1].find("blank or nearly uniform") != std::string::npos);

  std::vector<std::uint8_t> ring(28 * 28, 0);
  for (std::size_t i = 0; i < ring.size(); ++i) ring[i] = (i % 28 > 9 && i % 28 < 18 && i / 28 > 4 && i / 28 < 22) ? 255 : 0;
  std::string png;
  stbi_write_png_to_func([](void* context, void* data, int size) { static_cast<std::string*>(context)->append(static_cast<char*>(data), static_cast<std::size_t>(size)); },
                         &png, 28, 28, 1, ring.data(), 28);
  std::string json = "{\"pixels\": [";
  for (std::size_t i = 0; i < ring.size(); ++i) json += (i ? "," : "") + std::to_string(ring[i]);
  json += "]}";
  const PredictRequest parts = parsePredictParts({{"file", "digit\x01.png", "image/png", png}, {"data", "", "application/json", json},
                                                  {"untyped", "", "", png}},
                                                 784);
  CHECK(parts.names == std::vector<std::string>{"digit?.png", "pixels", "untyped"});
  CHECK(parts.pixels.size() == 3 * 784);
  CHECK(std::equal(ring.begin(), ring.end(), parts.pixels.begin()));
  CHECK(std::equal(ring.begin(), ring.end(), parts.pixels.begin() + 784));
  CHECK_THROWS_WITH_AS(parsePredictParts({}, 784), doctest::Contains("has no parts"), Error);
  CHECK_THROWS_WITH_AS(parsePredictParts({{"note", "", "", "hello"}}, 784), doctest::Contains("note: not a readable image"), Error);
  CHECK_THROWS_WITH_AS(parsePredictParts({{"empty", "e.png", "image/png", ""}}, 784), doctest::Contains("e.png is empty"), Error);
}

TEST_CASE("serve metrics: counters, a cumulative latency histogram and the batch-size histogram") {
  ServeMetrics metrics;
  metrics.observePrediction(200, 0.0003, 2);
  metrics.observePrediction(400, 0.002, 0);
  metrics.count("/healthz", 200);
  BatchingStats batching;
  batching.batches = 3;
  batching.images = 9;
  batching.batchSizeBounds = {1, 2, 4};
  batching.batchSizeCounts = {1, 0, 2};
  batching.queuedImages = 5;
  const std::string text = metrics.prometheus(batching);
  for (const char* line : {"glnet_requests_total{path=\"/v1/predict\",code=\"200\"} 1", "glnet_requests_total{path=\"/healthz\",code=\"200\"} 1",
                           "glnet_request_errors_total 1", "glnet_images_total 2", "glnet_request_duration_seconds_bucket{le=\"0.00025\"} 0",
                           "glnet_request_duration_seconds_bucket{le=\"0.0005\"} 1", "glnet_request_duration_seconds_bucket{le=\"0.0025\"} 2",
                           "glnet_request_duration_seconds_count 2", "glnet_batch_size_bucket{le=\"2\"} 1", "glnet_batch_size_bucket{le=\"4\"} 3",
                           "glnet_batch_size_sum 9", "glnet_queue_images 5"}) {
    CHECK_MESSAGE(text.find(std::string(line) + "\n") != std::string::npos, line);
  }
}

TEST_SUITE("gl") {
TEST_CASE("a warm classifier answers every batch size from 1 to its capacity as float64 does, on both paths") {
  std::mt19937 random = test::generator(91);
  // 300 outputs: more than the one-dispatch shader's 256 invocations; 61, 33, 7 and 5: fewer, summed in parts.
  // The first layer runs in one group (61-33-7) or, as a CPU device slices it, in 2 or 3 groups per image (the
  // other three); the narrow slices of a GPU are the next test's.
  for (const auto& [architecture, activation] :
       {std::pair{"61-33-7", Activation::relu}, std::pair{"61-300-7-5", Activation::tanh}, std::pair{"700-301", Activation::relu},
        std::pair{"700-760-3", Activation::sigmoid}}) {
    const std::string name = architecture;  // CAPTURE's lambda may not capture a structured binding before C++20
    for (const InferencePath path : {InferencePath::automatic, InferencePath::layered}) {
      CAPTURE(name);
      CAPTURE(static_cast<int>(path));
      const Network network = Network::create(architecture, activation, test::seed());
      const std::size_t classes = network.classes();
      constexpr std::size_t capacity = 11;  // plans for 1, 2, 4, 8 and 11
      WarmClassifier classifier(test::glContext(), network, capacity, path);
      CHECK(classifier.planSizes() == std::vector<std::size_t>{1, 2, 4, 8, 11});
      CHECK(Classifier(test::glContext(), network, 4, path).wholeNetworkInOneDispatch() == (path == InferencePath::automatic));
      for (const std::size_t count : {std::size_t{1}, std::size_t{3}, std::size_t{8}, std::size_t{9}, capacity}) {
        CAPTURE(count);
        const std::vector<std::uint8_t> pixels = test::randomBytes(random, count * network.inputs());
        const std::vector<Prediction> predictions = classifier.classify(pixels.data(), count);
        REQUIRE(predictions.size() == count);
        const NetworkGraph reference = buildGraph(network, static_cast<std::uint32_t>(count), false);
        const std::vector<double> logits =
            referenceValues(reference.graph,
                            {{reference.images.id, ref::normalize(pixels, 0, pixels.size(), network.input, network.inputs())}})
                [static_cast<std::size_t>(reference.logits.id)];
        std::vector<float> gpu;
        for (const Prediction& prediction : predictions) gpu.insert(gpu.end(), prediction.probabilities.begin(), prediction.probabilities.end());
        test::checkClose(gpu, ref::softmax(logits, count, classes), 1e-6, 1e-4);
        const std::vector<std::uint32_t> labels = ref::argmax(logits, count, classes);
        for (std::size_t i = 0; i < count; ++i) CHECK(predictions[i].label == labels[i]);
      }
    }
  }
}

TEST_CASE("the one-dispatch MLP sliced as for a GPU: narrow first-layer slices, the last group of each image finishing") {
  std::mt19937 random = test::generator(92);
  // 61-300-7-5: slices of 64 (five, the last one part full); 700-301: slices of 4 (76 groups, one layer, so
  // the slices write the logits); 700-760-3: slices of 4 or 5 by the batch (190 up to batch 8, 187 at 11).
  for (const auto& [architecture, activation] : {std::pair{"61-300-7-5", Activation::tanh}, std::pair{"700-301", Activation::relu},
                                                 std::pair{"700-760-3", Activation::sigmoid}}) {
    const Network network = Network::create(architecture, activation, test::seed());
    const std::size_t classes = network.classes();
    const std::string name = architecture;  // CAPTURE's lambda may not capture a structured binding before C++20
    for (const std::size_t batch : {std::size_t{1}, std::size_t{3}, std::size_t{8}, std::size_t{11}}) {
      CAPTURE(name);
      CAPTURE(batch);
      ProgramCache programs;
      const WholeMlpOp op(programs, network, test::glContext().limits(), batch, 2048);
      GpuImages images(batch, network.inputs());
      images.upload(test::randomBytes(random, batch * network.inputs()));
      Buffer labels(batch * sizeof(std::uint32_t)), probabilities(batch * classes * sizeof(float));
      labels.fill(0xFFFFFFFFu);
      probabilities.fill(0x7FC00000u);  // NaN
      Plan plan(test::glContext().limits());
      const BufferView probabilityView(probabilities);
      plan.record(op(images.pixels, labels, &probabilityView, static_cast<std::uint32_t>(batch),
                     Uniform::u32(WholeMlpOp::firstImageLocation, 0)));
      plan.run();
      // A second run on other images, checked: it needs the arrival counters the first run reset.
      const std::vector<std::uint8_t> pixels = test::randomBytes(random, batch * network.inputs());
      images.upload(pixels);
      plan.run();
      const NetworkGraph reference = buildGraph(network, static_cast<std::uint32_t>(batch), false);
      const std::vector<double> logits =
          referenceValues(reference.graph, {{reference.images.id, ref::normalize(pixels, 0, pixels.size(), network.input, network.inputs())}})
              [static_cast<std::size_t>(reference.logits.id)];
      test::checkClose(probabilities.read<float>(), ref::softmax(logits, batch, classes), 1e-6, 1e-4);
      CHECK(labels.read<std::uint32_t>() == ref::argmax(logits, batch, classes));
    }
  }
}
}
