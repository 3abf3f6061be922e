#include "model/ImagePreprocessing.h"

#include "base/check.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace glnet {

ImagePreprocessing defaultPreprocessing(const Shape& inputShape, bool imported) {
  ImagePreprocessing p;
  const std::size_t values = elementCount(inputShape);
  if (values == std::size_t{mnistSide} * mnistSide && (inputShape.size() == 1 || inputShape[0] == 1)) return p;  // MNIST's digits
  // The channels and the side of a square image giving these inputs.
  const auto side = [](std::size_t pixels) { return static_cast<std::uint32_t>(std::lround(std::sqrt(static_cast<double>(pixels)))); };
  if (inputShape.size() == 3 && (inputShape[0] == 1 || inputShape[0] == 3)) {
    p.channels = inputShape[0];
    p.height = inputShape[1];
    p.width = inputShape[2];
  } else if (inputShape.size() == 1 && std::size_t{side(values)} * side(values) == values) {
    p.height = p.width = side(values);
  } else if (inputShape.size() == 1 && values % 3 == 0 && std::size_t{side(values / 3)} * side(values / 3) == values / 3) {
    p.channels = 3;
    p.height = p.width = side(values / 3);
  } else {
    p.resize = ImageResize::none;
    return p;
  }
  p.inversion = Inversion::never;
  if (imported) {
    p.resize = ImageResize::centreCrop;
    p.shorterSide = static_cast<std::uint32_t>(std::lround(std::min(p.height, p.width) * 256.0 / 224.0));
  } else {
    // glnet_train reads image folders square; a network of other inputs takes no image files.
    p.resize = p.height == p.width ? ImageResize::stretch : ImageResize::none;
  }
  return p;
}

ImagePreprocessing preprocessingOf(const std::map<std::string, std::string>& metadata, const Shape& inputShape, bool imported,
                                   const std::string& path) {
  ImagePreprocessing p = defaultPreprocessing(inputShape, imported);
  const auto found = metadata.find("image_resize");
  if (found == metadata.end()) return p;
  if (p.resize == ImageResize::none) throw Error(path + ": metadata image_resize is given, but the model's input " + describe(inputShape) + " is no image");
  const std::string& resize = found->second;
  if (resize == "mnist-digit") {
    if (p.channels != 1 || p.height != mnistSide || p.width != mnistSide) throw Error(path + ": metadata image_resize mnist-digit needs 28x28 gray inputs");
    p.resize = ImageResize::mnistDigit;
  } else if (resize == "stretch") {
    if (p.height != p.width) throw Error(path + ": metadata image_resize stretch needs square inputs");
    p.resize = ImageResize::stretch;
  } else if (resize == "centre-crop") {
    p.resize = ImageResize::centreCrop;
    const auto side = metadata.find("image_shorter_side");
    char* end = nullptr;
    const long shorter = side == metadata.end() ? 0 : std::strtol(side->second.c_str(), &end, 10);
    if (side == metadata.end() || *end != '\0' || shorter < std::max(p.height, p.width) || shorter > 65536) {
      throw Error(path + ": metadata image_resize centre-crop needs image_shorter_side, from the input's side to 65536");
    }
    p.shorterSide = static_cast<std::uint32_t>(shorter);
  } else {
    throw Error(path + ": metadata image_resize is mnist-digit, stretch or centre-crop, not '" + resize + "'");
  }
  if (const auto invert = metadata.find("image_invert"); invert != metadata.end()) {
    const std::string& how = invert->second;
    if (how != "automatic" && how != "always" && how != "never") throw Error(path + ": metadata image_invert is automatic, always or never, not '" + how + "'");
    p.inversion = how == "automatic" ? Inversion::automatic : how == "always" ? Inversion::always : Inversion::never;
  }
  return p;
}

void recordPreprocessing(const ImagePreprocessing& images, std::map<std::string, std::string>& metadata) {
  if (images.resize == ImageResize::none) return;
  static const char* resizes[] = {"none", "mnist-digit", "stretch", "centre-crop"};
  static const char* inversions[] = {"automatic", "always", "never"};
  metadata["image_resize"] = resizes[static_cast<int>(images.resize)];
  metadata["image_invert"] = inversions[static_cast<int>(images.inversion)];
  // Said for people reading the file; glnet takes the size and channels from the input's shape.
  metadata["image_size"] = std::to_string(images.width) + "x" + std::to_string(images.height);
  metadata["image_channels"] = images.channels == 3 ? "rgb" : "gray";
  if (images.resize == ImageResize::centreCrop) metadata["image_shorter_side"] = std::to_string(images.shorterSide);
}

}  // namespace glnet
