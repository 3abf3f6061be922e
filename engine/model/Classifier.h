// Runs an MLP classifier on the GPU: weights resident, one recorded Plan per batch size, replayed per batch.
#pragma once

#include "data/GpuImages.h"
#include "gl/Context.h"
#include "model/Mlp.h"
#include "ops/Dense.h"
#include "ops/Normalize.h"
#include "ops/Softmax.h"

#include <memory>

namespace glnet {

class MlpClassifier {
 public:
  // Compiles every program the plans need and uploads the weights; activations fit `maxBatch` images.
  MlpClassifier(const Context& context, const MlpModel& model, std::size_t maxBatch);

  // The plan of one batch: images [first, first + batch) of `images` → classes[first ...] and, when
  // given, softmax probabilities [batch × outputs]. `first` is plan parameter `firstImage`.
  Plan plan(const GpuImages& images, std::size_t batch, const Buffer& classes, const Buffer* probabilities) const;
  static constexpr int firstImage = 0;

  const MlpModel& model() const { return model_; }

 private:
  const Context& context_;
  MlpModel model_;
  std::size_t maxBatch_;
  ProgramCache programs_;
  NormalizeOp normalize_;
  std::unique_ptr<DenseOp> hidden_;
  DenseOp output_;
  SoftmaxOp softmax_;
  std::vector<Buffer> weights_, biases_, activations_;
};

struct InferenceTimes {
  double compileMs = 0;   // building programs (apart from run time)
  double uploadMs = 0;    // host → device copy of the pixels, until the device has them
  double issueMs = 0;     // CPU time to issue the plans
  double gpuMs = 0;       // GPU time from the first dispatch to the last, by timestamp queries
  double readbackMs = 0;  // waiting for the results and copying them back
};

struct Evaluation {
  std::vector<std::uint32_t> predictions;
  std::size_t correct = 0;
  double accuracy = 0;
  std::vector<std::vector<std::size_t>> confusion;  // [true label][predicted]
  double imagesPerSecond = 0;                        // images / (issue + GPU-bound wait + readback)
  InferenceTimes times;
};

// Uploads the test images once as uint8, replays one plan per batch, reads the predictions once at the end.
Evaluation evaluate(const Context& context, const MlpModel& model, const LabelledImages& data, std::size_t batch);
// The same on images already resident on the GPU.
Evaluation evaluate(const Context& context, const MlpModel& model, const GpuImages& images,
                    const std::vector<std::uint8_t>& labels, std::size_t batch);

struct Prediction {
  std::uint32_t label = 0;
  std::vector<float> probabilities;
};

// Classifies `count` images in one batch; `pixels` holds count × model.inputs() bytes.
std::vector<Prediction> predict(const Context& context, const MlpModel& model, const std::vector<std::uint8_t>& pixels,
                                std::size_t count, InferenceTimes* times = nullptr);

}  // namespace glnet
