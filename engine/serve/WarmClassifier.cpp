#include "serve/WarmClassifier.h"

#include "base/check.h"

#include <cstring>

namespace glnet {

namespace {
// Where the device has buffer storage, the pixels and the answers stay in host-visible buffers that the
// shaders read and write in place: a call then makes no GPU copy either way.
Buffer answerBuffer(std::size_t bytes, const char* what) {
  return Buffer::hostVisibleAvailable() ? Buffer::hostVisible(bytes, HostAccess::read, what) : Buffer(bytes);
}
}  // namespace

WarmClassifier::WarmClassifier(const Context& context, const Network& network, std::size_t capacity, InferencePath path)
    : capacity_(capacity),
      inputs_(network.inputs()),
      classes_(network.classes()),
      images_(capacity, network.inputs(), Buffer::hostVisibleAvailable() ? UploadPath::hostVisible : UploadPath::plain),
      labels_(answerBuffer(capacity * sizeof(std::uint32_t), "label buffer")),
      probabilities_(answerBuffer(capacity * network.classes() * sizeof(float), "probability buffer")) {
  if (capacity == 0) throw Error("a warm classifier needs a capacity of at least one image");
  if (network.readsTokenIds()) throw Error("the network '" + network.architecture + "' reads token ids, not images: glnet_serve classifies images");
  for (std::size_t size = 1;; size = std::min(size * 2, capacity)) {
    std::unique_ptr<Classifier> classifier;
    try {
      classifier = std::make_unique<Classifier>(context, network, size, path);
    } catch (const DeviceLimitError&) {
      if (size == 1) throw;
      capacity_ = plans_.rbegin()->first;
      break;
    }
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
  images_.upload(pixels, count);
  sized.plan.run();

  std::vector<std::uint32_t> labels(count);
  std::vector<float> probabilities(count * classes_);
  if (labels_.mapped()) {
    waitForHostVisibleWrites();
    std::memcpy(labels.data(), labels_.mapped(), labels.size() * sizeof(std::uint32_t));
    std::memcpy(probabilities.data(), probabilities_.mapped(), probabilities.size() * sizeof(float));
  } else {
    sized.plan.read(labels_, labels.data(), labels.size() * sizeof(std::uint32_t));
    sized.plan.read(probabilities_, probabilities.data(), probabilities.size() * sizeof(float));
  }
  return toPredictions(labels, probabilities, classes_);
}

}  // namespace glnet
