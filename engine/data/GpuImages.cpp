#include "data/GpuImages.h"

#include "gl/check.h"

#include <algorithm>

namespace glnet {

namespace {
// Four slots of up to 2 MiB: big enough that each copy's fixed cost is small against its bytes on the bus,
// deep enough that the host fills slots while earlier ones are in flight.
constexpr std::size_t stagingSlotBytes = std::size_t{2} << 20;
constexpr std::size_t stagingSlots = 4;
}  // namespace

GpuImages::GpuImages(std::size_t count, std::size_t pixelsPerImage, UploadPath path)
    : pixels((count * pixelsPerImage + 3) / 4 * 4), count(count), pixelsPerImage(pixelsPerImage) {
  if (path == UploadPath::automatic && UploadRing::available()) {
    staging.emplace(std::min(stagingSlotBytes, pixels.bytes()), stagingSlots);
  }
}

void GpuImages::write(const void* data, std::size_t bytes, std::size_t offset) {
  if (staging) {
    staging->upload(pixels, data, bytes, offset);
  } else {
    pixels.upload(data, bytes, offset);
  }
}

void GpuImages::upload(const std::vector<std::uint8_t>& source) {
  GLNET_ASSERT(source.size() >= count * pixelsPerImage, "fewer pixels than images need");
  upload(source.data(), count);
}

void GpuImages::upload(const std::uint8_t* source, std::size_t images) {
  GLNET_ASSERT(images <= count, "more images than the buffer holds");
  const std::size_t bytes = images * pixelsPerImage;
  // Uploads go in whole words: the last partial word is completed with zeros.
  const std::size_t whole = bytes / 4 * 4;
  write(source, whole, 0);
  if (whole != bytes) {
    std::uint8_t tail[4] = {0, 0, 0, 0};
    std::copy(source + whole, source + bytes, tail);
    write(tail, 4, whole);
  }
}

GpuImages uploadImages(const ImageSet& set) {
  GpuImages images(set.count, set.pixelsPerImage());
  images.upload(set.pixels);
  return images;
}

}  // namespace glnet
