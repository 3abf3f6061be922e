#include "data/Image.h"

#include "data/ImageFolder.h"
#include "base/FileInput.h"
#include "base/check.h"

#include <stb/stb_image.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string_view>

namespace glnet {
namespace {

constexpr int frame = 28;
constexpr int box = 20;

bool borderIsLight(const GrayImage& image) {
  double sum = 0;
  int count = 0;
  for (int x = 0; x < image.width; ++x) {
    sum += image.pixels[static_cast<std::size_t>(x)] +
           image.pixels[static_cast<std::size_t>((image.height - 1) * image.width + x)];
    count += 2;
  }
  for (int y = 0; y < image.height; ++y) {
    sum += image.pixels[static_cast<std::size_t>(y * image.width)] +
           image.pixels[static_cast<std::size_t>(y * image.width + image.width - 1)];
    count += 2;
  }
  return sum / count > 127.5;
}

double sampleBilinear(const GrayImage& image, int left, int top, int width, int height, double x, double y) {
  x = std::clamp(x - 0.5, 0.0, width - 1.0);
  y = std::clamp(y - 0.5, 0.0, height - 1.0);
  const int x0 = static_cast<int>(x), y0 = static_cast<int>(y);
  const int x1 = std::min(x0 + 1, width - 1), y1 = std::min(y0 + 1, height - 1);
  const double fx = x - x0, fy = y - y0;
  const auto at = [&](int px, int py) {
    return static_cast<double>(image.pixels[static_cast<std::size_t>((top + py) * image.width + left + px)]);
  };
  return (1 - fy) * ((1 - fx) * at(x0, y0) + fx * at(x1, y0)) + fy * ((1 - fx) * at(x0, y1) + fx * at(x1, y1));
}

// Gray and alpha pairs made opaque. Drawing programs export strokes on a transparent background whose colour
// channels are often black like the strokes, so alpha cannot be dropped; the background is made to contrast
// with the strokes: white behind dark strokes, black behind light ones (by the alpha-weighted mean gray).
std::vector<std::uint8_t> compositeOnBackground(const std::uint8_t* grayAlpha, std::size_t count) {
  double ink = 0, weight = 0;
  for (std::size_t i = 0; i < count; ++i) {
    ink += static_cast<double>(grayAlpha[2 * i]) * grayAlpha[2 * i + 1];
    weight += grayAlpha[2 * i + 1];
  }
  const double background = weight > 0 && ink / weight >= 127.5 ? 0.0 : 255.0;
  std::vector<std::uint8_t> gray(count);
  for (std::size_t i = 0; i < count; ++i) {
    const double opacity = grayAlpha[2 * i + 1] / 255.0;
    gray[i] = static_cast<std::uint8_t>(std::lround(grayAlpha[2 * i] * opacity + background * (1 - opacity)));
  }
  return gray;
}

std::uint32_t littleEndian(const std::uint8_t* at, int bytes) {
  std::uint32_t value = 0;
  for (int i = bytes - 1; i >= 0; --i) value = (value << 8) | at[i];
  return value;
}

// Each chunk (4-byte big-endian length, 4-byte type, data, 4-byte CRC) ends inside the file, and the image
// ends with IEND: a file cut at a chunk boundary would otherwise decode from what is left.
bool pngComplete(const std::uint8_t* data, std::size_t bytes) {
  std::size_t offset = 8;
  while (offset + 12 <= bytes) {
    const std::uint64_t length = (std::uint64_t{data[offset]} << 24) | (std::uint64_t{data[offset + 1]} << 16) |
                                 (std::uint64_t{data[offset + 2]} << 8) | data[offset + 3];
    if (length > bytes - offset - 12) return false;
    if (std::string_view(reinterpret_cast<const char*>(data + offset + 4), 4) == "IEND") return true;
    offset += 12 + length;
  }
  return false;
}

// The pixel bytes a binary PGM (P5) header declares are all in the file; stb does not check, and decodes
// what is missing as uninitialised memory. Returns the reason a file is refused, or null.
const char* pgmIncomplete(const std::uint8_t* data, std::size_t bytes) {
  std::size_t offset = 2;
  std::uint64_t fields[3] = {};
  for (std::uint64_t& field : fields) {
    while (offset < bytes && (std::isspace(data[offset]) || data[offset] == '#')) {
      if (data[offset] == '#') {
        while (offset < bytes && data[offset] != '\n') ++offset;
      } else {
        ++offset;
      }
    }
    if (offset >= bytes || !std::isdigit(data[offset])) return "the PGM header is incomplete";
    while (offset < bytes && std::isdigit(data[offset]) && field < (1u << 24)) field = field * 10 + (data[offset++] - '0');
  }
  if (offset >= bytes || !std::isspace(data[offset])) return "the PGM header is incomplete";
  ++offset;  // exactly one whitespace byte separates the header from the pixels
  const std::uint64_t pixelBytes = fields[0] * fields[1] * (fields[2] > 255 ? 2 : 1);
  return pixelBytes > bytes - offset ? "truncated: the PGM header declares more pixel bytes than the file holds" : nullptr;
}

// The palette and pixel rows an uncompressed BMP header declares are all in the file: stb reads missing
// bytes as zeros (a BMP cut inside its palette decoded as a black image).
const char* bmpIncomplete(const std::uint8_t* data, std::size_t bytes) {
  if (bytes < 26) return "truncated: the BMP header is incomplete";
  const std::uint64_t pixelsOffset = littleEndian(data + 10, 4), headerBytes = littleEndian(data + 14, 4);
  const bool core = headerBytes == 12;  // the OS/2 header: 16-bit sizes, 3-byte palette entries
  if (bytes < 14 + headerBytes || (!core && headerBytes < 40)) return "truncated: the BMP header is incomplete";
  // Sizes are signed 32-bit (a negative height: rows stored top-down), 16-bit unsigned in the OS/2 header.
  const auto signedField = [&](int offset) { return std::int64_t{static_cast<std::int32_t>(littleEndian(data + offset, 4))}; };
  const std::int64_t width = core ? std::int64_t{littleEndian(data + 18, 2)} : signedField(18);
  const std::int64_t height = core ? std::int64_t{littleEndian(data + 20, 2)} : signedField(22);
  const std::uint32_t bitsPerPixel = littleEndian(data + (core ? 24 : 28), 2);
  const std::uint32_t compression = core ? 0 : littleEndian(data + 30, 4);
  constexpr std::uint32_t uncompressed = 0, bitFields = 3;
  if (compression != uncompressed && compression != bitFields) return "compressed BMP files are not supported";
  if (width <= 0 || height == 0 || bitsPerPixel == 0 || bitsPerPixel > 32) return "the BMP header is invalid";
  if (bitsPerPixel <= 8) {
    const std::uint64_t used = core ? 0 : littleEndian(data + 46, 4);
    const std::uint64_t entries = used ? std::min<std::uint64_t>(used, 256) : std::uint64_t{1} << bitsPerPixel;
    if (14 + headerBytes + entries * (core ? 3 : 4) > bytes) return "truncated inside the BMP palette";
  }
  const std::uint64_t rowBytes = (static_cast<std::uint64_t>(width) * bitsPerPixel + 31) / 32 * 4;
  const std::uint64_t rows = static_cast<std::uint64_t>(height < 0 ? -height : height);
  if (pixelsOffset > bytes || rowBytes * rows > bytes - pixelsOffset) {
    return "truncated: the BMP header declares more pixel rows than the file holds";
  }
  return nullptr;
}

// A baseline or progressive JPEG ends with its EOI marker after the first scan; stb decodes a cut file with
// the missing part filled in. Segments before the scan are skipped by their lengths (an EXIF thumbnail holds
// a whole JPEG, EOI included); inside entropy-coded data 0xFF is always followed by 0x00 or a marker.
bool jpegComplete(const std::uint8_t* data, std::size_t bytes) {
  std::size_t offset = 2;
  for (;;) {
    while (offset < bytes && data[offset] == 0xff && offset + 1 < bytes && data[offset + 1] == 0xff) ++offset;  // fill bytes
    if (offset + 4 > bytes || data[offset] != 0xff) return false;
    const std::uint8_t marker = data[offset + 1];
    if (marker == 0xd9) return false;  // EOI before any scan
    const std::size_t length = (std::size_t{data[offset + 2]} << 8) | data[offset + 3];
    if (length < 2 || length > bytes - offset - 2) return false;
    offset += 2 + length;
    if (marker == 0xda) break;
  }
  for (; offset + 1 < bytes; ++offset) {
    if (data[offset] == 0xff && data[offset + 1] == 0xd9) return true;
  }
  return false;
}

}  // namespace

GrayImage loadGrayImage(const std::string& path) {
  const std::string bytes = readRegularFile(path, largestImageFileBytes);
  return decodeGrayImage(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(), path);
}

namespace {

// The pixels of an encoded file, checked whole before stb decodes them: `gray` gives gray (and alpha when the file
// has it, in `alpha`), else RGB. Errors name the file `name`.
struct Decoded {
  int width = 0, height = 0;
  bool alpha = false;
  std::unique_ptr<stbi_uc, void (*)(void*)> pixels{nullptr, stbi_image_free};
};

Decoded decodeChecked(const std::uint8_t* data, std::size_t bytes, const std::string& name, bool gray) {
  // A small file may claim a huge image; refuse before decoding it (4096² pixels of 16-bit RGBA are 128 MiB).
  constexpr int largestSide = 4096;
  const auto unreadable = [&name](const char* reason) {
    return Error(name + ": not a readable image (" + reason + "); glnet reads PNG, JPEG, BMP and PGM");
  };
  if (bytes > static_cast<std::size_t>(INT32_MAX)) throw unreadable("over 2 GiB");
  const std::string_view start(reinterpret_cast<const char*>(data), std::min<std::size_t>(bytes, 8));
  const bool png = start.substr(0, 8) == "\x89PNG\r\n\x1a\n";
  // Only the formats glnet names reach stb: its other decoders (GIF, PSD, TGA, HDR, PIC) are never needed.
  const bool jpeg = start.substr(0, 2) == "\xff\xd8", bmp = start.substr(0, 2) == "BM", pgm = start.substr(0, 2) == "P5";
  if (!png && !jpeg && !bmp && !pgm) throw unreadable("unknown format");
  // stb grows its buffer to a PNG chunk's declared length before checking it against the file (a 2 KB
  // file made it ask for 1.7 GB when fuzzed), so every chunk must lie inside the file first. Every format is
  // checked whole before decoding: stb makes up the pixels of a truncated file instead of failing.
  if (png && !pngComplete(data, bytes)) throw unreadable("truncated: a PNG chunk runs past the end of the file, or IEND is missing");
  if (jpeg && !jpegComplete(data, bytes)) throw unreadable("truncated: the JPEG data ends before its end-of-image marker");
  if (const char* problem = pgm ? pgmIncomplete(data, bytes) : bmp ? bmpIncomplete(data, bytes) : nullptr) throw unreadable(problem);
  Decoded decoded;
  int channels = 0;
  if (!stbi_info_from_memory(data, static_cast<int>(bytes), &decoded.width, &decoded.height, &channels)) throw unreadable(stbi_failure_reason());
  // stb's BMP info reports a top-down image's negative height as it is stored; its decoder takes the magnitude.
  if (bmp && decoded.height < 0 && decoded.height != INT32_MIN) decoded.height = -decoded.height;
  // stb accepts a PGM header whose width or height is not a number as 0 (found by fuzzing).
  if (decoded.width <= 0 || decoded.height <= 0) throw unreadable("no pixels");
  if (decoded.width > largestSide || decoded.height > largestSide) {
    throw Error(name + ": " + std::to_string(decoded.width) + "x" + std::to_string(decoded.height) + " pixels; glnet reads images of at most " +
                std::to_string(largestSide) + " pixels a side");
  }
  decoded.alpha = gray && (channels == 2 || channels == 4);
  decoded.pixels.reset(stbi_load_from_memory(data, static_cast<int>(bytes), &decoded.width, &decoded.height, &channels,
                                             gray ? (decoded.alpha ? 2 : 1) : 3));
  if (!decoded.pixels) throw unreadable(stbi_failure_reason());
  if (decoded.width <= 0 || decoded.height <= 0) throw unreadable("no pixels");
  return decoded;
}

// Weights of a linear filter resampling `from` samples to `to` (PIL's antialiased bilinear: the triangle widened by
// the reduction factor when shrinking): per output sample, its first source sample and their weights.
std::vector<std::pair<int, std::vector<double>>> resampleWeights(int from, int to, double scale, double offset) {
  const double support = std::max(1.0, 1.0 / scale);
  std::vector<std::pair<int, std::vector<double>>> result;
  for (int o = 0; o < to; ++o) {
    const double centre = (o + offset + 0.5) / scale - 0.5;
    const int first = std::max(0, static_cast<int>(std::floor(centre - support)) + 1);
    const int last = std::min(from - 1, static_cast<int>(std::ceil(centre + support)) - 1);
    std::vector<double> weights;
    double total = 0;
    for (int i = first; i <= last; ++i) {
      weights.push_back(std::max(0.0, 1.0 - std::abs(i - centre) / support));
      total += weights.back();
    }
    if (weights.empty() || total <= 0) {
      weights.assign(1, 1.0);
      total = 1;
      result.emplace_back(std::clamp(static_cast<int>(std::lround(centre)), 0, from - 1), weights);
      continue;
    }
    for (double& w : weights) w /= total;
    result.emplace_back(first, weights);
  }
  return result;
}

}  // namespace

GrayImage decodeGrayImage(const std::uint8_t* data, std::size_t bytes, const std::string& name) {
  const Decoded decoded = decodeChecked(data, bytes, name, true);
  const std::size_t count = static_cast<std::size_t>(decoded.width) * static_cast<std::size_t>(decoded.height);
  // Images with transparency are decoded as gray and alpha and composited (see compositeOnBackground).
  if (!decoded.alpha) return {decoded.width, decoded.height, {decoded.pixels.get(), decoded.pixels.get() + count}};
  return {decoded.width, decoded.height, compositeOnBackground(decoded.pixels.get(), count)};
}

RgbImage loadRgbImage(const std::string& path) {
  const std::string bytes = readRegularFile(path, largestImageFileBytes);
  return decodeRgbImage(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(), path);
}

RgbImage decodeRgbImage(const std::uint8_t* data, std::size_t bytes, const std::string& name) {
  const Decoded decoded = decodeChecked(data, bytes, name, false);
  const std::size_t count = static_cast<std::size_t>(decoded.width) * static_cast<std::size_t>(decoded.height) * 3;
  return {decoded.width, decoded.height, {decoded.pixels.get(), decoded.pixels.get() + count}};
}

std::vector<float> toClassifierInput(const RgbImage& image, const ClassifierPreprocessing& p) {
  GLNET_ASSERT(p.channels == 1 || p.channels == 3, "a classifier takes 1 or 3 channels");
  GLNET_ASSERT(p.mean.size() == p.channels && p.std.size() == p.channels, "a mean and a deviation per channel");
  // The shorter side to `resize`, then the centre size × size, in one resampling per axis.
  const double scale = static_cast<double>(p.resize) / std::min(image.width, image.height);
  const int scaledWidth = std::max(1, static_cast<int>(std::lround(image.width * scale)));
  const int scaledHeight = std::max(1, static_cast<int>(std::lround(image.height * scale)));
  const double left = std::round((scaledWidth - static_cast<double>(p.width)) / 2), top = std::round((scaledHeight - static_cast<double>(p.height)) / 2);
  const auto columns = resampleWeights(image.width, static_cast<int>(p.width), static_cast<double>(scaledWidth) / image.width, left);
  const auto rows = resampleWeights(image.height, static_cast<int>(p.height), static_cast<double>(scaledHeight) / image.height, top);
  std::vector<float> out(std::size_t{p.channels} * p.height * p.width);
  std::vector<double> row(static_cast<std::size_t>(image.width) * 3);
  for (std::uint32_t y = 0; y < p.height; ++y) {
    std::fill(row.begin(), row.end(), 0.0);
    const auto& [firstRow, rowWeights] = rows[y];
    for (std::size_t k = 0; k < rowWeights.size(); ++k) {
      const std::uint8_t* source = image.pixels.data() + static_cast<std::size_t>(firstRow + static_cast<int>(k)) * image.width * 3;
      for (std::size_t i = 0; i < row.size(); ++i) row[i] += rowWeights[k] * source[i];
    }
    for (std::uint32_t x = 0; x < p.width; ++x) {
      const auto& [firstColumn, columnWeights] = columns[x];
      double rgb[3] = {0, 0, 0};
      for (std::size_t k = 0; k < columnWeights.size(); ++k) {
        for (int c = 0; c < 3; ++c) rgb[c] += columnWeights[k] * row[static_cast<std::size_t>(firstColumn + static_cast<int>(k)) * 3 + static_cast<std::size_t>(c)];
      }
      for (std::uint32_t c = 0; c < p.channels; ++c) {
        // One channel: the luma of ITU-R 601, as PIL's convert("L").
        const double value = p.channels == 3 ? rgb[c] : 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2];
        out[(std::size_t{c} * p.height + y) * p.width + x] = static_cast<float>((std::clamp(value, 0.0, 255.0) / 255.0 - p.mean[c]) / p.std[c]);
      }
    }
  }
  return out;
}

bool looksBlank(const std::uint8_t* pixels, std::size_t count) {
  if (count == 0) return true;
  const auto [darkest, brightest] = std::minmax_element(pixels, pixels + count);
  return *brightest - *darkest <= blankSpread;
}

std::vector<std::uint8_t> toMnistDigit(const GrayImage& source, Inversion inversion) {
  GLNET_ASSERT(source.width > 0 && source.height > 0, "an image has pixels");
  GrayImage image = source;
  if (inversion == Inversion::always || (inversion == Inversion::automatic && borderIsLight(image))) {
    for (auto& pixel : image.pixels) pixel = static_cast<std::uint8_t>(255 - pixel);
  }
  if (image.width == frame && image.height == frame) return image.pixels;

  // The digit's bounding box: pixels above a quarter of the brightest one.
  const std::uint8_t brightest = *std::max_element(image.pixels.begin(), image.pixels.end());
  std::vector<std::uint8_t> digit(frame * frame, 0);
  if (brightest == 0) return digit;
  const int threshold = brightest / 4;
  int left = image.width, right = -1, top = image.height, bottom = -1;
  for (int y = 0; y < image.height; ++y) {
    for (int x = 0; x < image.width; ++x) {
      if (image.pixels[static_cast<std::size_t>(y * image.width + x)] > threshold) {
        left = std::min(left, x);
        right = std::max(right, x);
        top = std::min(top, y);
        bottom = std::max(bottom, y);
      }
    }
  }
  const int width = right - left + 1, height = bottom - top + 1;
  const double scale = static_cast<double>(box) / std::max(width, height);
  const int scaledWidth = std::max(1, static_cast<int>(std::lround(width * scale)));
  const int scaledHeight = std::max(1, static_cast<int>(std::lround(height * scale)));

  // Resample with 4×4 bilinear samples per target pixel: smooth when shrinking and when enlarging.
  std::vector<double> scaled(static_cast<std::size_t>(scaledWidth * scaledHeight));
  double mass = 0, massX = 0, massY = 0;
  for (int y = 0; y < scaledHeight; ++y) {
    for (int x = 0; x < scaledWidth; ++x) {
      double sum = 0;
      for (int sy = 0; sy < 4; ++sy) {
        for (int sx = 0; sx < 4; ++sx) {
          sum += sampleBilinear(image, left, top, width, height, (x + (sx + 0.5) / 4) / scale, (y + (sy + 0.5) / 4) / scale);
        }
      }
      const double value = sum / 16;
      scaled[static_cast<std::size_t>(y * scaledWidth + x)] = value;
      mass += value;
      massX += value * (x + 0.5);
      massY += value * (y + 0.5);
    }
  }
  const int offsetX = mass > 0 ? static_cast<int>(std::lround(frame / 2.0 - massX / mass)) : (frame - scaledWidth) / 2;
  const int offsetY = mass > 0 ? static_cast<int>(std::lround(frame / 2.0 - massY / mass)) : (frame - scaledHeight) / 2;
  for (int y = 0; y < scaledHeight; ++y) {
    for (int x = 0; x < scaledWidth; ++x) {
      const int fx = x + offsetX, fy = y + offsetY;
      if (fx < 0 || fy < 0 || fx >= frame || fy >= frame) continue;
      digit[static_cast<std::size_t>(fy * frame + fx)] =
          static_cast<std::uint8_t>(std::clamp(std::lround(scaled[static_cast<std::size_t>(y * scaledWidth + x)]), 0L, 255L));
    }
  }
  return digit;
}

}  // namespace glnet

namespace glnet {

std::vector<std::uint8_t> toModelPixels(const std::uint8_t* encoded, std::size_t bytes, const std::string& name, const ImagePreprocessing& p,
                                        bool* blank) {
  if (p.resize == ImageResize::none) {
    throw Error(name + ": the model takes no images (its inputs are no square of gray or RGB pixels); give it its input values instead");
  }
  std::vector<std::uint8_t> planes;
  if (p.resize == ImageResize::mnistDigit || (p.resize == ImageResize::stretch && p.channels == 1)) {
    // Gray as glnet_train reads gray images (transparency composited), so that a model sees what it trained on.
    const GrayImage image = decodeGrayImage(encoded, bytes, name);
    if (blank) *blank = looksBlank(image.pixels.data(), image.pixels.size());
    if (p.resize == ImageResize::mnistDigit) return toMnistDigit(image, p.inversion);
    GLNET_ASSERT(p.width == p.height, "a stretched image is square, as an image folder's");
    planes = resizeToPlanes(image.pixels.data(), image.width, image.height, 1, p.width);
  } else {
    const RgbImage image = decodeRgbImage(encoded, bytes, name);
    if (blank) *blank = looksBlank(image.pixels.data(), image.pixels.size());
    if (p.resize == ImageResize::stretch) {
      GLNET_ASSERT(p.width == p.height, "a stretched image is square, as an image folder's");
      planes = resizeToPlanes(image.pixels.data(), image.width, image.height, 3, p.width);
    } else {
      // toClassifierInput's resampling, its values kept on the 0-255 scale (a deviation of 1/255) for the GPU's normalisation.
      ClassifierPreprocessing crop;
      crop.channels = p.channels;
      crop.width = p.width;
      crop.height = p.height;
      crop.resize = p.shorterSide;
      crop.mean.assign(p.channels, 0.0f);
      crop.std.assign(p.channels, 1.0f / 255.0f);
      for (const float value : toClassifierInput(image, crop)) planes.push_back(static_cast<std::uint8_t>(std::clamp(std::lround(value), 0L, 255L)));
    }
  }
  if (p.inversion == Inversion::always) {
    for (std::uint8_t& value : planes) value = static_cast<std::uint8_t>(255 - value);
  }
  return planes;
}

}  // namespace glnet
