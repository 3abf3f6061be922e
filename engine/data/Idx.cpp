#include "data/Idx.h"

#include "gl/check.h"

#include <zlib.h>

#include <filesystem>
#include <memory>

namespace glnet {
namespace {

constexpr std::uint8_t unsignedByteType = 0x08;

struct GzipCloser {
  void operator()(gzFile file) const { gzclose(file); }
};

// The whole decompressed content of a plain or gzip file.
std::vector<std::uint8_t> readAll(const std::string& path) {
  if (!std::filesystem::is_regular_file(path)) throw Error(path + ": no such file");
  std::unique_ptr<gzFile_s, GzipCloser> file(gzopen(path.c_str(), "rb"));
  if (!file) throw Error(path + ": cannot open");
  std::vector<std::uint8_t> bytes;
  std::uint8_t chunk[1 << 16];
  for (;;) {
    const int got = gzread(file.get(), chunk, sizeof chunk);
    if (got < 0) {
      int code = 0;
      throw Error(path + ": read failed (" + gzerror(file.get(), &code) + ")");
    }
    if (got == 0) break;
    bytes.insert(bytes.end(), chunk, chunk + got);
  }
  return bytes;
}

std::uint32_t bigEndian32(const std::uint8_t* bytes) {
  return (std::uint32_t{bytes[0]} << 24) | (std::uint32_t{bytes[1]} << 16) | (std::uint32_t{bytes[2]} << 8) |
         std::uint32_t{bytes[3]};
}

// Validates the header against `rank` and the length against the dimensions; returns the dimensions.
std::vector<std::size_t> checkHeader(const std::string& path, const std::vector<std::uint8_t>& bytes, int rank,
                                     const char* what) {
  const std::size_t headerBytes = 4 + 4 * static_cast<std::size_t>(rank);
  if (bytes.size() < 4) throw Error(path + ": too short to be an IDX file (" + std::to_string(bytes.size()) + " bytes)");
  if (bytes[0] != 0 || bytes[1] != 0) throw Error(path + ": not an IDX file (bad magic number)");
  if (bytes[2] != unsignedByteType) {
    throw Error(path + ": IDX element type 0x" + std::to_string(bytes[2]) + " is not unsigned byte (0x08)");
  }
  if (bytes[3] != rank) {
    throw Error(path + ": IDX rank " + std::to_string(bytes[3]) + ", expected " + std::to_string(rank) + " for " + what);
  }
  if (bytes.size() < headerBytes) throw Error(path + ": truncated IDX header");
  std::vector<std::size_t> dimensions;
  std::size_t expected = 1;
  for (int i = 0; i < rank; ++i) {
    const std::size_t dimension = bigEndian32(bytes.data() + 4 + 4 * i);
    if (dimension == 0 || (i > 0 && dimension > 65536)) {
      throw Error(path + ": IDX dimension " + std::to_string(i) + " is " + std::to_string(dimension));
    }
    dimensions.push_back(dimension);
    expected *= dimension;
  }
  const std::size_t actual = bytes.size() - headerBytes;
  if (actual < expected) {
    throw Error(path + ": truncated: the header promises " + std::to_string(expected) + " bytes of data, the file has " +
                std::to_string(actual));
  }
  if (actual > expected) {
    throw Error(path + ": " + std::to_string(actual - expected) + " bytes past the data the header describes");
  }
  return dimensions;
}

std::string findFile(const std::string& directory, const std::string& name) {
  const std::filesystem::path plain = std::filesystem::path(directory) / name;
  if (std::filesystem::exists(plain)) return plain.string();
  const std::filesystem::path compressed = std::filesystem::path(directory) / (name + ".gz");
  if (std::filesystem::exists(compressed)) return compressed.string();
  throw Error(plain.string() + ": no such file (nor .gz); run scripts/fetch-mnist, or pass --data DIR");
}

}  // namespace

ImageSet readIdxImages(const std::string& path) {
  std::vector<std::uint8_t> bytes = readAll(path);
  const auto dimensions = checkHeader(path, bytes, 3, "images");
  ImageSet set;
  set.count = dimensions[0];
  set.rows = dimensions[1];
  set.columns = dimensions[2];
  set.pixels.assign(bytes.begin() + 16, bytes.end());
  return set;
}

std::vector<std::uint8_t> readIdxLabels(const std::string& path) {
  std::vector<std::uint8_t> bytes = readAll(path);
  checkHeader(path, bytes, 1, "labels");
  return {bytes.begin() + 8, bytes.end()};
}

void keepRange(LabelledImages& set, std::size_t first, std::size_t count) {
  GLNET_ASSERT(first + count <= set.images.count, "cannot keep more images than there are");
  const std::size_t pixels = set.images.pixelsPerImage();
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
