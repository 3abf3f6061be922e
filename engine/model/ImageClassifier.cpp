#include "model/ImageClassifier.h"

#include "base/Stopwatch.h"
#include "base/check.h"
#include "graph/CompiledGraph.h"
#include "model/Network.h"

#include <cmath>
#include <sstream>

namespace glnet {

bool takesPhotographs(const OnnxModel& model) {
  const Shape& shape = model.graph.tensor(model.input).shape;
  return shape.size() == 4 && (shape[1] == 3 || shape[2] != 28 || shape[3] != 28);
}

std::vector<float> parseFloatList(const std::string& text, const std::string& flag) {
  std::vector<float> values;
  std::istringstream parts(text + ",");
  std::string part;
  while (std::getline(parts, part, ',')) {
    char* end = nullptr;
    const float value = std::strtof(part.c_str(), &end);
    if (part.empty() || *end != '\0' || !std::isfinite(value)) throw UsageError(flag + " takes numbers separated by commas, not '" + text + "'");
    values.push_back(value);
  }
  return values;
}

ImageClassifier::ImageClassifier(const ParsedOnnx& parsed, std::uint32_t images) : path_(parsed.path()), model_(readOnnx(parsed, 0)) {
  const Shape& shape = model_.graph.tensor(model_.input).shape;
  if (shape.size() != 4 || (shape[1] != 1 && shape[1] != 3)) {
    throw Error(path_ + ": the model's input is " + describe(shape) + "; an image classifier takes [N, 1 or 3, H, W]");
  }
  if (shape[0] != images) {
    if (!model_.dynamicBatch) throw Error(path_ + ": the model's batch is fixed at " + std::to_string(shape[0]) + ", not " + std::to_string(images) + " images");
    model_ = readOnnx(parsed, images);
  }
  if (model_.graph.tensor(model_.logits).shape.size() != 2) {
    throw Error(path_ + ": the model's output is " + describe(model_.graph.tensor(model_.logits).shape) + "; an image classifier gives [N, classes]");
  }
}

ClassifierPreprocessing ImageClassifier::preprocessing(const std::vector<float>& mean, const std::vector<float>& std,
                                                       std::optional<std::uint32_t> resize) const {
  const Shape& shape = model_.graph.tensor(model_.input).shape;
  ClassifierPreprocessing p;
  p.channels = shape[1];
  p.height = shape[2];
  p.width = shape[3];
  p.resize = resize ? *resize : defaultPreprocessing({p.channels, p.height, p.width}, true).shorterSide;
  const auto perChannel = [&](const std::vector<float>& given, const char* key, float otherwise, const std::string& flag) {
    std::vector<float> values = given;
    if (values.empty()) {
      const auto found = model_.metadata.find(key);
      values = found == model_.metadata.end() ? std::vector<float>{otherwise} : parseFloatList(found->second, path_ + ": metadata_props " + key);
    }
    if (values.size() == 1) values.assign(p.channels, values[0]);
    if (values.size() != p.channels) throw UsageError(flag + " needs 1 or " + std::to_string(p.channels) + " values for this model");
    return values;
  };
  p.mean = perChannel(mean, "input_mean", 0.0f, optionName("mean"));
  p.std = perChannel(std, "input_std", 1.0f, optionName("std"));
  for (const float s : p.std) {
    if (!(s > 0)) throw UsageError(optionName("std") + " values must be positive");
  }
  return p;
}

bool ImageClassifier::normalisationUnknown(const std::vector<float>& mean) const {
  return mean.empty() && !model_.metadata.count("input_mean");
}

std::vector<std::string> ImageClassifier::labels() const {
  return classNamesOf(model_.metadata, model_.graph.tensor(model_.logits).shape[1], path_);
}

std::vector<std::vector<double>> ImageClassifier::classify(const Context& context, const std::vector<float>& inputs, InferenceTimes* times) const {
  const Shape& inputShape = model_.graph.tensor(model_.input).shape;
  GLNET_ASSERT(inputs.size() == elementCount(inputShape), "one preprocessed image per input row");
  Stopwatch clock;
  CompiledGraph compiled(context, model_.graph, CompiledGraph::Memory::reused, {model_.output, model_.logits});
  Plan plan = compiled.forwardPlan([](Plan&) {});
  if (times) times->compileMs = clock.restart();
  compiled.upload(model_.input, inputs.data(), inputs.size() * sizeof(float));
  if (times) times->uploadMs = clock.restart();
  plan.run();
  if (times) times->issueMs = clock.restart();
  const bool endsInSoftmax = model_.logits.id != model_.output.id;
  const Tensor read = endsInSoftmax ? model_.output : model_.logits;
  const Shape& shape = model_.graph.tensor(read).shape;
  std::vector<float> scores(elementCount(shape));
  const BufferView view = compiled.view(read);
  plan.read(*view.buffer, scores.data(), scores.size() * sizeof(float), view.offset);
  if (times) times->readbackMs = clock.restart();
  std::vector<std::vector<double>> probabilities;
  for (std::uint32_t r = 0; r < shape[0]; ++r) {
    std::vector<double> row(scores.begin() + static_cast<std::ptrdiff_t>(r * shape[1]), scores.begin() + static_cast<std::ptrdiff_t>((r + 1) * shape[1]));
    for (const double v : row) {
      if (!std::isfinite(v)) throw Error(path_ + ": the model's output holds NaN or infinite values");
    }
    if (!endsInSoftmax) {
      const double largest = *std::max_element(row.begin(), row.end());
      double total = 0;
      for (double& v : row) total += (v = std::exp(v - largest));
      for (double& v : row) v /= total;
    }
    probabilities.push_back(row);
  }
  return probabilities;
}

}  // namespace glnet
