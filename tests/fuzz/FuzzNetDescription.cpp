// Network descriptions as glnet_train --net reads them: parsed, and built into a network with its initial weights
// when every layer is small enough for the harness's memory (the size refusals are tested in NetDescriptionTest).
#include "base/check.h"
#include "model/Network.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const glnet::NetDescription description = glnet::parseNetDescription(text, "fuzz");
    std::uint64_t inputs = 1;
    for (const std::uint32_t extent : description.input) inputs *= extent;
    bool small = inputs <= 4096;
    for (const glnet::LayerDescription& layer : description.layers) small = small && layer.outputs <= 256 && layer.kernel <= 7;
    if (small) glnet::Network::fromDescription(description, 1, "fuzz");
  } catch (const glnet::Error&) {
  }
  return 0;
}
