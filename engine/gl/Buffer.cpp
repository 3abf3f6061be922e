#include "gl/Buffer.h"

#include "gl/Api.h"
#include "gl/Limits.h"
#include "gl/Sync.h"
#include "base/check.h"
#include "gl/GlCheck.h"

#include <glad/gl.h>

#include <algorithm>
#include <cstring>
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

// Deleting a buffer also ends its mapping; GPU work still queued on it keeps the storage alive until it finishes.
Buffer::~Buffer() {
  if (id_) glDeleteBuffers(1, &id_);
}

Buffer::Buffer(Buffer&& other) noexcept
    : id_(std::exchange(other.id_, 0u)),
      bytes_(std::exchange(other.bytes_, std::size_t{0})),
      mapped_(std::exchange(other.mapped_, nullptr)) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    if (id_) glDeleteBuffers(1, &id_);
    id_ = std::exchange(other.id_, 0u);
    bytes_ = std::exchange(other.bytes_, std::size_t{0});
    mapped_ = std::exchange(other.mapped_, nullptr);
  }
  return *this;
}

void Buffer::upload(const void* data, std::size_t bytes, std::size_t offset) {
  GLNET_ASSERT(offset + bytes <= bytes_, "upload past the end of a buffer");
  if (bytes == 0) return;
  // Shader writes still in flight must land before the host's bytes replace them.
  glMemoryBarrier(GL_BUFFER_UPDATE_BARRIER_BIT);
  glBindBuffer(GL_COPY_WRITE_BUFFER, id_);
  GL_CHECK(glBufferSubData(GL_COPY_WRITE_BUFFER, static_cast<GLintptr>(offset), static_cast<GLsizeiptr>(bytes), data));
}

void Buffer::download(void* out, std::size_t bytes, std::size_t offset) const {
  // OpenGL ES has no glGetBufferSubData: a read-only map is its way to read a buffer.
  if (currentApi() == Api::gles) return downloadMapped(out, bytes, offset);
  GLNET_ASSERT(offset + bytes <= bytes_, "download past the end of a buffer");
  if (bytes == 0) return;
  glMemoryBarrier(GL_BUFFER_UPDATE_BARRIER_BIT);
  // The read would block inside the driver with no limit; waiting here first puts the watchdog on it.
  Fence().wait();
  glBindBuffer(GL_COPY_READ_BUFFER, id_);
  GL_CHECK(glGetBufferSubData(GL_COPY_READ_BUFFER, static_cast<GLintptr>(offset), static_cast<GLsizeiptr>(bytes), out));
}

void Buffer::downloadMapped(void* out, std::size_t bytes, std::size_t offset) const {
  GLNET_ASSERT(offset + bytes <= bytes_, "download past the end of a buffer");
  if (bytes == 0) return;
  glMemoryBarrier(GL_BUFFER_UPDATE_BARRIER_BIT);
  Fence().wait();
  glBindBuffer(GL_COPY_READ_BUFFER, id_);
  const void* mapped =
      glMapBufferRange(GL_COPY_READ_BUFFER, static_cast<GLintptr>(offset), static_cast<GLsizeiptr>(bytes), GL_MAP_READ_BIT);
  if (!mapped) throw Error("glMapBufferRange failed (" + std::string(glErrorName(glGetError())) + ")");
  std::memcpy(out, mapped, bytes);
  glUnmapBuffer(GL_COPY_READ_BUFFER);
}

// ES has buffer storage through EXT_buffer_storage (GLAD aliases its glBufferStorageEXT to glBufferStorage).
bool Buffer::hostVisibleAvailable() { return currentLimits().persistentMaps; }

Buffer Buffer::hostVisible(std::size_t bytes, HostAccess access, const char* what) {
  if (!hostVisibleAvailable()) {
    throw Error(std::string("a host-visible ") + what +
                " needs GL_ARB_buffer_storage (GL_EXT_buffer_storage on ES), which this device lacks");
  }
  const GLbitfield mapAccess = access == HostAccess::read    ? GL_MAP_READ_BIT
                               : access == HostAccess::write ? GL_MAP_WRITE_BIT
                                                             : GL_MAP_READ_BIT | GL_MAP_WRITE_BIT;
  const GLbitfield flags = mapAccess | GL_MAP_PERSISTENT_BIT | GL_MAP_COHERENT_BIT;
  const auto size = static_cast<GLsizeiptr>(std::max<std::size_t>(bytes, 4));
  Buffer buffer;
  buffer.bytes_ = bytes;
  glGenBuffers(1, &buffer.id_);
  glBindBuffer(GL_COPY_WRITE_BUFFER, buffer.id_);
  glBufferStorage(GL_COPY_WRITE_BUFFER, size, nullptr, flags);
  buffer.mapped_ = static_cast<std::uint8_t*>(glMapBufferRange(GL_COPY_WRITE_BUFFER, 0, size, flags));
  if (!buffer.mapped_) {
    throw Error("could not map a " + std::to_string(size) + "-byte " + what + " (" + glErrorName(glGetError()) + ")");
  }
  return buffer;
}

void waitForHostVisibleWrites() {
  glMemoryBarrier(GL_CLIENT_MAPPED_BUFFER_BARRIER_BIT);
  Fence().wait();
}

PersistentReadback::PersistentReadback(std::size_t bytes) : map_(Buffer::hostVisible(bytes, HostAccess::read, "readback buffer")) {}

void PersistentReadback::read(const Buffer& source, void* out, std::size_t bytes, std::size_t offset) {
  read({{&source, out, bytes, offset}});
}

void PersistentReadback::read(std::initializer_list<Piece> pieces) {
  glMemoryBarrier(GL_BUFFER_UPDATE_BARRIER_BIT);
  glBindBuffer(GL_COPY_WRITE_BUFFER, map_.id());
  std::size_t at = 0;
  for (const Piece& piece : pieces) {
    GLNET_ASSERT(at + piece.bytes <= map_.bytes() && piece.offset + piece.bytes <= piece.source->bytes(),
                 "persistent read out of range");
    glBindBuffer(GL_COPY_READ_BUFFER, piece.source->id());
    glCopyBufferSubData(GL_COPY_READ_BUFFER, GL_COPY_WRITE_BUFFER, static_cast<GLintptr>(piece.offset),
                        static_cast<GLintptr>(at), static_cast<GLsizeiptr>(piece.bytes));
    at += (piece.bytes + 3) / 4 * 4;
  }
  waitForHostVisibleWrites();
  at = 0;
  for (const Piece& piece : pieces) {
    std::memcpy(piece.out, map_.mapped() + at, piece.bytes);
    at += (piece.bytes + 3) / 4 * 4;
  }
}

HostMirror::HostMirror(std::size_t bytes) {
  if (Buffer::hostVisibleAvailable()) {
    map_ = Buffer::hostVisible(bytes, HostAccess::readWrite, "host mirror");
  } else {
    host_.resize(bytes);
  }
}

Fence HostMirror::startPull(const Buffer& source, std::size_t offset, std::size_t bytes) {
  GLNET_ASSERT(offset + bytes <= source.bytes() && offset + bytes <= (map_ ? map_->bytes() : host_.size()),
               "a partial pull past the end of a buffer or its mirror");
  if (!map_) {
    source.download(host_.data() + offset, bytes, offset);
    return Fence();
  }
  glMemoryBarrier(GL_BUFFER_UPDATE_BARRIER_BIT);
  glBindBuffer(GL_COPY_READ_BUFFER, source.id());
  glBindBuffer(GL_COPY_WRITE_BUFFER, map_->id());
  GL_CHECK(glCopyBufferSubData(GL_COPY_READ_BUFFER, GL_COPY_WRITE_BUFFER, static_cast<GLintptr>(offset),
                               static_cast<GLintptr>(offset), static_cast<GLsizeiptr>(bytes)));
  glMemoryBarrier(GL_CLIENT_MAPPED_BUFFER_BARRIER_BIT);
  Fence copied;
  glFlush();  // the GPU starts on what is queued while the host waits for earlier pieces
  return copied;
}

void HostMirror::push(Buffer& target) { push(target, 0, target.bytes()); }

void HostMirror::push(Buffer& target, std::size_t offset, std::size_t bytes) {
  GLNET_ASSERT(offset + bytes <= target.bytes() && offset + bytes <= (map_ ? map_->bytes() : host_.size()),
               "a push past the end of a buffer or its mirror");
  if (!map_) return target.upload(host_.data() + offset, bytes, offset);
  glMemoryBarrier(GL_BUFFER_UPDATE_BARRIER_BIT);
  glBindBuffer(GL_COPY_READ_BUFFER, map_->id());
  glBindBuffer(GL_COPY_WRITE_BUFFER, target.id());
  GL_CHECK(glCopyBufferSubData(GL_COPY_READ_BUFFER, GL_COPY_WRITE_BUFFER, static_cast<GLintptr>(offset), static_cast<GLintptr>(offset),
                               static_cast<GLsizeiptr>(bytes)));
  glFlush();  // the GPU starts on the copy while the host goes on (with the next piece of a sum, say)
}

UploadRing::UploadRing(std::size_t slotBytes, std::size_t slots, unsigned copyThreads)
    : slotBytes_((std::max<std::size_t>(slotBytes, 4) + 3) / 4 * 4),
      fences_(std::max<std::size_t>(slots, 1)),
      map_(Buffer::hostVisible(slotBytes_ * fences_.size(), HostAccess::write, "upload ring")),
      copier_(std::make_unique<ParallelCopy>(copyThreads)) {}

void UploadRing::upload(Buffer& target, const void* data, std::size_t bytes, std::size_t offset) {
  GLNET_ASSERT(offset + bytes <= target.bytes(), "upload past the end of a buffer");
  if (bytes == 0) return;
  glMemoryBarrier(GL_BUFFER_UPDATE_BARRIER_BIT);
  glBindBuffer(GL_COPY_READ_BUFFER, map_.id());
  glBindBuffer(GL_COPY_WRITE_BUFFER, target.id());
  const auto* source = static_cast<const std::uint8_t*>(data);
  for (std::size_t done = 0; done < bytes;) {
    const std::size_t piece = std::min(slotBytes_, bytes - done);
    std::optional<Fence>& slotFence = fences_[next_];
    if (slotFence) {
      slotFence->wait();
      slotFence.reset();
    }
    const std::size_t slotOffset = next_ * slotBytes_;
    copier_->copy(map_.mapped() + slotOffset, source + done, piece);
    GL_CHECK(glCopyBufferSubData(GL_COPY_READ_BUFFER, GL_COPY_WRITE_BUFFER, static_cast<GLintptr>(slotOffset),
                                 static_cast<GLintptr>(offset + done), static_cast<GLsizeiptr>(piece)));
    slotFence.emplace();
    next_ = (next_ + 1) % fences_.size();
    done += piece;
  }
}

// glClearBufferData is not used: NVIDIA 580 lets later glBufferSubData calls of the same buffer land
// before a pending clear (the uploads are then lost), while uploads stay ordered among themselves.
void Buffer::clear(std::uint8_t value) { fillWith(&value, 1); }

void Buffer::fill(std::uint32_t word) {
  GLNET_ASSERT(bytes_ % 4 == 0, "fill needs a buffer whose size is a multiple of 4 bytes");
  fillWith(&word, 4);
}

void Buffer::fillWith(const void* pattern, std::size_t patternBytes) {
  constexpr std::size_t chunkBytes = 1 << 20;
  std::vector<std::uint8_t> chunk(std::min(bytes_, chunkBytes) / patternBytes * patternBytes);
  for (std::size_t i = 0; i < chunk.size(); i += patternBytes) std::memcpy(chunk.data() + i, pattern, patternBytes);
  for (std::size_t offset = 0; offset < bytes_; offset += chunk.size()) {
    upload(chunk.data(), std::min(chunk.size(), bytes_ - offset), offset);
  }
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
