#include "model/Classifier.h"

#include "base/Stopwatch.h"
#include "gl/Sync.h"
#include "base/check.h"
#include "ops/Normalize.h"
#include "ops/Softmax.h"

#include <optional>


namespace glnet {
namespace {

std::uint32_t narrow(std::size_t value) {
  GLNET_ASSERT(value <= UINT32_MAX, "size beyond 32 bits");
  return static_cast<std::uint32_t>(value);
}

}  // namespace

Classifier::Classifier(const Context& context, const Network& network, std::size_t batch, InferencePath path)
    : batch_(batch), inputs_(network.inputs()), classes_(network.classes()), input_(network.input), limits_(context.limits()) {
  if (path == InferencePath::automatic && WholeMlpOp::fits(network, batch, context)) {
    // Both variants: plans with and without probabilities share the uploaded weights.
    whole_ = std::make_unique<WholeMlpOp>(programs_, network, context.limits(), batch, WholeMlpOp::concurrentGroups(context));
    return;
  }
  graph_.emplace(buildGraph(network, narrow(batch), false));
  compiled_.emplace(context, graph_->graph);
}

Plan Classifier::plan(const GpuImages& images, const Buffer& classes, const Buffer* probabilities) {
  if (images.pixelsPerImage != inputs_) {
    throw Error("the model takes " + std::to_string(inputs_) + " inputs but the images have " +
                std::to_string(images.pixelsPerImage) + " pixels");
  }
  const auto rows = narrow(batch_);
  if (whole_) {
    Plan plan(limits_);
    // The step and the learning rate of training plans: unused, they keep firstImage the same parameter.
    plan.addParameter(0);
    plan.addParameter(0);
    const int first = plan.addParameter(0);
    GLNET_ASSERT(first == firstImage, "the first image is the plan parameter after the learning rate");
    const BufferView probabilityView = probabilities ? BufferView(*probabilities) : BufferView(classes);
    plan.record((*whole_)(images.pixels, classes, probabilities ? &probabilityView : nullptr, rows,
                          Uniform::fromParameter(WholeMlpOp::firstImageLocation, firstImage)));
    plan.finishPrograms();
    return plan;
  }
  Plan plan = compiled_->forwardPlan([&](Plan& p) {
    const int first = p.addParameter(0);
    GLNET_ASSERT(first == firstImage, "the first image is the plan parameter after the learning rate");
    const NormalizeOp normalize(programs_);
    const Uniform firstValue = Uniform::fromParameter(NormalizeOp::firstPixelLocation, first, static_cast<std::int64_t>(inputs_));
    if (images.tokenIds()) {
      p.record(normalize.tokens(images.pixels, compiled_->view(graph_->images), narrow(batch_ * inputs_), firstValue));
    } else {
      p.record(normalize(images.pixels, compiled_->view(graph_->images), narrow(batch_ * inputs_), firstValue, input_,
                         static_cast<std::uint32_t>(inputs_), inputs_ % 4 == 0));
    }
  });
  const SoftmaxOp softmax(programs_);
  const BufferView logits = compiled_->view(graph_->logits);
  plan.record(softmax.argmax(logits, classes, rows, classes_, Uniform::fromParameter(SoftmaxOp::firstRowLocation, firstImage)));
  if (probabilities) plan.record(softmax.softmax(logits, *probabilities, rows, classes_));
  plan.finishPrograms();
  return plan;
}

Evaluation evaluate(const Context& context, const Network& network, const LabelledImages& data, std::size_t batch,
                    int repeats) {
  const Stopwatch stopwatch;
  const GpuImages images = uploadImages(data.images);
  Fence(/*after the upload*/).wait();
  const double uploadMs = stopwatch.milliseconds();
  Evaluation result = evaluate(context, network, images, data.labels, batch, repeats);
  result.times.uploadMs = uploadMs;
  return result;
}

Evaluation evaluate(const Context& context, const Network& network, const GpuImages& images,
                    const std::vector<std::uint8_t>& labels, std::size_t batch, int repeats) {
  const std::size_t count = images.count;
  GLNET_ASSERT(labels.size() >= count, "a label per image");
  batch = std::min(batch, count);
  Evaluation result;
  Stopwatch stopwatch;
  // A second, smaller compilation serves the last batch when the batch size does not divide the count.
  Classifier fullClassifier(context, network, batch);
  std::optional<Classifier> tailClassifier;
  if (count % batch) tailClassifier.emplace(context, network, count % batch);
  result.times.compileMs = stopwatch.restart();

  Buffer classes(count * sizeof(std::uint32_t));
  Plan full = fullClassifier.plan(images, classes, nullptr);
  Plan tail = tailClassifier ? tailClassifier->plan(images, classes, nullptr) : Plan(context.limits());

  result.predictions.resize(count);
  for (int run = 0; run < std::max(repeats, 1); ++run) {
    TimerQuery gpuStart, gpuEnd;
    stopwatch.restart();
    gpuStart.record();
    for (std::size_t first = 0; first < count; first += batch) {
      Plan& plan = first + batch <= count ? full : tail;
      plan.setParameter(Classifier::firstImage, static_cast<std::uint32_t>(first));
      plan.run();
    }
    gpuEnd.record();
    const double issueMs = stopwatch.milliseconds();
    full.read(classes, result.predictions.data(), count * sizeof(std::uint32_t));
    const double totalMs = stopwatch.milliseconds();
    const double imagesPerSecond = static_cast<double>(count) / (totalMs / 1e3);
    if (run == 0) result.times.firstIssueMs = issueMs;
    if (run == 0 || imagesPerSecond > result.imagesPerSecond) {
      result.imagesPerSecond = imagesPerSecond;
      result.times.issueMs = issueMs;
      result.times.readbackMs = totalMs - issueMs;
      result.times.gpuMs = gpuMilliseconds(gpuStart, gpuEnd);
    }
  }

  const auto classCount = static_cast<std::size_t>(network.classes());
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

std::vector<Prediction> predict(const Context& context, const Network& network, const std::vector<std::uint8_t>& pixels,
                                std::size_t count, InferenceTimes* times) {
  if (count == 0) throw Error("there are no images to classify");
  // A network reading token ids takes them as 4-byte words (ImageSet::tokenIds).
  const std::size_t valueBytes = network.readsTokenIds() ? 4 : 1;
  if (pixels.size() != count * network.inputs() * valueBytes) {
    throw Error(std::to_string(pixels.size()) + " bytes do not make " + std::to_string(count) + " inputs of " + std::to_string(network.inputs()) +
                " values of " + std::to_string(valueBytes) + " byte" + (valueBytes == 1 ? "" : "s"));
  }
  InferenceTimes local;
  InferenceTimes& t = times ? *times : local;
  Stopwatch stopwatch;
  Classifier classifier(context, network, count);
  Buffer classes(count * sizeof(std::uint32_t));
  const auto outputs = static_cast<std::size_t>(network.classes());
  Buffer probabilities(count * outputs * sizeof(float));
  GpuImages images(count, network.inputs(), UploadPath::automatic, valueBytes);
  const Plan plan = classifier.plan(images, classes, &probabilities);
  t.compileMs = stopwatch.restart();

  TimerQuery gpuStart, gpuEnd;
  images.upload(pixels);
  t.uploadMs = stopwatch.restart();
  gpuStart.record();
  plan.run();
  gpuEnd.record();
  t.issueMs = stopwatch.restart();
  std::vector<float> allProbabilities(count * outputs);
  std::vector<std::uint32_t> labels(count);
  plan.read(probabilities, allProbabilities.data(), allProbabilities.size() * sizeof(float));
  plan.read(classes, labels.data(), labels.size() * sizeof(std::uint32_t));
  t.readbackMs = stopwatch.milliseconds();
  t.gpuMs = gpuMilliseconds(gpuStart, gpuEnd);

  return toPredictions(labels, allProbabilities, outputs);
}

std::vector<Prediction> toPredictions(const std::vector<std::uint32_t>& labels, const std::vector<float>& probabilities,
                                      std::size_t classes) {
  GLNET_ASSERT(probabilities.size() == labels.size() * classes, "a row of probabilities per label");
  std::vector<Prediction> result(labels.size());
  for (std::size_t i = 0; i < labels.size(); ++i) {
    result[i].label = labels[i];
    result[i].probabilities.assign(probabilities.begin() + static_cast<std::ptrdiff_t>(i * classes),
                                   probabilities.begin() + static_cast<std::ptrdiff_t>((i + 1) * classes));
  }
  return result;
}

}  // namespace glnet
