// Image files (PNG, JPEG, BMP, PGM via stb_image) turned into MNIST-style 28×28 digits.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace glnet {

struct GrayImage {
  int width = 0;
  int height = 0;
  std::vector<std::uint8_t> pixels;  // row-major
};

// Image files are read whole; larger ones are refused before reading.
constexpr std::uint64_t largestImageFileBytes = 64u << 20;
// An image whose pixels all lie within this many gray levels has nothing to classify.
constexpr int blankSpread = 16;

// Any image stb_image reads, converted to 8-bit grayscale; throws glnet::Error naming the file.
GrayImage loadGrayImage(const std::string& path);
// The same from an encoded file in memory; errors name it `name`. A file with fewer pixel bytes than its header
// declares is refused; transparency is composited onto a background that contrasts with the strokes.
GrayImage decodeGrayImage(const std::uint8_t* data, std::size_t bytes, const std::string& name);

// True when the pixels are blank or nearly uniform (within blankSpread levels): any class for them means nothing.
bool looksBlank(const std::uint8_t* pixels, std::size_t count);
constexpr const char* blankImageWarning = "the image is blank or nearly uniform: its class means nothing";

enum class Inversion { automatic, always, never };

// As MNIST was made: a light digit on a dark background (inverted when asked, or automatically when the
// border is mostly light); a 28×28 image is kept as is, any other size is cropped to the digit, scaled to
// fit 20×20 and placed in a 28×28 frame with its centre of mass at the centre.
std::vector<std::uint8_t> toMnistDigit(const GrayImage& image, Inversion inversion);

}  // namespace glnet
