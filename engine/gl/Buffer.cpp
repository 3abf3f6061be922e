#include "gl/Buffer.h"

#include "gl/check.h"

#include <glad/gl.h>

#include <utility>

namespace glnet {

Buffer::Buffer(std::size_t bytes, const void* initial) : bytes_(bytes) {
  glGenBuffers(1, &id_);
  glBindBuffer(GL_COPY_WRITE_BUFFER, id_);
  glBufferData(GL_COPY_WRITE_BUFFER, static_cast<GLsizeiptr>(bytes), initial, GL_DYNAMIC_COPY);
  if (const GLenum error = glGetError(); error != GL_NO_ERROR) {
    glDeleteBuffers(1, &id_);
    id_ = 0;
    throw Error("could not allocate a buffer of " + std::to_string(bytes) + " bytes on the device (" +
                glErrorName(error) + ")");
  }
}

Buffer::~Buffer() {
  if (id_) glDeleteBuffers(1, &id_);
}

Buffer::Buffer(Buffer&& other) noexcept
    : id_(std::exchange(other.id_, 0u)), bytes_(std::exchange(other.bytes_, std::size_t{0})) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    if (id_) glDeleteBuffers(1, &id_);
    id_ = std::exchange(other.id_, 0u);
    bytes_ = std::exchange(other.bytes_, std::size_t{0});
  }
  return *this;
}

void Buffer::upload(const void* data, std::size_t bytes, std::size_t offset) {
  GLNET_ASSERT(offset + bytes <= bytes_, "upload past the end of a buffer");
  if (bytes == 0) return;
  // Shader writes still in flight must land before the host's bytes replace them.
  if (offset % 4 != 0 || bytes % 4 != 0) {
    // NVIDIA 580 drops a glBufferSubData at an offset that is not a multiple of 4 when a clear of the
    // buffer is still pending; a staged GPU copy keeps the order every driver must respect.
    const Buffer staging(bytes, data);
    copyFrom(staging, bytes, 0, offset);
    return;
  }
  glMemoryBarrier(GL_BUFFER_UPDATE_BARRIER_BIT);
  glBindBuffer(GL_COPY_WRITE_BUFFER, id_);
  GL_CHECK(glBufferSubData(GL_COPY_WRITE_BUFFER, static_cast<GLintptr>(offset), static_cast<GLsizeiptr>(bytes), data));
}

void Buffer::download(void* out, std::size_t bytes, std::size_t offset) const {
  GLNET_ASSERT(offset + bytes <= bytes_, "download past the end of a buffer");
  if (bytes == 0) return;
  glMemoryBarrier(GL_BUFFER_UPDATE_BARRIER_BIT);
  glBindBuffer(GL_COPY_READ_BUFFER, id_);
  GL_CHECK(glGetBufferSubData(GL_COPY_READ_BUFFER, static_cast<GLintptr>(offset), static_cast<GLsizeiptr>(bytes), out));
}

void Buffer::clear(std::uint8_t value) {
  if (bytes_ == 0) return;
  glMemoryBarrier(GL_BUFFER_UPDATE_BARRIER_BIT);
  glBindBuffer(GL_COPY_WRITE_BUFFER, id_);
  GL_CHECK(glClearBufferData(GL_COPY_WRITE_BUFFER, GL_R8UI, GL_RED_INTEGER, GL_UNSIGNED_BYTE, &value));
}

void Buffer::fill(std::uint32_t word) {
  GLNET_ASSERT(bytes_ % 4 == 0, "fill needs a buffer whose size is a multiple of 4 bytes");
  if (bytes_ == 0) return;
  glMemoryBarrier(GL_BUFFER_UPDATE_BARRIER_BIT);
  glBindBuffer(GL_COPY_WRITE_BUFFER, id_);
  GL_CHECK(glClearBufferData(GL_COPY_WRITE_BUFFER, GL_R32UI, GL_RED_INTEGER, GL_UNSIGNED_INT, &word));
}

void Buffer::copyFrom(const Buffer& source, std::size_t bytes, std::size_t sourceOffset, std::size_t offset) {
  GLNET_ASSERT(sourceOffset + bytes <= source.bytes_ && offset + bytes <= bytes_, "copy past the end of a buffer");
  if (bytes == 0) return;
  glMemoryBarrier(GL_BUFFER_UPDATE_BARRIER_BIT);
  glBindBuffer(GL_COPY_READ_BUFFER, source.id_);
  glBindBuffer(GL_COPY_WRITE_BUFFER, id_);
  GL_CHECK(glCopyBufferSubData(GL_COPY_READ_BUFFER, GL_COPY_WRITE_BUFFER, static_cast<GLintptr>(sourceOffset),
                               static_cast<GLintptr>(offset), static_cast<GLsizeiptr>(bytes)));
}

}  // namespace glnet
