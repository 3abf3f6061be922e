#include "serve/WarmClassifier.h"

#include "gl/check.h"

namespace glnet {

WarmClassifier::WarmClassifier(const Context& context, const Network& network, std::size_t capacity, InferencePath path)
    : capacity_(capacity),
      inputs_(network.inputs()),
      classes_(network.classes()),
      images_(capacity, network.inputs()),
      labels_(capacity * sizeof(std::uint32_t)),
      probabilities_(capacity * network.classes() * sizeof(float)) {
  if (capacity == 0) throw Error("a warm classifier needs a capacity of at least one image");
  if (context.hasExtension("GL_ARB_buffer_storage")) {
    readback_ = std::make_unique<PersistentReadback>(labels_.bytes() + probabilities_.bytes());  // both multiples of 4
  }
  for (std::size_t size = 1;; size = std::min(size * 2, capacity)) {
    auto classifier = std::make_unique<Classifier>(context, network, size, path);
    Plan plan = classifier->plan(images_, labels_, &probabilities_);
    plans_.emplace(size, SizedPlan{std::move(classifier), std::move(plan)});
    if (size == capacity) break;
  }
}

std::vector<std::size_t> WarmClassifier::planSizes() const {
  std::vector<std::size_t> sizes;
  for (const auto& entry : plans_) sizes.push_back(entry.first);
  return sizes;
}

std::vector<Prediction> WarmClassifier::classify(const std::uint8_t* pixels, std::size_t count) {
  GLNET_ASSERT(count >= 1 && count <= capacity_, "a warm classifier call holds 1 to capacity images");
  const SizedPlan& sized = plans_.lower_bound(count)->second;
  const std::size_t bytes = count * inputs_;
  // The buffer's size is a multiple of 4 and glBufferSubData wants nothing else: round up with what follows.
  const std::size_t whole = std::min((bytes + 3) / 4 * 4, images_.pixels.bytes());
  if (whole == bytes) {
    images_.pixels.upload(pixels, bytes);
  } else {
    std::vector<std::uint8_t> padded(pixels, pixels + bytes);
    padded.resize(whole, 0);
    images_.pixels.upload(padded.data(), whole);
  }
  sized.plan.run();

  std::vector<std::uint32_t> labels(count);
  std::vector<float> probabilities(count * classes_);
  if (readback_) {
    readback_->read({{&labels_, labels.data(), labels.size() * sizeof(std::uint32_t)},
                     {&probabilities_, probabilities.data(), probabilities.size() * sizeof(float)}});
  } else {
    sized.plan.read(labels_, labels.data(), labels.size() * sizeof(std::uint32_t));
    sized.plan.read(probabilities_, probabilities.data(), probabilities.size() * sizeof(float));
  }
  std::vector<Prediction> result(count);
  for (std::size_t i = 0; i < count; ++i) {
    result[i].label = labels[i];
    result[i].probabilities.assign(probabilities.begin() + static_cast<std::ptrdiff_t>(i * classes_),
                                   probabilities.begin() + static_cast<std::ptrdiff_t>((i + 1) * classes_));
  }
  return result;
}

}  // namespace glnet
