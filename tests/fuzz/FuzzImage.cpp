// Images as glnet_predict and glnet_serve take them: decoded by stb (PNG, JPEG, BMP, PGM, GIF, ...), then
// made into an MNIST-style digit with each inversion mode.
#include "data/Image.h"
#include "base/check.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const glnet::GrayImage image = glnet::decodeGrayImage(data, size, "fuzz input");
    for (const glnet::Inversion inversion : {glnet::Inversion::automatic, glnet::Inversion::always, glnet::Inversion::never}) {
      glnet::toMnistDigit(image, inversion);
    }
  } catch (const glnet::Error&) {
  }
  return 0;
}
