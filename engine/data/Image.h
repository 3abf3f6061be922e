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
// The same from an encoded file in memory; errors name it `name`.
RgbImage decodeRgbImage(const std::uint8_t* data, std::size_t bytes, const std::string& name);

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

// How an image file becomes a model's input: uint8 planes [channels, height, width] (the model's input_mean and
// input_std normalise them later, on the GPU), made as its training images were made. Model files record it
// (model/ImagePreprocessing.h), so that glnet_predict, glnet_eval and glnet_serve see images as training saw them.
enum class ImageResize {
  none,        // the model takes no images (its inputs are no square of gray or RGB pixels)
  mnistDigit,  // toMnistDigit: 28×28 gray, cropped to the digit and centred by mass, inverted as `inversion` says
  stretch,     // resized to width × height, the aspect ratio not kept, as glnet_train reads an image folder (resizeToPlanes)
  centreCrop,  // the shorter side resized to `shorterSide`, the centre cropped: torchvision's evaluation transform
};
struct ImagePreprocessing {
  ImageResize resize = ImageResize::mnistDigit;
  std::uint32_t channels = 1, height = 28, width = 28;
  std::uint32_t shorterSide = 0;                // centreCrop
  Inversion inversion = Inversion::automatic;  // mnistDigit decides by the border when automatic; others invert only when always
};
// The input planes of one encoded image; errors name it `name`. `blank` (when given) says whether the decoded image
// was blank or nearly uniform.
std::vector<std::uint8_t> toModelPixels(const std::uint8_t* encoded, std::size_t bytes, const std::string& name,
                                        const ImagePreprocessing& preprocessing, bool* blank = nullptr);

}  // namespace glnet
