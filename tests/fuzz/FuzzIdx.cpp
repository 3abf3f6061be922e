// MNIST IDX files, plain or gzip (the reader takes either): the first byte chooses images or labels.
#include "FuzzInput.h"
#include "data/Idx.h"
#include "base/check.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string path = glnet::fuzz::inputFile(data + 1, size - 1, "-ubyte");
  try {
    if (data[0] & 1) {
      glnet::readIdxLabels(path);
    } else {
      glnet::readIdxImages(path);
    }
  } catch (const glnet::Error&) {
  }
  return 0;
}
