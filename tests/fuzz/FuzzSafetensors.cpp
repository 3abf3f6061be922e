// Model files: the safetensors header (length, JSON, dtypes, shapes, offsets), the tensors, and the
// __metadata__ glnet reads (architecture, activation, input mean and std), as glnet_eval loads a model.
#include "FuzzInput.h"
#include "base/check.h"
#include "model/Network.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    glnet::Network::load(glnet::fuzz::inputFile(data, size, ".safetensors"));
  } catch (const glnet::Error&) {
  }
  return 0;
}
