// Runs a classifier network on the GPU: weights resident, the forward pass compiled once for a batch size
// and recorded into a Plan replayed per batch, the images normalized from uint8 in a shader.
#pragma once

#include "data/GpuImages.h"
#include "gl/Context.h"
#include "graph/CompiledGraph.h"
#include "model/Network.h"
#include "model/WholeMlp.h"

#include <memory>
#include <optional>

namespace glnet {

// How a plan runs the network: `automatic` takes one dispatch for the whole network where it fits
// (WholeMlpOp::fits: an MLP and a small batch), else one dispatch per layer; `layered` always the latter.
enum class InferencePath { automatic, layered };

class Classifier {
 public:
  // Compiles every program the plan needs and uploads the parameters; the plan classifies `batch` images.
  Classifier(const Context& context, const Network& network, std::size_t batch, InferencePath path = InferencePath::automatic);

  // The plan of one batch: images [first, first + batch) of `images` → classes[first ...] and, when
  // given, softmax probabilities [batch × classes]. `first` is plan parameter `firstImage`.
  Plan plan(const GpuImages& images, const Buffer& classes, const Buffer* probabilities);
  static constexpr int firstImage = CompiledGraph::learningRateParameter + 1;
  std::size_t batch() const { return batch_; }
  bool wholeNetworkInOneDispatch() const { return whole_ != nullptr; }

 private:
  std::size_t batch_;
  std::size_t inputs_;
  std::uint32_t classes_;
  InputFormat input_;
  Limits limits_;
  ProgramCache programs_;
  std::unique_ptr<WholeMlpOp> whole_;     // the one-dispatch path, or
  std::optional<NetworkGraph> graph_;     // the graph of the layered path
  std::optional<CompiledGraph> compiled_;
};

struct InferenceTimes {
  double compileMs = 0;   // building programs (apart from run time)
  double uploadMs = 0;    // host → device copy of the pixels, until the device has them
  double issueMs = 0;     // CPU time to issue the plans
  double gpuMs = 0;       // GPU time from the first dispatch to the last, by timestamp queries
  double readbackMs = 0;  // waiting for the results and copying them back
  double firstIssueMs = 0;  // issue time of the first replay of fresh plans (the driver commits their buffers then)
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
// With repeats > 1 the same plans run again and the fastest run's times are kept (firstIssueMs keeps the
// first run's issue time).
Evaluation evaluate(const Context& context, const Network& network, const LabelledImages& data, std::size_t batch,
                    int repeats = 1);
// The same on images already resident on the GPU.
Evaluation evaluate(const Context& context, const Network& network, const GpuImages& images,
                    const std::vector<std::uint8_t>& labels, std::size_t batch, int repeats = 1);

struct Prediction {
  std::uint32_t label = 0;
  std::vector<float> probabilities;
};

// One prediction per label, with its row of `probabilities` ([labels × classes]).
std::vector<Prediction> toPredictions(const std::vector<std::uint32_t>& labels, const std::vector<float>& probabilities,
                                      std::size_t classes);

// Classifies `count` images in one batch; `pixels` holds count × network.inputs() bytes, or for a network reading token
// ids (Network::readsTokenIds) their uint32 words (ImageSet::tokenIds).
std::vector<Prediction> predict(const Context& context, const Network& network, const std::vector<std::uint8_t>& pixels,
                                std::size_t count, InferenceTimes* times = nullptr);

}  // namespace glnet
