// ONNX models as glnet_run loads them: the protobuf, the opset, initializers (raw and typed data), the input's
// shape and every node's op and attributes, built into a graph for a batch of 2, and its memory plan.
#include "FuzzInput.h"
#include "formats/Onnx.h"
#include "gl/check.h"
#include "graph/MemoryPlan.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const glnet::OnnxModel model = glnet::readOnnx(glnet::fuzz::inputFile(data, size, ".onnx"), 2);
    glnet::planMemory(model.graph, {}, 256);
  } catch (const glnet::Error&) {
  }
  return 0;
}
