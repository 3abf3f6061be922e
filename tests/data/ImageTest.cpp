#include "data/Idx.h"
#include "data/Image.h"
#include "data/ImageFolder.h"
#include "base/check.h"
#include "support/TempDir.h"

#include <doctest/doctest.h>

#include <stb/stb_image_write.h>

#include <cmath>
#include <cstring>

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
  CHECK(refusal(std::string("P5\n) 2\n255\n\0\xff\xff\0", 15)) == "input: not a readable image (the PGM header is incomplete); glnet reads PNG, JPEG, BMP and PGM");
  // A PNG whose IDAT chunk claims 0x5749... bytes: stb asked for 1.7 GB before noticing the file is 2 KB.
  std::string png("\x89PNG\r\n\x1a\n", 8);
  png += std::string("\0\0\0\x0dIHDR\0\0\0\x1c\0\0\0\x1c\x08\0\0\0\0", 21) + std::string("\0\0\0\0", 4);
  png += std::string("\x66\x00\x57\x1c", 4) + "IDAT" + std::string(64, 'x');
  CHECK(refusal(png) == "input: not a readable image (truncated: a PNG chunk runs past the end of the file, or IEND is missing); glnet "
                        "reads PNG, JPEG, BMP and PGM");
  // Formats glnet does not name never reach stb.
  CHECK(refusal("GIF89a\x01\x00\x01\x00") == "input: not a readable image (unknown format); glnet reads PNG, JPEG, BMP and PGM");
}

namespace {

// An image encoded by stb_image_write (PNG, BMP or JPEG) into memory.
std::string encode(char format, int width, int height, int channels, const std::vector<std::uint8_t>& pixels) {
  std::string bytes;
  const auto append = [](void* context, void* data, int size) { static_cast<std::string*>(context)->append(static_cast<char*>(data), static_cast<std::size_t>(size)); };
  const int written = format == 'p'   ? stbi_write_png_to_func(append, &bytes, width, height, channels, pixels.data(), width * channels)
                      : format == 'b' ? stbi_write_bmp_to_func(append, &bytes, width, height, channels, pixels.data())
                                      : stbi_write_jpg_to_func(append, &bytes, width, height, channels, pixels.data(), 95);
  REQUIRE(written);
  return bytes;
}

GrayImage decode(const std::string& bytes) {
  return decodeGrayImage(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(), "input");
}

}  // namespace

TEST_CASE("a file with fewer pixel bytes than its header declares is refused, in every format") {
  const std::vector<std::uint8_t> digit = ringDigit();
  const auto truncated = [](const std::string& bytes, std::size_t keep, const char* reason) {
    CAPTURE(reason);
    CHECK_THROWS_WITH_AS(decode(bytes.substr(0, keep)), doctest::Contains(reason), Error);
  };
  const std::string pgm = "P5\n# a comment\n28 28\n255\n" + std::string(digit.begin(), digit.end());
  CHECK(decode(pgm).pixels == digit);
  truncated(pgm, pgm.size() - 684, "truncated: the PGM header declares more pixel bytes");
  truncated(pgm, 9, "the PGM header is incomplete");
  const std::string bmp = encode('b', 28, 28, 1, digit);  // 24-bit rows of 84 bytes
  CHECK(decode(bmp).pixels == digit);
  truncated(bmp, bmp.size() - 84, "truncated: the BMP header declares more pixel rows");
  truncated(bmp, 20, "truncated: the BMP header is incomplete");
  const std::string png = encode('p', 28, 28, 1, digit);
  truncated(png, png.size() - 12, "IEND is missing");
  const std::string jpeg = encode('j', 28, 28, 1, digit);
  CHECK(meanAbsoluteDifference(decode(jpeg).pixels, digit) < 20);
  truncated(jpeg, jpeg.size() - 2, "truncated: the JPEG data ends before its end-of-image marker");
  truncated(jpeg, jpeg.size() / 2, "truncated: the JPEG data ends before its end-of-image marker");
}

TEST_CASE("a top-down BMP decodes as its bottom-up twin") {
  const std::vector<std::uint8_t> digit = ringDigit();
  std::vector<std::uint8_t> gradient(28 * 28);
  for (std::size_t i = 0; i < gradient.size(); ++i) gradient[i] = static_cast<std::uint8_t>(i / 28 * 9);
  std::string bottomUp = encode('b', 28, 28, 1, gradient);
  // Flip the rows and negate the height: the same image stored top-down.
  const std::size_t offset = 54, row = 84;
  std::string topDown = bottomUp;
  for (std::size_t r = 0; r < 28; ++r) topDown.replace(offset + r * row, row, bottomUp, offset + (27 - r) * row, row);
  const std::int32_t height = -28;
  std::memcpy(topDown.data() + 22, &height, 4);
  CHECK(decode(topDown).pixels == gradient);
  CHECK(decode(bottomUp).pixels == gradient);
}

TEST_CASE("transparency is composited onto paper that contrasts with the ink, and blank images are recognised") {
  const std::vector<std::uint8_t> digit = ringDigit();
  std::vector<std::uint8_t> darkInk(28 * 28 * 2), lightInk(28 * 28 * 2);
  for (std::size_t i = 0; i < digit.size(); ++i) {
    darkInk[2 * i] = 0;  // black strokes on a transparent, black background: what drawing programs export
    darkInk[2 * i + 1] = digit[i];
    lightInk[2 * i] = 255;
    lightInk[2 * i + 1] = digit[i];
  }
  std::vector<std::uint8_t> inverted(digit.size());
  for (std::size_t i = 0; i < digit.size(); ++i) inverted[i] = static_cast<std::uint8_t>(255 - digit[i]);
  CHECK(decode(encode('p', 28, 28, 2, darkInk)).pixels == inverted);  // on white paper
  CHECK(decode(encode('p', 28, 28, 2, lightInk)).pixels == digit);    // on black paper
  CHECK(toMnistDigit(decode(encode('p', 28, 28, 2, darkInk)), Inversion::automatic) == digit);
  const std::vector<std::uint8_t> white(40 * 30, 255), noisy = [] {
    std::vector<std::uint8_t> pixels(100, 120);
    for (std::size_t i = 0; i < pixels.size(); i += 7) pixels[i] = 130;
    return pixels;
  }();
  CHECK(looksBlank(white.data(), white.size()));
  CHECK(looksBlank(noisy.data(), noisy.size()));
  CHECK_FALSE(looksBlank(digit.data(), digit.size()));
}

TEST_CASE("image folders resize bilinearly into planes: the same size is kept, a halving averages pairs") {
  // 4x2 RGB, interleaved.
  std::vector<std::uint8_t> rgb;
  for (int y = 0; y < 2; ++y) {
    for (int x = 0; x < 4; ++x) rgb.insert(rgb.end(), {static_cast<std::uint8_t>(10 * x), static_cast<std::uint8_t>(100 + y), 7});
  }
  const std::vector<std::uint8_t> same{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};  // 2x2 RGB
  CHECK(resizeToPlanes(same.data(), 2, 2, 3, 2) == std::vector<std::uint8_t>{1, 4, 7, 10, 2, 5, 8, 11, 3, 6, 9, 12});
  const std::vector<std::uint8_t> halved = resizeToPlanes(rgb.data(), 4, 2, 3, 2);
  // x: centres at 0.5 and 2.5 of 0..3 → (0 + 10)/2 = 5 and (20 + 30)/2 = 25; y stretched from 2 rows to 2: kept.
  CHECK(halved == std::vector<std::uint8_t>{5, 25, 5, 25, 100, 100, 101, 101, 7, 7, 7, 7});
  const std::vector<std::uint8_t> gray{0, 255};
  CHECK(resizeToPlanes(gray.data(), 2, 1, 1, 1) == std::vector<std::uint8_t>{128});
}

TEST_CASE("an image folder that is a file or missing is named so, not as a folder without train/ and test/") {
  const test::TempDir directory;
  const std::string file = directory.write("net.json", "{}");
  CHECK_THROWS_WITH_AS(readImageFolders(file, 3, 32, 0.0, 1), doctest::Contains((file + ": not a directory (an image folder holds one sub-folder").c_str()), Error);
  CHECK_THROWS_WITH_AS(readImageFolders(file, 3, 32, 0.25, 1), doctest::Contains("net.json: not a directory"), Error);
  CHECK_THROWS_WITH_AS(readImageFolders(directory.file("absent"), 3, 32, 0.25, 1), doctest::Contains((directory.file("absent") + ": no such directory").c_str()), Error);
}

TEST_CASE("image files become a model's input as its training images were made") {
  std::vector<std::uint8_t> rgb(6 * 4 * 3);
  for (std::size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<std::uint8_t>(i * 7 % 256);
  const std::string png = encode('p', 6, 4, 3, rgb);
  const auto pixels = [&](const ImagePreprocessing& p) {
    return toModelPixels(reinterpret_cast<const std::uint8_t*>(png.data()), png.size(), "photo.png", p);
  };
  // Stretched as glnet_train reads an image folder: the same bytes as resizeToPlanes of the decoded image.
  ImagePreprocessing stretch;
  stretch.resize = ImageResize::stretch;
  stretch.channels = 3;
  stretch.width = stretch.height = 3;
  stretch.inversion = Inversion::never;
  CHECK(pixels(stretch) == resizeToPlanes(rgb.data(), 6, 4, 3, 3));
  stretch.inversion = Inversion::always;
  std::vector<std::uint8_t> inverted = resizeToPlanes(rgb.data(), 6, 4, 3, 3);
  for (std::uint8_t& v : inverted) v = static_cast<std::uint8_t>(255 - v);
  CHECK(pixels(stretch) == inverted);
  // Centre-cropped as torchvision evaluates: toClassifierInput's values on the 0-255 scale.
  ImagePreprocessing crop = stretch;
  crop.resize = ImageResize::centreCrop;
  crop.inversion = Inversion::never;
  crop.shorterSide = 4;
  ClassifierPreprocessing reference;
  reference.width = reference.height = 3;
  reference.resize = 4;
  const std::vector<float> expected = toClassifierInput(decodeRgbImage(reinterpret_cast<const std::uint8_t*>(png.data()), png.size(), "photo.png"), reference);
  const std::vector<std::uint8_t> got = pixels(crop);
  REQUIRE(got.size() == expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(std::abs(got[i] - expected[i] * 255.0f) <= 0.5001f);
  // A model whose inputs are no image takes none, in one line naming the file.
  ImagePreprocessing none;
  none.resize = ImageResize::none;
  CHECK_THROWS_WITH_AS(pixels(none), doctest::Contains("photo.png: the model takes no images"), Error);
}
