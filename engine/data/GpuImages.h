// Images resident on the GPU as raw uint8 pixels, normalized in a shader when used.
#pragma once

#include "data/Idx.h"
#include "gl/Buffer.h"

namespace glnet {

// How pixels reach the device: for 4 MiB or more, through an UploadRing where ARB_buffer_storage exists;
// else (or when asked) through glBufferSubData. `hostVisible`: the pixels stay in a host-visible buffer
// (Buffer::hostVisible) that shaders read in place, so an upload is a host memcpy and no GPU copy; for a few
// images read once per upload by a caller that waits for that work before uploading again (WarmClassifier).
enum class UploadPath { automatic, plain, hostVisible };

struct GpuImages {
  // `valueBytes`: 1 for pixels, 4 for token ids (ImageSet::valueBytes).
  GpuImages(std::size_t count, std::size_t pixelsPerImage, UploadPath path = UploadPath::automatic, std::size_t valueBytes = 1);
  // Replaces the pixels in place, so plans recorded against this buffer stay valid.
  void upload(const std::vector<std::uint8_t>& pixels);
  // Replaces the first `images` images only (images × pixelsPerImage × valueBytes bytes from `source`).
  void upload(const std::uint8_t* source, std::size_t images);

  Buffer pixels;  // count × pixelsPerImage × valueBytes bytes, padded to a multiple of 4
  std::size_t count = 0;
  std::size_t pixelsPerImage = 0;
  std::size_t valueBytes = 1;
  bool tokenIds() const { return valueBytes == 4; }
  std::optional<UploadRing> staging;  // empty on the plain path

 private:
  void write(const void* data, std::size_t bytes, std::size_t offset);
};

GpuImages uploadImages(const ImageSet& set);
// Images [first, first + count) of `set` only.
GpuImages uploadImages(const ImageSet& set, std::size_t first, std::size_t count);

}  // namespace glnet
