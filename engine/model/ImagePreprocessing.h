// How image files become a network's input as its files record it: the preprocessing a network gets when its file
// says nothing, and the file metadata (safetensors __metadata__ and ONNX metadata_props alike) that records it.
#pragma once

#include "data/Image.h"
#include "graph/Op.h"

#include <cstdint>
#include <map>
#include <string>

namespace glnet {

// The side of MNIST's square gray digits.
constexpr std::uint32_t mnistSide = 28;

// How images become the input of a network of `inputShape` (per image) when its file does not say: MNIST's digits
// for 28×28 gray inputs; a square of gray or RGB pixels (an MLP's inputs flattened from one) resized as glnet_train
// reads an image folder; for an `imported` model (ONNX made elsewhere) torchvision's evaluation transform (the
// shorter side to H·256/224, the centre cropped); ImageResize::none for other inputs.
ImagePreprocessing defaultPreprocessing(const Shape& inputShape, bool imported);
// The preprocessing a file's metadata records (image_resize: mnist-digit, stretch or centre-crop; image_shorter_side;
// image_invert: automatic, always or never), defaultPreprocessing where it records none; errors name `path`.
ImagePreprocessing preprocessingOf(const std::map<std::string, std::string>& metadata, const Shape& inputShape, bool imported,
                                   const std::string& path);
// Records `images` in a file's metadata (image_resize, image_invert, image_shorter_side, and the size and channels for
// people reading the file); nothing for a network that takes no images.
void recordPreprocessing(const ImagePreprocessing& images, std::map<std::string, std::string>& metadata);

}  // namespace glnet
