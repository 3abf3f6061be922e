#include "data/Idx.h"

#include "base/FileInput.h"
#include "base/check.h"

#include <cstdio>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <memory>

namespace glnet {
namespace {

constexpr std::uint8_t unsignedByteType = 0x08;

struct GzipCloser {
  void operator()(gzFile file) const { gzclose(file); }
};

// The largest IDX file glnet reads: a header may declare up to 2^96 bytes, and a gzip stream may expand a
// thousandfold, so sizes are checked before the data is read and reading stops where the header says.
constexpr std::uint64_t largestIdxBytes = std::uint64_t{1} << 32;

std::uint32_t bigEndian32(const std::uint8_t* bytes) {
  return (std::uint32_t{bytes[0]} << 24) | (std::uint32_t{bytes[1]} << 16) | (std::uint32_t{bytes[2]} << 8) |
         std::uint32_t{bytes[3]};
}

// Reads up to `count` more bytes into `bytes`; returns how many came.
std::size_t readInto(gzFile file, const std::string& path, std::vector<std::uint8_t>& bytes, std::uint64_t count) {
  std::uint8_t chunk[1 << 16];
  std::size_t total = 0;
  while (total < count) {
    const auto wanted = static_cast<unsigned>(std::min<std::uint64_t>(sizeof chunk, count - total));
    const int got = gzread(file, chunk, wanted);
    if (got < 0) {
      int code = 0;
      throw Error(path + ": read failed (" + gzerror(file, &code) + ")");
    }
    if (got == 0) break;
    bytes.insert(bytes.end(), chunk, chunk + got);
    total += static_cast<std::size_t>(got);
  }
  return total;
}

// The header (validated against `rank`) and the data of a plain or gzip IDX file, with its dimensions;
// the data's length must be exactly what the header declares.
std::vector<std::uint8_t> readIdx(const std::string& path, std::initializer_list<int> ranks, const char* what, std::vector<std::size_t>& dimensions) {
  if (!std::filesystem::is_regular_file(path)) throw FileNotFound(path + ": no such file");
  std::unique_ptr<gzFile_s, GzipCloser> file(gzopen(path.c_str(), "rb"));
  if (!file) throw Error(path + ": cannot open");
  std::vector<std::uint8_t> bytes;
  readInto(file.get(), path, bytes, 4);
  if (bytes.size() < 4) throw Error(path + ": too short to be an IDX file (" + std::to_string(bytes.size()) + " bytes)");
  if (bytes[0] != 0 || bytes[1] != 0) throw Error(path + ": not an IDX file (bad magic number)");
  if (bytes[2] != unsignedByteType) {
    char type[8];
    std::snprintf(type, sizeof type, "0x%02x", bytes[2]);
    throw Error(path + ": IDX element type " + type + " is not unsigned byte (0x08)");
  }
  const int rank = bytes[3];
  if (std::find(ranks.begin(), ranks.end(), rank) == ranks.end()) {
    std::string expected;
    for (const int r : ranks) expected += (expected.empty() ? "" : " or ") + std::to_string(r);
    throw Error(path + ": IDX rank " + std::to_string(rank) + ", expected " + expected + " for " + what);
  }
  const std::size_t headerBytes = 4 + 4 * static_cast<std::size_t>(rank);
  readInto(file.get(), path, bytes, headerBytes - 4);
  if (bytes.size() < headerBytes) throw Error(path + ": truncated IDX header");
  std::uint64_t expected = 1;
  for (int i = 0; i < rank; ++i) {
    const std::size_t dimension = bigEndian32(bytes.data() + 4 + 4 * i);
    if (dimension == 0 || (i > 0 && dimension > 65536)) {
      throw Error(path + ": IDX dimension " + std::to_string(i) + " is " + std::to_string(dimension));
    }
    dimensions.push_back(dimension);
    expected *= dimension;  // at most 2^32 · 2^16 · 2^16: no overflow
  }
  if (expected > largestIdxBytes) {
    throw Error(path + ": the header declares " + std::to_string(expected) + " bytes of data; glnet reads at most " +
                std::to_string(largestIdxBytes));
  }
  const std::size_t actual = readInto(file.get(), path, bytes, expected + 1);
  if (actual < expected) {
    throw Error(path + ": truncated: the header promises " + std::to_string(expected) + " bytes of data, the file has " +
                std::to_string(actual));
  }
  if (actual > expected) throw Error(path + ": bytes past the data the header describes");
  return bytes;
}

std::string findFile(const std::string& directory, const std::string& name) {
  const std::filesystem::path plain = std::filesystem::path(directory) / name;
  if (std::filesystem::exists(plain)) return plain.string();
  const std::filesystem::path compressed = std::filesystem::path(directory) / (name + ".gz");
  if (std::filesystem::exists(compressed)) return compressed.string();
  if (!std::filesystem::is_directory(directory)) {
    throw FileNotFound(directory + ": no such directory; run scripts/fetch-mnist (it writes data/mnist), or point " + optionName("data") +
                       " at a directory of IDX files");
  }
  throw Error(directory + ": has no " + name + " (nor " + name + ".gz); a data directory holds MNIST's four IDX files, "
              "train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte, plain or "
              "gzipped (scripts/fetch-mnist writes them)");
}

}  // namespace

ImageSet readIdxImages(const std::string& path) {
  std::vector<std::size_t> dimensions;
  const std::vector<std::uint8_t> bytes = readIdx(path, {3, 4}, "images", dimensions);
  ImageSet set;
  set.count = dimensions[0];
  set.channels = dimensions.size() == 4 ? dimensions[1] : 1;
  set.rows = dimensions[dimensions.size() - 2];
  set.columns = dimensions.back();
  set.pixels.assign(bytes.begin() + static_cast<std::ptrdiff_t>(4 + 4 * dimensions.size()), bytes.end());
  return set;
}

std::vector<std::uint8_t> readIdxLabels(const std::string& path) {
  std::vector<std::size_t> dimensions;
  const std::vector<std::uint8_t> bytes = readIdx(path, {1}, "labels", dimensions);
  return {bytes.begin() + 8, bytes.end()};
}

LabelledImages readCifar10Split(const std::string& directory, Split split, int classes) {
  if (!std::filesystem::is_directory(directory)) throw FileNotFound(directory + ": no such directory (CIFAR-10's binary version: data_batch_N.bin, test_batch.bin)");
  std::vector<std::string> files;
  if (split == Split::test) {
    files.push_back((std::filesystem::path(directory) / "test_batch.bin").string());
  } else {
    for (int batch = 1; batch <= 5; ++batch) {
      const std::filesystem::path path = std::filesystem::path(directory) / ("data_batch_" + std::to_string(batch) + ".bin");
      if (std::filesystem::exists(path)) files.push_back(path.string());
    }
    if (files.empty()) throw Error(directory + ": has no data_batch_1.bin ... data_batch_5.bin (CIFAR-10's binary version)");
  }
  constexpr std::size_t side = 32, channels = 3, pixels = channels * side * side, record = 1 + pixels;
  LabelledImages set;
  set.images.channels = channels;
  set.images.rows = side;
  set.images.columns = side;
  for (const std::string& path : files) {
    if (!std::filesystem::is_regular_file(path)) throw FileNotFound(path + ": no such file");
    const std::string bytes = readRegularFile(path, largestIdxBytes);
    if (bytes.empty() || bytes.size() % record != 0) {
      throw Error(path + ": " + std::to_string(bytes.size()) + " bytes is not a whole number of CIFAR-10 records (1 label byte and " +
                  std::to_string(pixels) + " pixel bytes each)");
    }
    for (std::size_t offset = 0; offset < bytes.size(); offset += record) {
      const auto label = static_cast<std::uint8_t>(bytes[offset]);
      if (label >= classes) {
        throw Error(path + ": record " + std::to_string(offset / record) + " has label " + std::to_string(label) + ", not below " +
                    std::to_string(classes));
      }
      set.labels.push_back(label);
      set.images.pixels.insert(set.images.pixels.end(), bytes.begin() + static_cast<std::ptrdiff_t>(offset + 1),
                               bytes.begin() + static_cast<std::ptrdiff_t>(offset + record));
    }
  }
  set.images.count = set.labels.size();
  return set;
}

void keepRange(LabelledImages& set, std::size_t first, std::size_t count) {
  GLNET_ASSERT(first + count <= set.images.count, "cannot keep more images than there are");
  const std::size_t pixels = set.images.bytesPerImage();
  set.images.pixels.erase(set.images.pixels.begin(), set.images.pixels.begin() + static_cast<std::ptrdiff_t>(first * pixels));
  set.images.pixels.resize(count * pixels);
  set.labels.erase(set.labels.begin(), set.labels.begin() + static_cast<std::ptrdiff_t>(first));
  set.labels.resize(count);
  set.images.count = count;
}

LabelledImages readMnistSplit(const std::string& directory, Split split, int classes) {
  const std::string prefix = split == Split::train ? "train" : "t10k";
  const std::string imagePath = findFile(directory, prefix + "-images-idx3-ubyte");
  const std::string labelPath = findFile(directory, prefix + "-labels-idx1-ubyte");
  LabelledImages set{readIdxImages(imagePath), readIdxLabels(labelPath)};
  if (set.labels.size() != set.images.count) {
    throw Error(labelPath + ": " + std::to_string(set.labels.size()) + " labels for " +
                std::to_string(set.images.count) + " images in " + imagePath);
  }
  for (std::size_t i = 0; i < set.labels.size(); ++i) {
    if (set.labels[i] >= classes) {
      throw Error(labelPath + ": label " + std::to_string(set.labels[i]) + " at index " + std::to_string(i) +
                  " is not below " + std::to_string(classes));
    }
  }
  return set;
}

}  // namespace glnet
