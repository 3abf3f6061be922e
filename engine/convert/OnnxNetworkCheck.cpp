// checkOnnxNetwork (OnnxNetwork.h): the network read from an ONNX file against the file itself, both evaluated in
// float64 on the CPU (graph/ReferenceGraph) on the same random inputs.
#include "convert/OnnxNetwork.h"

#include "base/check.h"
#include "base/log.h"
#include "graph/ReferenceGraph.h"
#include "formats/OnnxProto.h"
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
      // Row r pads its last max(1, (r + 1)·S/(2·rows + 1)) positions, never the first.
      const std::size_t padding = std::max<std::size_t>(1, (row + 1) * positions / (2 * rows + 1));
      const bool padded = pad && p > 0 && p + padding >= positions;
      values[row * positions + p] = padded ? *pad : value;
    }
  }
  return values;
}

// The model as it infers: a training-mode export's Dropout keeps everything and its BatchNormalization uses the running
// statistics, as the network read from it does in a graph without a loss.
onnx::ModelProto inferenceForm(onnx::ModelProto model) {
  for (onnx::NodeProto& node : *model.mutable_graph()->mutable_node()) {
    if (node.op_type() == "Dropout" && node.input_size() > 2) node.mutable_input()->DeleteSubrange(2, node.input_size() - 2);
    if (node.op_type() != "BatchNormalization") continue;
    for (onnx::AttributeProto& attribute : *node.mutable_attribute()) {
      if (attribute.name() == "training_mode") attribute.set_i(0);
    }
    if (node.output_size() > 1) node.mutable_output()->DeleteSubrange(1, node.output_size() - 1);
  }
  return model;
}

// Each row's log-softmax over its last axis: the same for logits and for log-probabilities (a model ending in
// LogSoftmax, which the network read leaves to the loss), and for logits that differ by a constant per row.
std::vector<double> logSoftmaxRows(std::vector<double> values, std::size_t rows) {
  const std::size_t width = values.size() / rows;
  for (std::size_t row = 0; row < rows; ++row) {
    double* v = values.data() + row * width;
    const double largest = *std::max_element(v, v + width);
    double sum = 0;
    for (std::size_t i = 0; i < width; ++i) sum += std::exp(v[i] - largest);
    for (std::size_t i = 0; i < width; ++i) v[i] -= largest + std::log(sum);
  }
  return values;
}

}  // namespace

void checkOnnxNetwork(const Network& network, const std::string& path) {
  GLNET_ASSERT(network.description.has_value(), "a network read from ONNX has a description");
  constexpr std::size_t rows = 2;
  Shape shape{rows};
  shape.insert(shape.end(), network.description->input.begin(), network.description->input.end());
  const std::vector<double> inputs = randomInputs(network, shape);
  OnnxModel model;
  try {
    model = readOnnx(ParsedOnnx(path, inferenceForm(readOnnxModelProto(path))), InputShapes{shape});
  } catch (const Error& error) {
    throw Error("glnet checks the transformer layers it reads against the model run as ONNX, and cannot run it: " + std::string(error.what()));
  }
  const std::vector<double> modelLogits = referenceValues(model.graph, {{model.input.id, inputs}})[static_cast<std::size_t>(model.logits.id)];
  const NetworkGraph read = buildGraph(network, rows, false);
  const std::vector<double> readLogits = referenceValues(read.graph, {{read.images.id, inputs}})[static_cast<std::size_t>(read.logits.id)];
  if (readLogits.size() != modelLogits.size() || modelLogits.size() % rows != 0) {
    throw Error(path + ": the network glnet read from it gives " + std::to_string(readLogits.size()) + " outputs for two inputs, the model " +
                std::to_string(modelLogits.size()) + "; glnet misread it (please report the model)");
  }
  if (!std::all_of(modelLogits.begin(), modelLogits.end(), [](double value) { return std::isfinite(value); })) {
    throw Error(path + ": the model gives outputs that are not finite on random inputs, against which glnet cannot check the transformer layers it read");
  }
  const std::vector<double> expected = logSoftmaxRows(modelLogits, rows), got = logSoftmaxRows(readLogits, rows);
  double worst = 0, largest = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    worst = std::isnan(got[i]) ? INFINITY : std::max(worst, std::abs(expected[i] - got[i]));
    largest = std::max(largest, std::abs(expected[i]));
    if (std::isinf(worst)) break;
  }
  // Both sides hold the same float32 weights and compute in float64; what differs is the order of sums and the
  // constants the file holds as float32 (1/√D among them, which deep attention stacks amplify to a few 1e-6). Every
  // misread seen differed by more than 1e-2.
  char figures[128];
  std::snprintf(figures, sizeof figures, "largest difference %.3g against log-probabilities up to %.3g", worst, largest);
  if (!(worst <= 1e-4 * std::max(largest, 1.0))) {
    throw Error(path + ": the network glnet read from it computes other outputs than the model on random inputs (" + std::string(figures) +
                "): some stretch of its nodes resembles a layer PyTorch exports but computes something else; glnet cannot train it");
  }
  log::info("checked the network read from " + path + " against the model itself on random inputs (float64): " + figures);
}

}  // namespace glnet
