// Image files (PNG, JPEG, BMP, PGM via stb_image) turned into MNIST-style 28×28 digits, or into the normalised input
// of an image classifier.
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

// Photographs for image classifiers: RGB, interleaved, row-major; the same checks as decodeGrayImage (an alpha
// channel is dropped, as PIL's convert("RGB") does).
struct RgbImage {
  int width = 0;
  int height = 0;
  std::vector<std::uint8_t> pixels;
};
RgbImage loadRgbImage(const std::string& path);

// torchvision's evaluation transform: the shorter side resized to `resize` (antialiased bilinear), the centre
// width × height cropped, values scaled to [0, 1] and normalised per channel, (v − mean) / std.
struct ClassifierPreprocessing {
  std::uint32_t channels = 3, width = 224, height = 224, resize = 256;
  std::vector<float> mean{0.0f, 0.0f, 0.0f}, std{1.0f, 1.0f, 1.0f};
};
// The model's input for one image, [channels, height, width] (one channel: the luma).
std::vector<float> toClassifierInput(const RgbImage& image, const ClassifierPreprocessing& preprocessing);

// True when the pixels are blank or nearly uniform (within blankSpread levels): any class for them means nothing.
bool looksBlank(const std::uint8_t* pixels, std::size_t count);
constexpr const char* blankImageWarning = "the image is blank or nearly uniform: its class means nothing";

enum class Inversion { automatic, always, never };

// As MNIST was made: a light digit on a dark background (inverted when asked, or automatically when the
// border is mostly light); a 28×28 image is kept as is, any other size is cropped to the digit, scaled to
// fit 20×20 and placed in a 28×28 frame with its centre of mass at the centre.
std::vector<std::uint8_t> toMnistDigit(const GrayImage& image, Inversion inversion);

}  // namespace glnet
