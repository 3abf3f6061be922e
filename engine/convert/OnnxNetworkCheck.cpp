// checkOnnxNetwork (OnnxNetwork.h): the network read from an ONNX file against the file itself, both evaluated in
// float64 on the CPU (graph/ReferenceGraph) on the same random inputs.
#include "convert/OnnxNetwork.h"

#include "base/check.h"
#include "base/log.h"
#include "graph/ReferenceGraph.h"
#include "importer/Onnx.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace glnet {
namespace {

// Two rows: images uniform in [−1, 1]; or token ids below the vocabulary, the mask layer's padding (when there is one)
// at the end of each row, more of it in the second, the first position never padding.
std::vector<double> randomInputs(const Network& network, const Shape& shape) {
  std::mt19937 random(20261128);
  std::vector<double> values(elementCount(shape));
  if (!network.readsTokenIds()) {
    std::uniform_real_distribution<double> uniform(-1.0, 1.0);
    for (double& value : values) value = uniform(random);
    return values;
  }
  const NetDescription& description = *network.description;
  const std::uint32_t vocabulary = *tokenVocabulary(description);
  std::optional<std::uint32_t> pad;
  for (const LayerDescription& layer : description.layers) {
    if (layerKindOf(layer) == LayerKind::mask) pad = layer.pad;
  }
  std::uniform_int_distribution<std::uint32_t> id(0, vocabulary - 1);
  const std::size_t rows = shape[0], positions = values.size() / rows;
  for (std::size_t row = 0; row < rows; ++row) {
    for (std::size_t p = 0; p < positions; ++p) {
      std::uint32_t value = id(random);
      while (pad && value == *pad && vocabulary > 1) value = id(random);
      const bool padded = pad && p > 0 && p >= positions - (row + 1) * positions / (2 * rows + 1);
      values[row * positions + p] = padded ? *pad : value;
    }
  }
  return values;
}

}  // namespace

void checkOnnxNetwork(const Network& network, const std::string& path) {
  GLNET_ASSERT(network.description.has_value(), "a network read from ONNX has a description");
  Shape shape{2};
  shape.insert(shape.end(), network.description->input.begin(), network.description->input.end());
  const std::vector<double> inputs = randomInputs(network, shape);
  OnnxModel model;
  try {
    model = readOnnx(ParsedOnnx(path), InputShapes{shape});
  } catch (const Error& error) {
    throw Error("glnet checks the transformer layers it reads against the model run as ONNX, and cannot run it: " + std::string(error.what()));
  }
  const std::vector<double> expected = referenceValues(model.graph, {{model.input.id, inputs}})[static_cast<std::size_t>(model.logits.id)];
  const NetworkGraph read = buildGraph(network, 2, false);
  const std::vector<double> got = referenceValues(read.graph, {{read.images.id, inputs}})[static_cast<std::size_t>(read.logits.id)];
  if (got.size() != expected.size()) {
    throw Error(path + ": the network glnet read from it gives " + std::to_string(got.size()) + " outputs for two inputs, the model " +
                std::to_string(expected.size()) + "; glnet misread it (please report the model)");
  }
  double worst = 0, largest = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    // NaN on both sides agrees; on one side only it is the largest difference there is.
    const bool nanExpected = std::isnan(expected[i]), nanGot = std::isnan(got[i]);
    worst = std::max(worst, nanExpected || nanGot ? (nanExpected == nanGot ? 0.0 : INFINITY) : std::abs(expected[i] - got[i]));
    if (!nanExpected) largest = std::max(largest, std::abs(expected[i]));
  }
  // Both sides hold the same float32 weights and compute in float64: what differs is the order of sums and constants
  // the file holds as float32 (√D is 2.8284270763 there, not √8).
  if (!(worst <= 1e-6 * std::max(largest, 1.0))) {
    char figures[128];
    std::snprintf(figures, sizeof figures, "largest difference %.3g against outputs up to %.3g", worst, largest);
    throw Error(path + ": the network glnet read from it computes other outputs than the model on random inputs (" + figures +
                "): some stretch of its nodes resembles a layer PyTorch exports but computes something else; glnet cannot train it");
  }
  log::info("checked the network read from " + path + " against the model itself on random inputs (float64): largest difference " +
            std::to_string(worst));
}

}  // namespace glnet
