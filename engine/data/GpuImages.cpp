#include "data/GpuImages.h"

#include "gl/check.h"

#include <algorithm>

namespace glnet {

GpuImages::GpuImages(std::size_t count, std::size_t pixelsPerImage)
    : pixels((count * pixelsPerImage + 3) / 4 * 4), count(count), pixelsPerImage(pixelsPerImage) {}

void GpuImages::upload(const std::vector<std::uint8_t>& source) {
  GLNET_ASSERT(source.size() >= count * pixelsPerImage, "fewer pixels than images need");
  upload(source.data(), count);
}

void GpuImages::upload(const std::uint8_t* source, std::size_t images) {
  GLNET_ASSERT(images <= count, "more images than the buffer holds");
  const std::size_t bytes = images * pixelsPerImage;
  // Uploads go in whole words: the last partial word is completed with zeros.
  const std::size_t whole = bytes / 4 * 4;
  pixels.upload(source, whole);
  if (whole != bytes) {
    std::uint8_t tail[4] = {0, 0, 0, 0};
    std::copy(source + whole, source + bytes, tail);
    pixels.upload(tail, 4, whole);
  }
}

GpuImages uploadImages(const ImageSet& set) {
  GpuImages images(set.count, set.pixelsPerImage());
  images.upload(set.pixels);
  return images;
}

}  // namespace glnet
