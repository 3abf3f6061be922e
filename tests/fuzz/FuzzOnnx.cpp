// ONNX models as glnet_run loads them: the protobuf, the opset, initializers (raw and typed data), the input's
// shape and every node's op and attributes, built into a graph for a batch of 2, and its memory plan. Then the same
// bytes as glnet_train --net reads them (a trainable network), built with its weights when its layers are small.
#include "FuzzInput.h"
#include "importer/Onnx.h"
#include "convert/OnnxNetwork.h"
#include "base/check.h"
#include "graph/MemoryPlan.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = glnet::fuzz::inputFile(data, size, ".onnx");
  try {
    const glnet::OnnxModel model = glnet::readOnnx(path, 2);
    glnet::planMemory(model.graph, {}, 256);
  } catch (const glnet::Error&) {
  }
  try {
    const glnet::OnnxNetwork network = glnet::readOnnxNetwork(path);
    std::uint64_t inputs = 1;
    for (const std::uint32_t extent : network.description.input) inputs *= extent;
    bool small = inputs <= 4096;
    for (const glnet::LayerDescription& layer : network.description.layers) small = small && layer.outputs <= 256 && layer.kernel <= 7;
    if (small) {
      glnet::Network built = glnet::Network::fromDescription(network.description, 1, "fuzz");
      built.setParameterValues(built.valuesIn(network.weights, path));
    }
  } catch (const glnet::Error&) {
  }
  return 0;
}
