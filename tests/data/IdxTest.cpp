#include "data/Idx.h"
#include "base/check.h"
#include "support/Random.h"
#include "support/TempDir.h"

#include <doctest/doctest.h>

#include <zlib.h>

using namespace glnet;

namespace {

std::string idx(std::uint8_t type, std::vector<std::uint32_t> dimensions, std::size_t dataBytes) {
  std::string bytes = {0, 0, static_cast<char>(type), static_cast<char>(dimensions.size())};
  for (const std::uint32_t d : dimensions) {
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<char>((d >> shift) & 0xff));
  }
  for (std::size_t i = 0; i < dataBytes; ++i) bytes.push_back(static_cast<char>(i % 10));
  return bytes;
}

void writeGzip(const std::string& path, const std::string& bytes) {
  gzFile file = gzopen(path.c_str(), "wb");
  REQUIRE(file != nullptr);
  gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(file);
}

}  // namespace

TEST_CASE("IDX images and labels read plain and gzip-compressed") {
  const test::TempDir directory;
  directory.write("t10k-images-idx3-ubyte", idx(8, {3, 2, 5}, 30));
  writeGzip(directory.file("t10k-labels-idx1-ubyte.gz"), idx(8, {3}, 3));
  const LabelledImages set = readMnistSplit(directory.path().string(), Split::test);
  CHECK(set.images.count == 3);
  CHECK(set.images.rows == 2);
  CHECK(set.images.columns == 5);
  CHECK(set.images.pixels.size() == 30);
  CHECK(set.images.pixels[11] == 1);
  CHECK(set.labels == std::vector<std::uint8_t>{0, 1, 2});
}

TEST_CASE("bad IDX files are refused with the file name and the reason") {
  const test::TempDir directory;
  const auto refuseImages = [&](const std::string& name, const std::string& bytes, const std::string& reason) {
    CAPTURE(name);
    const std::string path = directory.write(name, bytes);
    CHECK_THROWS_WITH_AS(readIdxImages(path), doctest::Contains((name + ": " + reason).c_str()), Error);
  };
  refuseImages("empty", "", "too short");
  refuseImages("magic", "\x12\x34" + idx(8, {1, 2, 2}, 4).substr(2), "not an IDX file");
  refuseImages("type", idx(0x0d, {1, 2, 2}, 16), "IDX element type");
  refuseImages("rank", idx(8, {4}, 4), "IDX rank 1, expected 3 or 4");
  refuseImages("truncated", idx(8, {10, 28, 28}, 7839), "truncated: the header promises 7840 bytes of data, the file has 7839");
  refuseImages("trailing", idx(8, {1, 2, 2}, 5), "bytes past the data the header describes");
  // A 16-byte header may declare 2^42 bytes: refused before any data is read or allocated.
  refuseImages("declared", idx(8, {65536u * 256u, 512, 512}, 0), "the header declares 4398046511104 bytes of data; glnet reads at most 4294967296");
  refuseImages("header", idx(8, {1, 2, 2}, 0).substr(0, 10), "truncated IDX header");
  CHECK_THROWS_WITH_AS(readIdxImages(directory.file("absent")), doctest::Contains("absent: no such file"), Error);

  directory.write("t10k-images-idx3-ubyte", idx(8, {3, 2, 2}, 12));
  directory.write("t10k-labels-idx1-ubyte", idx(8, {4}, 4));
  CHECK_THROWS_WITH_AS(readMnistSplit(directory.path().string(), Split::test), doctest::Contains("4 labels for 3 images"), Error);
  directory.write("t10k-labels-idx1-ubyte", idx(8, {3}, 0) + std::string("\x01\x0b\x02", 3));
  CHECK_THROWS_WITH_AS(readMnistSplit(directory.path().string(), Split::test), doctest::Contains("label 11 at index 1"), Error);
  CHECK_THROWS_WITH_AS(readMnistSplit(directory.path().string(), Split::train), doctest::Contains("has no train-images-idx3-ubyte (nor train-images-idx3-ubyte.gz); a data directory holds"), Error);
}

TEST_CASE("IDX images of rank 4 are [count, channels, rows, columns]") {
  const test::TempDir directory;
  const std::string path = directory.write("colour", idx(8, {2, 3, 4, 5}, 120));
  const ImageSet set = readIdxImages(path);
  CHECK(set.count == 2);
  CHECK(set.channels == 3);
  CHECK(set.rows == 4);
  CHECK(set.columns == 5);
  CHECK(set.pixelsPerImage() == 60);
  CHECK(set.pixels.size() == 120);
}

TEST_CASE("CIFAR-10's binary records: a label byte and 3 072 CHW pixel bytes each; torn files refused") {
  const test::TempDir directory;
  std::string records;
  for (int r = 0; r < 3; ++r) {
    records.push_back(static_cast<char>(r * 4));
    for (int i = 0; i < 3072; ++i) records.push_back(static_cast<char>((r + i) % 251));
  }
  directory.write("data_batch_2.bin", records);
  directory.write("test_batch.bin", records.substr(0, 3073));
  const LabelledImages train = readCifar10Split(directory.path().string(), Split::train);
  CHECK(train.images.count == 3);
  CHECK(train.images.channels == 3);
  CHECK(train.labels == std::vector<std::uint8_t>{0, 4, 8});
  CHECK(train.images.pixels[3072 + 5] == 6);
  CHECK(readCifar10Split(directory.path().string(), Split::test).images.count == 1);
  CHECK_THROWS_WITH(readCifar10Split(directory.path().string(), Split::train, 5), doctest::Contains("record 2 has label 8, not below 5"));
  directory.write("test_batch.bin", records.substr(0, 3000));
  CHECK_THROWS_WITH(readCifar10Split(directory.path().string(), Split::test),
                    doctest::Contains("test_batch.bin: 3000 bytes is not a whole number of CIFAR-10 records"));
  const test::TempDir empty;
  CHECK_THROWS_WITH(readCifar10Split(empty.path().string(), Split::train), doctest::Contains("has no data_batch_1.bin"));
}
