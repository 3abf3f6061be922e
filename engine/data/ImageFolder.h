// Labelled images in torchvision's ImageFolder layout: one sub-folder per class (sorted by name, as torchvision
// numbers them) holding PNG, JPEG, BMP or PGM files; decoded once, resized and kept as uint8 [channels, size, size].
#pragma once

#include "data/Idx.h"

#include <string>
#include <vector>

namespace glnet {

struct ImageFolderData {
  LabelledImages train, test;
  std::vector<std::string> classes;  // label i is classes[i]
};

// DIRECTORY/train/CLASS/* and DIRECTORY/test/CLASS/* (the same classes), or without them DIRECTORY/CLASS/* split
// with `testFraction` of each class's images (by a shuffle from `seed`) held out for testing. Each image becomes
// `channels` (1: gray, 3: RGB) planes of size × size (bilinear, the aspect ratio not kept, as Resize((size, size))).
// Throws glnet::Error naming the folder or file: no classes, a class without images, an unreadable image, more
// than 256 classes, or decoded images over what one GPU storage block holds (2 GiB).
ImageFolderData readImageFolders(const std::string& directory, std::uint32_t channels, std::uint32_t size, double testFraction,
                                 std::uint32_t seed);

// Bilinear resampling of `channels` interleaved planes of width × height to size × size, as planes one after another
// (CHW), the pixel centres aligned as PyTorch's align_corners=False does.
std::vector<std::uint8_t> resizeToPlanes(const std::uint8_t* interleaved, int width, int height, int channels, std::uint32_t size);

}  // namespace glnet
