#include "model/Classifier.h"

#include "gl/Sync.h"
#include "gl/check.h"

#include <chrono>

namespace glnet {
namespace {

using Clock = std::chrono::steady_clock;
double millisecondsBetween(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double, std::milli>(end - start).count();
}

std::uint32_t narrow(std::size_t value) {
  GLNET_ASSERT(value <= UINT32_MAX, "size beyond 32 bits");
  return static_cast<std::uint32_t>(value);
}

}  // namespace

MlpClassifier::MlpClassifier(const Context& context, const MlpModel& model, std::size_t maxBatch)
    : context_(context),
      model_(model),
      maxBatch_(maxBatch),
      normalize_(programs_),
      hidden_(model.layers.size() > 1 ? std::make_unique<DenseOp>(programs_, model.activation) : nullptr),
      output_(programs_, Activation::none),
      softmax_(programs_) {
  activations_.emplace_back(maxBatch * static_cast<std::size_t>(model.inputs()) * sizeof(float));
  for (const DenseWeights& layer : model.layers) {
    weights_.push_back(Buffer::of(layer.weight));
    biases_.push_back(Buffer::of(layer.bias));
    activations_.emplace_back(maxBatch * static_cast<std::size_t>(layer.outputs) * sizeof(float));
  }
}

Plan MlpClassifier::plan(const GpuImages& images, std::size_t batch, const Buffer& classes,
                         const Buffer* probabilities) const {
  GLNET_ASSERT(batch >= 1 && batch <= maxBatch_, "batch larger than the classifier was built for");
  if (images.pixelsPerImage != static_cast<std::size_t>(model_.inputs())) {
    throw Error("the model takes " + std::to_string(model_.inputs()) + " inputs but the images have " +
                std::to_string(images.pixelsPerImage) + " pixels");
  }
  Plan plan(context_.limits());
  const int first = plan.addParameter(0);
  GLNET_ASSERT(first == firstImage, "the first plan parameter is the first image");
  const auto rows = narrow(batch);
  plan.record(normalize_(images.pixels, activations_[0], narrow(batch * images.pixelsPerImage),
                         Uniform::fromParameter(NormalizeOp::firstPixelLocation, first, model_.inputs()),
                         model_.input.mean, model_.input.std));
  for (std::size_t l = 0; l < model_.layers.size(); ++l) {
    const DenseWeights& layer = model_.layers[l];
    const DenseOp& op = l + 1 < model_.layers.size() ? *hidden_ : output_;
    plan.record(op.forward(activations_[l], weights_[l], biases_[l], activations_[l + 1],
                           {rows, narrow(static_cast<std::size_t>(layer.inputs)), narrow(static_cast<std::size_t>(layer.outputs))}));
  }
  const Buffer& logits = activations_.back();
  const auto outputs = narrow(static_cast<std::size_t>(model_.outputs()));
  plan.record(softmax_.argmax(logits, classes, rows, outputs, Uniform::fromParameter(SoftmaxOp::firstRowLocation, first)));
  if (probabilities) plan.record(softmax_.softmax(logits, *probabilities, rows, outputs));
  return plan;
}

Evaluation evaluate(const Context& context, const MlpModel& model, const LabelledImages& data, std::size_t batch) {
  const auto start = Clock::now();
  const GpuImages images = uploadImages(data.images);
  Fence(/*after the upload*/).wait();
  const double uploadMs = millisecondsBetween(start, Clock::now());
  Evaluation result = evaluate(context, model, images, data.labels, batch);
  result.times.uploadMs = uploadMs;
  return result;
}

Evaluation evaluate(const Context& context, const MlpModel& model, const GpuImages& images,
                    const std::vector<std::uint8_t>& labels, std::size_t batch) {
  const std::size_t count = images.count;
  GLNET_ASSERT(labels.size() >= count, "a label per image");
  batch = std::min(batch, count);
  Evaluation result;
  auto start = Clock::now();
  const MlpClassifier classifier(context, model, batch);
  result.times.compileMs = millisecondsBetween(start, Clock::now());

  Buffer classes(count * sizeof(std::uint32_t));
  Plan full = classifier.plan(images, batch, classes, nullptr);
  Plan tail = classifier.plan(images, count % batch ? count % batch : batch, classes, nullptr);

  TimerQuery gpuStart, gpuEnd;
  start = Clock::now();
  gpuStart.record();
  for (std::size_t first = 0; first < count; first += batch) {
    Plan& plan = first + batch <= count ? full : tail;
    plan.setParameter(MlpClassifier::firstImage, static_cast<std::uint32_t>(first));
    plan.run();
  }
  gpuEnd.record();
  const auto issued = Clock::now();
  result.predictions.resize(count);
  full.read(classes, result.predictions.data(), count * sizeof(std::uint32_t));
  const auto done = Clock::now();
  result.times.issueMs = millisecondsBetween(start, issued);
  result.times.readbackMs = millisecondsBetween(issued, done);
  result.times.gpuMs = static_cast<double>(gpuEnd.nanoseconds() - gpuStart.nanoseconds()) / 1e6;
  result.imagesPerSecond = static_cast<double>(count) / (millisecondsBetween(start, done) / 1e3);

  const auto classCount = static_cast<std::size_t>(model.outputs());
  result.confusion.assign(classCount, std::vector<std::size_t>(classCount, 0));
  for (std::size_t i = 0; i < count; ++i) {
    if (labels[i] >= classCount) {
      throw Error("label " + std::to_string(labels[i]) + " of image " + std::to_string(i) + " is not below the model's " +
                  std::to_string(classCount) + " outputs");
    }
    GLNET_ASSERT(result.predictions[i] < classCount, "argmax wrote a class out of range");
    ++result.confusion[labels[i]][result.predictions[i]];
    result.correct += result.predictions[i] == labels[i];
  }
  result.accuracy = count ? static_cast<double>(result.correct) / static_cast<double>(count) : 0.0;
  return result;
}

std::vector<Prediction> predict(const Context& context, const MlpModel& model, const std::vector<std::uint8_t>& pixels,
                                std::size_t count, InferenceTimes* times) {
  InferenceTimes local;
  InferenceTimes& t = times ? *times : local;
  auto start = Clock::now();
  const MlpClassifier classifier(context, model, count);
  Buffer classes(count * sizeof(std::uint32_t));
  const auto outputs = static_cast<std::size_t>(model.outputs());
  Buffer probabilities(count * outputs * sizeof(float));
  GpuImages images(count, static_cast<std::size_t>(model.inputs()));
  const Plan plan = classifier.plan(images, count, classes, &probabilities);
  t.compileMs = millisecondsBetween(start, Clock::now());

  TimerQuery gpuStart, gpuEnd;
  start = Clock::now();
  images.upload(pixels);
  const auto uploaded = Clock::now();
  gpuStart.record();
  plan.run();
  gpuEnd.record();
  const auto issued = Clock::now();
  std::vector<float> allProbabilities(count * outputs);
  std::vector<std::uint32_t> labels(count);
  plan.read(probabilities, allProbabilities.data(), allProbabilities.size() * sizeof(float));
  plan.read(classes, labels.data(), labels.size() * sizeof(std::uint32_t));
  const auto done = Clock::now();
  t.uploadMs = millisecondsBetween(start, uploaded);
  t.issueMs = millisecondsBetween(uploaded, issued);
  t.readbackMs = millisecondsBetween(issued, done);
  t.gpuMs = static_cast<double>(gpuEnd.nanoseconds() - gpuStart.nanoseconds()) / 1e6;

  std::vector<Prediction> result(count);
  for (std::size_t i = 0; i < count; ++i) {
    result[i].label = labels[i];
    result[i].probabilities.assign(allProbabilities.begin() + static_cast<std::ptrdiff_t>(i * outputs),
                                   allProbabilities.begin() + static_cast<std::ptrdiff_t>((i + 1) * outputs));
  }
  return result;
}

}  // namespace glnet
