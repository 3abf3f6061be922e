// A classifier kept ready for many small calls: plans for batch sizes 1, 2, 4, ... up to a capacity, all
// recorded against one input buffer and one pair of output buffers allocated once, so a call is an upload,
// a replay and one read. With buffer storage the three buffers are host-visible: no GPU copy in a call.
#pragma once

#include "data/GpuImages.h"
#include "gl/Buffer.h"
#include "model/Classifier.h"

#include <map>
#include <memory>

namespace glnet {

class WarmClassifier {
 public:
  // Compiles the plan of every batch size up front, so no call pays a compilation. Batch sizes past what the device
  // takes (DeviceLimitError) are left out: capacity() is then the largest that fits, below `capacity`.
  WarmClassifier(const Context& context, const Network& network, std::size_t capacity,
                 InferencePath path = InferencePath::automatic);

  // Classifies `count` (1 to capacity) images of network.inputs() bytes each, stored one after another.
  std::vector<Prediction> classify(const std::uint8_t* pixels, std::size_t count);

  std::size_t capacity() const { return capacity_; }
  std::size_t inputs() const { return inputs_; }
  // The batch sizes that have a plan; a call runs the smallest that holds its images.
  std::vector<std::size_t> planSizes() const;

 private:
  struct SizedPlan {
    std::unique_ptr<Classifier> classifier;
    Plan plan;
  };
  std::size_t capacity_, inputs_, classes_;
  GpuImages images_;
  Buffer labels_, probabilities_;
  std::map<std::size_t, SizedPlan> plans_;
};

}  // namespace glnet
