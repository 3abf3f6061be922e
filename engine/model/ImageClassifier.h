// An imported image classifier (ONNX, input [N, C, H, W], output class scores) run on photographs: the model bound
// to a batch of images, its preprocessing from the model's metadata_props unless given, and class probabilities.
#pragma once

#include "data/Image.h"
#include "importer/Onnx.h"
#include "gl/Context.h"
#include "model/Classifier.h"

#include <optional>
#include <string>
#include <vector>

namespace glnet {

// True when an imported model takes images other than MNIST's: an input [N, C, H, W] with 3 channels, or not 28×28.
bool takesPhotographs(const OnnxModel& model);

class ImageClassifier {
 public:
  // `model` bound to `images` images (its batch must be dynamic, or equal).
  ImageClassifier(const ParsedOnnx& model, std::uint32_t images);
  const OnnxModel& model() const { return model_; }
  // The input's channels, height and width; mean and std from metadata_props input_mean/input_std (one value or one
  // per channel, comma-separated) where `mean`/`std` are empty, else 0 and 1; resize: height·256/224 unless given.
  ClassifierPreprocessing preprocessing(const std::vector<float>& mean, const std::vector<float>& std, std::optional<std::uint32_t> resize) const;
  // True when neither the caller nor the model gave a normalisation (the pixels then go in as [0, 1]).
  bool normalisationUnknown(const std::vector<float>& mean) const;
  // Class names from metadata_props "labels" (one per line, one per class: classNamesOf), empty when absent.
  std::vector<std::string> labels() const;
  // Probabilities per image (a softmax of the scores unless the model ends in one); `inputs` holds every image's
  // preprocessed values one after the other.
  std::vector<std::vector<double>> classify(const Context& context, const std::vector<float>& inputs, InferenceTimes* times) const;

 private:
  std::string path_;
  OnnxModel model_;
};

// One float per comma-separated field ("0.485,0.456,0.406"); throws UsageError naming `flag`.
std::vector<float> parseFloatList(const std::string& text, const std::string& flag);

}  // namespace glnet
