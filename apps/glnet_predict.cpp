// glnet_predict: classifies image files or MNIST test images with a model file, in one GPU batch.
#include "common/Cli.h"
#include "gl/Sync.h"
#include "data/Idx.h"
#include "data/Image.h"
#include "gl/check.h"
#include "model/Classifier.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <numeric>
#include <sstream>

using namespace glnet;

namespace {

struct Input {
  std::string name;
  std::vector<std::uint8_t> pixels;
  int label = -1;  // known for MNIST images
  bool blank = false;
};

std::vector<std::size_t> parseIndices(const std::string& text, std::size_t count) {
  std::vector<std::size_t> indices;
  if (text.empty()) throw UsageError("--mnist-index is empty: give indices from 0 to " + std::to_string(count - 1) + " separated by commas");
  std::istringstream parts(text + ",");  // so that a trailing comma shows as an empty index
  std::string part;
  while (std::getline(parts, part, ',')) {
    char* end = nullptr;
    const long index = std::strtol(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || index < 0 || static_cast<std::size_t>(index) >= count) {
      throw UsageError("--mnist-index takes indices from 0 to " + std::to_string(count - 1) + " separated by commas, not '" +
                       part + "'");
    }
    indices.push_back(static_cast<std::size_t>(index));
  }
  return indices;
}

}  // namespace

int main(int argc, char** argv) {
  return cli::run("glnet_predict", [&] {
    cli::Parser parser("glnet_predict",
                       "Classifies digit images with a glnet or PyTorch model file (safetensors), all in one GPU batch.\n"
                       "Images that are not 28x28 are cropped, scaled into 20x20 and centred by mass, as MNIST was made.",
                       "--model MODEL.safetensors [IMAGE...] [--mnist-index N[,N...]] [options]");
    parser.positionals("IMAGE...", "PNG, JPEG, BMP or PGM files", 0, 100000)
        .modelOptions("model file (safetensors) to classify with")
        .option("mnist-index", "N[,N...]", "classify these images of the MNIST test set")
        .option("data", "DIR", "directory of the MNIST IDX files, for --mnist-index", "data/mnist")
        .flag("invert", "the images are dark digits on light paper: invert them")
        .flag("no-invert", "never invert (by default images with a mostly light border are inverted)")
        .flag("time", "show upload, GPU and readback times")
        .common(true);
    parser.parse(argc, argv);
    if (!parser.has("model")) throw UsageError("--model is required");
    if (parser.positional().empty() && !parser.has("mnist-index")) throw UsageError("give image files or --mnist-index");
    if (parser.has("invert") && parser.has("no-invert")) throw UsageError("--invert and --no-invert contradict each other");
    const Inversion inversion =
        parser.has("invert") ? Inversion::always : parser.has("no-invert") ? Inversion::never : Inversion::automatic;
    const bool json = parser.has("json");
    const ContextOptions contextOptions = parser.contextOptions();

    const Network model = cli::loadModel(parser);
    if (model.inputs() != 28 * 28) {
      throw Error(parser.text("model") + ": the model takes " + std::to_string(model.inputs()) +
                  " inputs; glnet_predict classifies 28x28 images (784 inputs)");
    }
    std::vector<Input> inputs;
    for (const std::string& path : parser.positional()) {
      const GrayImage image = loadGrayImage(path);
      inputs.push_back({path, toMnistDigit(image, inversion), -1, looksBlank(image.pixels.data(), image.pixels.size())});
      if (inputs.back().blank) cli::warn(path + ": " + blankImageWarning);
    }
    if (parser.has("mnist-index")) {
      const LabelledImages test = readMnistSplit(parser.text("data"), Split::test);
      for (const std::size_t index : parseIndices(parser.text("mnist-index"), test.images.count)) {
        const auto begin = test.images.pixels.begin() + static_cast<std::ptrdiff_t>(index * test.images.pixelsPerImage());
        inputs.push_back({"mnist-test[" + std::to_string(index) + "]",
                          {begin, begin + static_cast<std::ptrdiff_t>(test.images.pixelsPerImage())},
                          test.labels[index], false});
      }
    }
    std::vector<std::uint8_t> pixels;
    for (const Input& input : inputs) pixels.insert(pixels.end(), input.pixels.begin(), input.pixels.end());

    const Context context(contextOptions);
    (json ? std::cerr : std::cout) << "device " << context.device().index << ": " << context.device().renderer << "\n";
    InferenceTimes times;
    const std::vector<Prediction> predictions = predict(context, model, pixels, inputs.size(), &times);

    nlohmann::json list = nlohmann::json::array();
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const Prediction& prediction = predictions[i];
      if (json) {
        nlohmann::json entry = {{"image", inputs[i].name}, {"class", prediction.label}, {"probabilities", prediction.probabilities}};
        if (inputs[i].label >= 0) entry["label"] = inputs[i].label;
        if (inputs[i].blank) entry["warning"] = blankImageWarning;
        list.push_back(entry);
        continue;
      }
      std::vector<std::size_t> order(prediction.probabilities.size());
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](std::size_t a, std::size_t b) { return prediction.probabilities[a] > prediction.probabilities[b]; });
      std::printf("%s: %u  (", inputs[i].name.c_str(), prediction.label);
      for (std::size_t k = 0; k < std::min<std::size_t>(3, order.size()); ++k) {
        std::printf("%s%zu %.1f%%", k ? ", " : "", order[k], 100.0 * prediction.probabilities[order[k]]);
      }
      std::printf(")");
      if (inputs[i].label >= 0) std::printf("  label %d%s", inputs[i].label, inputs[i].label == static_cast<int>(prediction.label) ? "" : "  WRONG");
      std::printf("\n");
    }
    if (json) std::cout << list.dump(2) << "\n";
    if (parser.has("time")) {
      std::fprintf(json ? stderr : stdout,
                   "times: compile %.2f ms, upload %.3f ms, issue %.3f ms, %s %.3f ms, readback %.3f ms\n", times.compileMs,
                   times.uploadMs, times.issueMs, TimerQuery::clockName(), times.gpuMs, times.readbackMs);
    }
    return 0;
  });
}
