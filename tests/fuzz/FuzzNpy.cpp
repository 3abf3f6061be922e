// NumPy .npy files as glnet_run reads its inputs: magic, version, the header dict, dtype, shape and data size.
#include "FuzzInput.h"
#include "formats/Npy.h"
#include "base/check.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    glnet::readNpy(glnet::fuzz::inputFile(data, size, ".npy"));
  } catch (const glnet::Error&) {
  }
  return 0;
}
