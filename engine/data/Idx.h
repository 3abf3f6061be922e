// The IDX format of MNIST and Fashion-MNIST (unsigned-byte images and labels), plain or gzip-compressed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace glnet {

// Images of uint8 pixels, or the token ids of text (data/TokenData.h): one row of `columns` ids per sequence, each
// id 4 bytes (a little-endian uint32), fed to the network as it is rather than scaled as a pixel.
struct ImageSet {
  std::size_t count = 0;
  std::size_t rows = 0;
  std::size_t columns = 0;
  std::vector<std::uint8_t> pixels;  // count × channels × rows × columns values, row-major
  std::size_t channels = 1;
  std::size_t valueBytes = 1;  // 4: token ids
  std::size_t pixelsPerImage() const { return channels * rows * columns; }
  std::size_t bytesPerImage() const { return pixelsPerImage() * valueBytes; }
  bool tokenIds() const { return valueBytes == 4; }
};

// Throw glnet::Error naming the file and what is wrong: magic, rank, dimensions, or a length that does not
// match the header (truncated or with trailing bytes).
// Images are rank 3 [count, rows, columns] (one channel) or rank 4 [count, channels, rows, columns].
ImageSet readIdxImages(const std::string& path);
std::vector<std::uint8_t> readIdxLabels(const std::string& path);

struct LabelledImages {
  ImageSet images;
  std::vector<std::uint8_t> labels;
};

// Keeps images [first, first + count) and their labels (within the number there is).
void keepRange(LabelledImages& set, std::size_t first, std::size_t count);
inline void keepFirst(LabelledImages& set, std::size_t count) { keepRange(set, 0, count); }

enum class Split { train, test };

// Reads `<directory>/{train,t10k}-{images-idx3,labels-idx1}-ubyte`, or the same with `.gz`, and checks
// that images and labels agree in count and that labels are below `classes`.
LabelledImages readMnistSplit(const std::string& directory, Split split, int classes = 10);

// CIFAR-10's binary version in `directory`: data_batch_1.bin ... data_batch_5.bin (train; those present, at least one)
// or test_batch.bin, each record a label byte and 3 072 pixel bytes, [3, 32, 32]. Throws glnet::Error naming a file
// whose length is not whole records or whose label is not below `classes`.
LabelledImages readCifar10Split(const std::string& directory, Split split, int classes = 10);

}  // namespace glnet
