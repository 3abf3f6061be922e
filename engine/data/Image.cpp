#include "data/Image.h"

#include "gl/check.h"

#include <stb/stb_image.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
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

// Each chunk (4-byte big-endian length, 4-byte type, data, 4-byte CRC) ends inside the file.
bool pngChunksInside(const std::uint8_t* data, std::size_t bytes) {
  std::size_t offset = 8;
  while (offset + 12 <= bytes) {
    const std::uint64_t length = (std::uint64_t{data[offset]} << 24) | (std::uint64_t{data[offset + 1]} << 16) |
                                 (std::uint64_t{data[offset + 2]} << 8) | data[offset + 3];
    if (length > bytes - offset - 12) return false;
    if (std::string_view(reinterpret_cast<const char*>(data + offset + 4), 4) == "IEND") return true;
    offset += 12 + length;
  }
  return offset == bytes;
}

}  // namespace

GrayImage loadGrayImage(const std::string& path) {
  if (!std::filesystem::is_regular_file(path)) throw Error(path + ": no such file");
  std::ifstream file(path, std::ios::binary);
  const std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  if (!file && !file.eof()) throw Error(path + ": could not be read");
  return decodeGrayImage(bytes.data(), bytes.size(), path);
}

GrayImage decodeGrayImage(const std::uint8_t* data, std::size_t bytes, const std::string& name) {
  // A small file may claim a huge image; refuse before decoding it (4096² pixels of 16-bit RGBA are 128 MiB).
  constexpr int largestSide = 4096;
  const auto unreadable = [&name](const char* reason) {
    return Error(name + ": not a readable image (" + reason + "); glnet reads PNG, JPEG, BMP and PGM");
  };
  if (bytes > static_cast<std::size_t>(INT32_MAX)) throw unreadable("over 2 GiB");
  const std::string_view start(reinterpret_cast<const char*>(data), std::min<std::size_t>(bytes, 8));
  const bool png = start.substr(0, 8) == "\x89PNG\r\n\x1a\n";
  // Only the formats glnet names reach stb: its other decoders (GIF, PSD, TGA, HDR, PIC) are never needed.
  if (!png && start.substr(0, 2) != "\xff\xd8" && start.substr(0, 2) != "BM" && start.substr(0, 2) != "P5" &&
      start.substr(0, 2) != "P2") {
    throw unreadable("unknown format");
  }
  // stb grows its buffer to a PNG chunk's declared length before checking it against the file (a 2 KB
  // file made it ask for 1.7 GB when fuzzed), so every chunk must lie inside the file first.
  if (png && !pngChunksInside(data, bytes)) throw unreadable("a PNG chunk runs past the end of the file");
  int width = 0, height = 0, channels = 0;
  if (!stbi_info_from_memory(data, static_cast<int>(bytes), &width, &height, &channels)) throw unreadable(stbi_failure_reason());
  // stb accepts a PGM header whose width or height is not a number as 0 (found by fuzzing).
  if (width <= 0 || height <= 0) throw unreadable("no pixels");
  if (width > largestSide || height > largestSide) {
    throw Error(name + ": " + std::to_string(width) + "x" + std::to_string(height) + " pixels; glnet reads images of at most " +
                std::to_string(largestSide) + " pixels a side");
  }
  std::unique_ptr<stbi_uc, void (*)(void*)> pixels(
      stbi_load_from_memory(data, static_cast<int>(bytes), &width, &height, &channels, 1), stbi_image_free);
  if (!pixels) throw unreadable(stbi_failure_reason());
  if (width <= 0 || height <= 0) throw unreadable("no pixels");
  return {width, height, {pixels.get(), pixels.get() + static_cast<std::size_t>(width) * static_cast<std::size_t>(height)}};
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
