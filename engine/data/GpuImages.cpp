#include "data/GpuImages.h"

#include "gl/check.h"

#include <algorithm>

namespace glnet {

GpuImages::GpuImages(std::size_t count, std::size_t pixelsPerImage)
    : pixels((count * pixelsPerImage + 3) / 4 * 4), count(count), pixelsPerImage(pixelsPerImage) {}

void GpuImages::upload(const std::vector<std::uint8_t>& source) {
  const std::size_t bytes = count * pixelsPerImage;
  GLNET_ASSERT(source.size() >= bytes, "fewer pixels than images need");
  const std::size_t whole = bytes / 4 * 4;
  pixels.upload(source.data(), whole);
  if (whole != bytes) {
    std::uint8_t tail[4] = {0, 0, 0, 0};
    std::copy(source.begin() + static_cast<std::ptrdiff_t>(whole), source.begin() + static_cast<std::ptrdiff_t>(bytes), tail);
    pixels.upload(tail, 4, whole);
  }
}

GpuImages uploadImages(const ImageSet& set) {
  GpuImages images(set.count, set.pixelsPerImage());
  images.upload(set.pixels);
  return images;
}

}  // namespace glnet
