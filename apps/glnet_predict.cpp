// glnet_predict: classifies image files or MNIST test images with a model file, in one GPU batch.
#include "common/Cli.h"
#include "gl/Sync.h"
#include "data/Idx.h"
#include "data/Image.h"
#include "base/FileInput.h"
#include "base/check.h"
#include "importer/Onnx.h"
#include "model/Classifier.h"
#include "model/ImageClassifier.h"
#include "train/TrainingInputs.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <numeric>
#include <optional>
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

// Class names from a file, one per line; there must be one per class when `classes` is given.
std::vector<std::string> readLabels(const std::string& path, std::size_t classes = 0) {
  std::vector<std::string> labels;
  std::istringstream lines(readRegularFile(path, 16u << 20));
  for (std::string line; std::getline(lines, line);) labels.push_back(line);
  if (classes && labels.size() != classes) {
    throw Error(path + " names " + std::to_string(labels.size()) + " classes; the model has " + std::to_string(classes));
  }
  return labels;
}

// An imported image classifier (ResNet, MobileNet, ...) on photographs: top-k classes with their names.
// `own` is `parsed` at its own batch.
int classifyPhotographs(const cli::Parser& parser, const ParsedOnnx& parsed, const OnnxModel& own) {
  const bool json = parser.has("json");
  if (parser.has("mnist-index") || parser.has("invert") || parser.has("no-invert")) {
    throw UsageError("--mnist-index, --invert and --no-invert are for MNIST digit models; " + parser.text("model") + " takes " +
                     describe(own.graph.tensor(own.input).shape) + " images");
  }
  if (parser.positional().empty()) throw UsageError("give image files to classify");
  const auto images = static_cast<std::uint32_t>(parser.positional().size());
  const ImageClassifier classifier(parsed, images);
  const std::vector<float> mean = parser.has("mean") ? parseFloatList(parser.text("mean"), "--mean") : std::vector<float>{};
  const std::vector<float> std = parser.has("std") ? parseFloatList(parser.text("std"), "--std") : std::vector<float>{};
  std::optional<std::uint32_t> resize;
  if (parser.has("resize")) resize = static_cast<std::uint32_t>(parser.integer("resize", 1, 4096));
  const ClassifierPreprocessing preprocessing = classifier.preprocessing(mean, std, resize);
  if (parser.has("size") && parser.integer("size", 1, 4096) != preprocessing.height) {
    throw UsageError("--size " + parser.text("size") + ": the model takes " + std::to_string(preprocessing.height) + "x" +
                     std::to_string(preprocessing.width) + " images");
  }
  if (preprocessing.resize < std::max(preprocessing.height, preprocessing.width)) throw UsageError("--resize must be at least the model's input size");
  if (classifier.normalisationUnknown(mean)) {
    cli::warn("no --mean/--std and none in the model's metadata_props: pixels go in as values in [0, 1] (ImageNet models want "
              "--mean 0.485,0.456,0.406 --std 0.229,0.224,0.225)");
  }
  // Checked against the model's classes before any GPU work (the model's own labels already are, by classNamesOf).
  const std::size_t classes = classifier.model().graph.tensor(classifier.model().logits).shape[1];
  std::vector<std::string> labels = classifier.labels();
  if (parser.has("labels")) labels = readLabels(parser.text("labels"), classes);
  std::vector<float> inputs;
  for (const std::string& path : parser.positional()) {
    const std::vector<float> one = toClassifierInput(loadRgbImage(path), preprocessing);
    inputs.insert(inputs.end(), one.begin(), one.end());
  }
  const Context context(parser.contextOptions());
  (json ? std::cerr : std::cout) << "device " << context.device().index << ": " << context.device().renderer << "\n";
  InferenceTimes times;
  const std::vector<std::vector<double>> probabilities = classifier.classify(context, inputs, &times);
  const auto top = static_cast<std::size_t>(parser.integer("top", 1, 100000));
  nlohmann::json list = nlohmann::json::array();
  for (std::size_t i = 0; i < probabilities.size(); ++i) {
    std::vector<std::size_t> order(probabilities[i].size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return probabilities[i][a] > probabilities[i][b]; });
    order.resize(std::min(top, order.size()));
    nlohmann::json best = nlohmann::json::array();
    if (!json) std::printf("%s:\n", parser.positional()[i].c_str());
    for (const std::size_t c : order) {
      nlohmann::json entry = {{"class", c}, {"probability", probabilities[i][c]}};
      if (!labels.empty()) entry["label"] = labels[c];
      best.push_back(entry);
      if (!json) std::printf("  %6.2f%%  %zu%s%s\n", 100.0 * probabilities[i][c], c, labels.empty() ? "" : "  ", labels.empty() ? "" : labels[c].c_str());
    }
    list.push_back({{"image", parser.positional()[i]}, {"top", best}});
  }
  if (json) std::cout << list.dump(2) << "\n";
  if (parser.has("time")) {
    std::fprintf(json ? stderr : stdout, "times: compile %.2f ms, upload %.3f ms, issue %.3f ms, readback %.3f ms (waits for the GPU)\n",
                 times.compileMs, times.uploadMs, times.issueMs, times.readbackMs);
  }
  return 0;
}

// --time: where a prediction's time went (on stderr beside --json).
void printTimes(const InferenceTimes& times, bool json) {
  std::fprintf(json ? stderr : stdout, "times: compile %.2f ms, upload %.3f ms, issue %.3f ms, %s %.3f ms, readback %.3f ms\n", times.compileMs,
               times.uploadMs, times.issueMs, TimerQuery::clockName(), times.gpuMs, times.readbackMs);
}

// A text classifier's answers for the texts given as arguments.
int classifyTexts(const cli::Parser& parser, const Network& model) {
  if (!parser.has("tokenizer")) throw UsageError("the model reads token ids: give --tokenizer tokenizer.json and texts");
  if (parser.positional().empty()) throw UsageError("give the texts to classify");
  for (const char* imageOnly : {"mnist-index", "invert", "no-invert", "size", "resize", "mean", "std"}) {
    if (parser.has(imageOnly)) throw UsageError(std::string("--") + imageOnly + " is for images; this model classifies texts");
  }
  const std::optional<std::uint32_t> padId =
      parser.has("pad-id") ? std::optional<std::uint32_t>(static_cast<std::uint32_t>(parser.integer("pad-id", 0, (1 << 24) - 1))) : std::nullopt;
  const ImageSet ids = textsForNetwork(model, parser.positional(), parser.text("tokenizer"), padId);
  const bool json = parser.has("json");
  const Context context(parser.contextOptions());
  (json ? std::cerr : std::cout) << "device " << context.device().index << ": " << context.device().renderer << "\n";
  InferenceTimes times;
  const std::vector<Prediction> predictions = predict(context, model, ids.pixels, ids.count, &times);
  std::vector<std::string> names = model.classNames;
  if (parser.has("labels")) names = readLabels(parser.text("labels"), model.classes());
  const auto named = [&](std::size_t c) { return std::to_string(c) + (names.empty() ? "" : " " + names[c]); };
  nlohmann::json list = nlohmann::json::array();
  for (std::size_t i = 0; i < predictions.size(); ++i) {
    const Prediction& prediction = predictions[i];
    if (json) {
      nlohmann::json entry = {{"text", parser.positional()[i]}, {"class", prediction.label}, {"probabilities", prediction.probabilities}};
      if (!names.empty()) entry["class_name"] = names[prediction.label];
      list.push_back(entry);
      continue;
    }
    std::printf("text %zu: %s (%.1f%%)\n", i + 1, named(prediction.label).c_str(), 100.0 * prediction.probabilities[prediction.label]);
  }
  if (json) std::cout << list.dump(2) << "\n";
  if (parser.has("time")) printTimes(times, json);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return cli::run("glnet_predict", [&] {
    cli::Parser parser("glnet_predict",
                       "Classifies images with a glnet, PyTorch (safetensors) or ONNX model, all in one GPU batch. Images are made\n"
                       "into the model's input as its file records its training images were made (metadata image_resize):\n"
                       "digit models (28x28 gray) crop, scale into 20x20 and centre by mass, as MNIST was made; models trained\n"
                       "on an image folder or CIFAR-10 resize to their input, as glnet_train read the images; an ONNX image\n"
                       "classifier from elsewhere ([N, 3, H, W]) resizes the shorter side and crops the centre, as torchvision\n"
                       "evaluates. Each channel is normalised with the file's input_mean and input_std; class names come from\n"
                       "its labels. A text classifier (a network whose embedding layer reads token ids) takes texts instead,\n"
                       "tokenized with --tokenizer and cut or padded to its length as glnet_train --dataset text makes them.\n",
                       "--model MODEL [IMAGE... | --tokenizer tokenizer.json TEXT...] [--mnist-index N[,N...]] [options]");
    parser.positionals("IMAGE...", "PNG, JPEG, BMP or PGM files (for a text classifier: the texts)", 0, 100000)
        .modelOptions("model file (safetensors, or ONNX by its .onnx name) to classify with")
        .option("mnist-index", "N[,N...]", "classify these images of the MNIST test set")
        .option("data", "DIR", "directory of the MNIST IDX files, for --mnist-index", "data/mnist")
        .flag("invert", "invert the images (dark digits on light paper; default: as the model file's image_invert says, for digits: "
              "when the border is mostly light)")
        .flag("no-invert", "never invert")
        .option("size", "N", "image classifiers: the crop the model takes (default and only choice: its input's height)")
        .option("resize", "N", "image classifiers: resize the shorter side to N, then crop the centre (default: as the model file "
                "records; a glnet model resizes to its input as training did, an ONNX classifier from elsewhere to size x 256/224)")
        .option("mean", "M[,M,M]", "per-channel mean of the normalisation, on the 0-1 scale (default: the model file's input_mean, else 0)")
        .option("std", "S[,S,S]", "per-channel deviation (default: the model file's input_std, else 1)")
        .option("labels", "FILE", "class names, one per line (default: the model file's labels)")
        .option("top", "K", "ONNX image classifiers from elsewhere: classes listed per image", "5")
        .option("tokenizer", "FILE", "text classifiers: the tokenizer.json that makes the texts token ids")
        .option("pad-id", "N", "text classifiers: the id that fills short texts (default: the pad of the model's mask layers, else 0)")
        .flag("time", "show upload, GPU and readback times")
        .common(true);
    parser.parse(argc, argv);
    if (!parser.has("model")) throw UsageError("--model is required");
    if (parser.positional().empty() && !parser.has("mnist-index")) throw UsageError("give image files or --mnist-index");
    if (parser.has("invert") && parser.has("no-invert")) throw UsageError("--invert and --no-invert contradict each other");
    const Inversion inversion =
        parser.has("invert") ? Inversion::always : parser.has("no-invert") ? Inversion::never : Inversion::automatic;
    // An ONNX image classifier made elsewhere (no glnet preprocessing recorded) runs on float inputs, as torchvision's
    // evaluation makes them; every other model takes uint8 planes made as its training images were.
    if (isOnnxPath(parser.text("model"))) {
      const ParsedOnnx parsed(parser.text("model"));
      const OnnxModel onnx = readOnnx(parsed, 0);
      if (takesPhotographs(onnx) && !onnx.metadata.count("image_resize")) return classifyPhotographs(parser, parsed, onnx);
    }
    const bool json = parser.has("json");
    const ContextOptions contextOptions = parser.contextOptions();

    Network model = cli::loadModel(parser);
    if (model.readsTokenIds()) return classifyTexts(parser, model);
    for (const char* textOnly : {"tokenizer", "pad-id"}) {
      if (parser.has(textOnly)) throw UsageError(std::string("--") + textOnly + " is for text classifiers; this model takes " + describe(model.inputShape) + " inputs");
    }
    ImagePreprocessing& images = model.images;
    if (parser.has("invert") || parser.has("no-invert")) images.inversion = inversion;
    if (images.resize != ImageResize::none && images.resize != ImageResize::mnistDigit) {
      if (parser.has("size") && parser.integer("size", 1, 4096) != images.height) {
        throw UsageError("--size " + parser.text("size") + ": the model takes " + std::to_string(images.height) + "x" + std::to_string(images.width) + " images");
      }
      if (parser.has("resize")) {
        images.resize = ImageResize::centreCrop;
        images.shorterSide = static_cast<std::uint32_t>(parser.integer("resize", 1, 4096));
        if (images.shorterSide < std::max(images.height, images.width)) throw UsageError("--resize must be at least the model's input size");
      }
    } else {
      for (const char* imageOnly : {"size", "resize"}) {
        if (parser.has(imageOnly)) throw UsageError(std::string("--") + imageOnly + " is for image classifiers; this model takes " + (images.resize == ImageResize::none ? "no images" : "28x28 digits"));
      }
    }
    for (const char* flag : {"mean", "std"}) {
      if (!parser.has(flag)) continue;
      const std::vector<float> values = parseFloatList(parser.text(flag), std::string("--") + flag);
      std::vector<float>& target = std::string(flag) == "mean" ? model.input.mean : model.input.std;
      if (values.size() != 1 && values.size() != target.size()) {
        throw UsageError(std::string("--") + flag + " needs 1 or " + std::to_string(target.size()) + " values for this model");
      }
      target = values.size() == 1 ? std::vector<float>(target.size(), values[0]) : values;
      if (std::string(flag) == "std" && !std::all_of(target.begin(), target.end(), [](float v) { return v > 0; })) throw UsageError("--std values must be positive");
    }
    if (parser.has("labels")) model.classNames = readLabels(parser.text("labels"), model.classes());
    std::vector<Input> inputs;
    for (const std::string& path : parser.positional()) {
      const std::string bytes = readRegularFile(path, largestImageFileBytes);
      bool blank = false;
      inputs.push_back({path, toModelPixels(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(), path, images, &blank), -1, blank});
      if (blank) cli::warn(path + ": " + blankImageWarning);
    }
    if (parser.has("mnist-index")) {
      if (model.inputs() != 28 * 28) {
        throw UsageError("--mnist-index gives 28x28 MNIST images; the model takes " + describe(model.inputShape) + " inputs");
      }
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
        if (!model.classNames.empty()) entry["class_name"] = model.classNames[prediction.label];
        if (inputs[i].label >= 0) entry["label"] = inputs[i].label;
        if (inputs[i].blank) entry["warning"] = blankImageWarning;
        list.push_back(entry);
        continue;
      }
      std::vector<std::size_t> order(prediction.probabilities.size());
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](std::size_t a, std::size_t b) { return prediction.probabilities[a] > prediction.probabilities[b]; });
      // A class is its number, and its name where the model file records names.
      const auto named = [&](std::size_t c) { return std::to_string(c) + (model.classNames.empty() ? "" : " " + model.classNames[c]); };
      std::printf("%s: %s  (", inputs[i].name.c_str(), named(prediction.label).c_str());
      for (std::size_t k = 0; k < std::min<std::size_t>(3, order.size()); ++k) {
        std::printf("%s%s %.1f%%", k ? ", " : "", named(order[k]).c_str(), 100.0 * prediction.probabilities[order[k]]);
      }
      std::printf(")");
      if (inputs[i].label >= 0) std::printf("  label %d%s", inputs[i].label, inputs[i].label == static_cast<int>(prediction.label) ? "" : "  WRONG");
      std::printf("\n");
    }
    if (json) std::cout << list.dump(2) << "\n";
    if (parser.has("time")) printTimes(times, json);
    return 0;
  });
}
