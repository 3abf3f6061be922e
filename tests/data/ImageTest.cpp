#include "data/Idx.h"
#include "data/Image.h"
#include "gl/check.h"
#include "support/TempDir.h"

#include <doctest/doctest.h>

#include <stb/stb_image_write.h>

#include <cmath>

using namespace glnet;

namespace {

// An MNIST-like digit: a bright ring off-centre in a 28×28 dark frame.
std::vector<std::uint8_t> ringDigit() {
  std::vector<std::uint8_t> pixels(28 * 28, 0);
  for (int y = 0; y < 28; ++y) {
    for (int x = 0; x < 28; ++x) {
      const double r = std::hypot(x + 0.5 - 14.0, y + 0.5 - 14.0);
      if (r > 5.5 && r < 10) pixels[static_cast<std::size_t>(y * 28 + x)] = 255;
    }
  }
  return pixels;
}

double meanAbsoluteDifference(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b) {
  double sum = 0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += std::abs(a[i] - b[i]);
  return sum / static_cast<double>(a.size());
}

}  // namespace

TEST_CASE("a 28x28 PNG with a dark background is used as is") {
  const test::TempDir directory;
  const auto digit = ringDigit();
  const std::string path = directory.file("digit.png");
  REQUIRE(stbi_write_png(path.c_str(), 28, 28, 1, digit.data(), 28));
  const GrayImage image = loadGrayImage(path);
  CHECK(image.width == 28);
  CHECK(toMnistDigit(image, Inversion::automatic) == digit);
}

TEST_CASE("a large dark-on-light image is inverted, cropped, scaled into 20x20 and centred by mass") {
  const test::TempDir directory;
  const auto digit = ringDigit();  // the ring spans 20 pixels, centred: what MNIST preprocessing produces
  // Scale 5× into a corner of a 200×150 light page, dark ink, colour BMP.
  const int width = 200, height = 150;
  std::vector<std::uint8_t> page(static_cast<std::size_t>(width * height * 3), 250);
  for (int y = 0; y < 140; ++y) {
    for (int x = 0; x < 140; ++x) {
      const std::uint8_t ink = static_cast<std::uint8_t>(250 - digit[static_cast<std::size_t>((y / 5) * 28 + x / 5)] * 240 / 255);
      for (int c = 0; c < 3; ++c) page[static_cast<std::size_t>(((y + 5) * width + x + 50) * 3 + c)] = ink;
    }
  }
  const std::string path = directory.file("page.bmp");
  REQUIRE(stbi_write_bmp(path.c_str(), width, height, 3, page.data()));
  const std::vector<std::uint8_t> result = toMnistDigit(loadGrayImage(path), Inversion::automatic);
  REQUIRE(result.size() == 28u * 28u);
  // Resampling blurs edges; the shape and position must survive.
  CHECK(meanAbsoluteDifference(result, digit) < 12.0);
  double mass = 0, x = 0, y = 0;
  for (int row = 0; row < 28; ++row) {
    for (int column = 0; column < 28; ++column) {
      const double v = result[static_cast<std::size_t>(row * 28 + column)];
      mass += v;
      x += v * (column + 0.5);
      y += v * (row + 0.5);
    }
  }
  CHECK(x / mass == doctest::Approx(14.0).epsilon(0.05));
  CHECK(y / mass == doctest::Approx(14.0).epsilon(0.05));
  // Without inversion the light page is the "digit": nothing like the ring.
  CHECK(meanAbsoluteDifference(toMnistDigit(loadGrayImage(path), Inversion::never), digit) > 40.0);
}

TEST_CASE("files that are not images are refused with the file name") {
  const test::TempDir directory;
  const std::string path = directory.write("notes.png", "this is not a PNG");
  CHECK_THROWS_WITH_AS(loadGrayImage(path), doctest::Contains("notes.png: not a readable image"), Error);
  CHECK_THROWS_WITH_AS(loadGrayImage(directory.file("absent.png")), doctest::Contains("absent.png: no such file"), Error);
}

TEST_CASE("inputs the fuzzer found are refused before stb allocates for them (tests/fuzz/regressions/Image)") {
  const auto refusal = [](const std::string& bytes) {
    try {
      decodeGrayImage(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(), "input");
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string("accepted");
  };
  // A PGM whose width is not a number: stb reported a 0-pixel image.
  CHECK(refusal(std::string("P5\n) 2\n255\n\0\xff\xff\0", 15)) == "input: not a readable image (no pixels); glnet reads PNG, JPEG, BMP and PGM");
  // A PNG whose IDAT chunk claims 0x5749... bytes: stb asked for 1.7 GB before noticing the file is 2 KB.
  std::string png("\x89PNG\r\n\x1a\n", 8);
  png += std::string("\0\0\0\x0dIHDR\0\0\0\x1c\0\0\0\x1c\x08\0\0\0\0", 21) + std::string("\0\0\0\0", 4);
  png += std::string("\x66\x00\x57\x1c", 4) + "IDAT" + std::string(64, 'x');
  CHECK(refusal(png) == "input: not a readable image (a PNG chunk runs past the end of the file); glnet reads PNG, JPEG, BMP and PGM");
  // Formats glnet does not name never reach stb.
  CHECK(refusal("GIF89a\x01\x00\x01\x00") == "input: not a readable image (unknown format); glnet reads PNG, JPEG, BMP and PGM");
}
