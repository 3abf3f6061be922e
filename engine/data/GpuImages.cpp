#include "data/GpuImages.h"

#include "base/check.h"

#include <algorithm>
#include <cstring>
#include <thread>

namespace glnet {

namespace {
// Measured on the H100 machine (bench/results/2026-11-22-upload-ring-nvidia-h100.md): below a few megabytes
// glBufferSubData wins (1.6 MB: 12 against 7 GB/s); at 7.8 MB the two are even (11-14 GB/s); at 47 MB
// the ring reaches 14-20 GB/s against 8. Few large slots and four copying threads did best there: one
// thread copies only 7-9 GB/s on that CPU, and every slot's copy and fence has a fixed cost.
constexpr std::size_t stagingFromBytes = std::size_t{4} << 20;
constexpr std::size_t stagingSlotBytes = std::size_t{4} << 20;
constexpr std::size_t stagingSlots = 2;

unsigned stagingCopyThreads() { return std::clamp(std::thread::hardware_concurrency() / 4, 1u, 4u); }
}  // namespace

namespace {
Buffer pixelBuffer(std::size_t bytes, UploadPath path) {
  if (path == UploadPath::hostVisible) return Buffer::hostVisible(bytes, HostAccess::write, "image buffer");
  return Buffer(bytes);
}
}  // namespace

GpuImages::GpuImages(std::size_t count, std::size_t pixelsPerImage, UploadPath path, std::size_t valueBytes)
    : pixels(pixelBuffer((count * pixelsPerImage * valueBytes + 3) / 4 * 4, path)), count(count), pixelsPerImage(pixelsPerImage), valueBytes(valueBytes) {
  if (path == UploadPath::automatic && pixels.bytes() >= stagingFromBytes && Buffer::hostVisibleAvailable()) {
    staging.emplace(stagingSlotBytes, stagingSlots, stagingCopyThreads());
  }
}

void GpuImages::write(const void* data, std::size_t bytes, std::size_t offset) {
  if (pixels.mapped()) {
    std::memcpy(pixels.mapped() + offset, data, bytes);
  } else if (staging) {
    staging->upload(pixels, data, bytes, offset);
  } else {
    pixels.upload(data, bytes, offset);
  }
}

void GpuImages::upload(const std::vector<std::uint8_t>& source) {
  GLNET_ASSERT(source.size() >= count * pixelsPerImage * valueBytes, "fewer pixels than images need");
  upload(source.data(), count);
}

void GpuImages::upload(const std::uint8_t* source, std::size_t images) {
  GLNET_ASSERT(images <= count, "more images than the buffer holds");
  const std::size_t bytes = images * pixelsPerImage * valueBytes;
  // Uploads go in whole words: the last partial word is completed with zeros.
  const std::size_t whole = bytes / 4 * 4;
  write(source, whole, 0);
  if (whole != bytes) {
    std::uint8_t tail[4] = {0, 0, 0, 0};
    std::copy(source + whole, source + bytes, tail);
    write(tail, 4, whole);
  }
}

GpuImages uploadImages(const ImageSet& set) { return uploadImages(set, 0, set.count); }

GpuImages uploadImages(const ImageSet& set, std::size_t first, std::size_t count) {
  GLNET_ASSERT(first + count <= set.count, "more images than the set holds");
  GpuImages images(count, set.pixelsPerImage(), UploadPath::automatic, set.valueBytes);
  images.upload(set.pixels.data() + first * set.bytesPerImage(), count);
  return images;
}

}  // namespace glnet
