// A move-only shader storage buffer. Binding points are an implementation detail of its methods.
#pragma once

#include "base/ParallelCopy.h"
#include "gl/Sync.h"

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <vector>

namespace glnet {

// What the host does with a host-visible buffer's bytes.
enum class HostAccess { read, write, readWrite };

class Buffer {
 public:
  Buffer() = default;
  // Allocates `bytes` on the device, filled from `initial` when given.
  explicit Buffer(std::size_t bytes, const void* initial = nullptr);
  template <class T>
  static Buffer of(const std::vector<T>& values) {
    return Buffer(values.size() * sizeof(T), values.data());
  }
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  // Immutable storage mapped into host memory once for good (ARB_buffer_storage, persistent and coherent):
  // the host reads and/or writes its bytes at mapped() while shaders and copies use it as any other buffer
  // (after waitForHostVisibleWrites, the host sees what shaders wrote). `what` names it in errors. Throws
  // glnet::Error when the device lacks buffer storage.
  static Buffer hostVisible(std::size_t bytes, HostAccess access, const char* what);
  // Whether the current context can make host-visible buffers (GL_ARB_buffer_storage, GL_EXT_buffer_storage on ES).
  static bool hostVisibleAvailable();

  unsigned id() const { return id_; }
  std::size_t bytes() const { return bytes_; }
  // The host address of a host-visible buffer's bytes; nullptr for the others.
  std::uint8_t* mapped() const { return mapped_; }

  // Ordered after earlier uploads and, by GL_BUFFER_UPDATE_BARRIER_BIT, after earlier shader writes. NVIDIA
  // 580 was seen to let still-queued shader writes land after an upload anyway, so memory that queued
  // dispatches write is reset by a dispatch instead (CompiledGraph::resetTotals).
  void upload(const void* data, std::size_t bytes, std::size_t offset = 0);
  template <class T>
  void upload(const std::vector<T>& values, std::size_t offset = 0) {
    upload(values.data(), values.size() * sizeof(T), offset);
  }
  // Waits for the GPU work that writes this buffer, then copies to host memory.
  void download(void* out, std::size_t bytes, std::size_t offset = 0) const;
  template <class T>
  std::vector<T> read() const {
    std::vector<T> values(bytes_ / sizeof(T));
    download(values.data(), values.size() * sizeof(T));
    return values;
  }
  // The same through glMapBufferRange(GL_MAP_READ_BIT) instead of glGetBufferSubData.
  void downloadMapped(void* out, std::size_t bytes, std::size_t offset = 0) const;
  // Sets every byte to `value`.
  void clear(std::uint8_t value = 0);
  // Sets every 32-bit word to `word` (e.g. a NaN pattern to poison outputs); the size must be a multiple of 4.
  void fill(std::uint32_t word);
  void copyFrom(const Buffer& source, std::size_t bytes, std::size_t sourceOffset = 0, std::size_t offset = 0);

 private:
  void fillWith(const void* pattern, std::size_t patternBytes);
  unsigned id_ = 0;
  std::size_t bytes_ = 0;
  std::uint8_t* mapped_ = nullptr;
};

// Waits until the GPU work issued so far is done, with its shader writes to host-visible buffers visible at
// their mapped() addresses.
void waitForHostVisibleWrites();

// A host-visible copy target mapped once for good (ARB_buffer_storage, persistent and coherent): a read
// is a GPU copy into it, a fence, and a memcpy.
class PersistentReadback {
 public:
  // Throws glnet::Error when the device lacks GL_ARB_buffer_storage.
  explicit PersistentReadback(std::size_t bytes);

  void read(const Buffer& source, void* out, std::size_t bytes, std::size_t offset = 0);
  // Several reads behind one fence: each piece's bytes from its source at its offset into its out.
  struct Piece {
    const Buffer* source;
    void* out;
    std::size_t bytes;
    std::size_t offset = 0;
  };
  void read(std::initializer_list<Piece> pieces);

 private:
  Buffer map_;
};

// A host-visible twin of a device buffer, mapped once for good (ARB_buffer_storage, persistent and
// coherent), so that host code works on the bytes where they land: startPull() has the GPU copy bytes in,
// push() has the GPU copy them back. Neither direction costs a host memcpy.
class HostMirror {
 public:
  // Persistently mapped where the device has buffer storage; elsewhere plain host memory, read back and
  // uploaded by the ordinary calls (slower, same contract).
  explicit HostMirror(std::size_t bytes);

  // Queues the copy of bytes [offset, offset + bytes) of `source` into the same bytes of the mirror and
  // returns the fence that passes once they are there (at once, after a plain read, without buffer storage).
  Fence startPull(const Buffer& source, std::size_t offset, std::size_t bytes);
  // Ordered before every later GL command; returns at once, the copy flushed to the GPU.
  void push(Buffer& target);
  // The same for bytes [offset, offset + bytes) of the mirror, into the same bytes of `target`.
  void push(Buffer& target, std::size_t offset, std::size_t bytes);
  void* data() { return map_ ? map_->mapped() : host_.data(); }

 private:
  std::optional<Buffer> map_;
  std::vector<unsigned char> host_;
};

// A host-visible staging ring mapped once for good (ARB_buffer_storage, persistent and coherent): an
// upload copies each slice into the next free slot and has the GPU copy it on, so that the host fills one
// slot while the bus carries the ones before it. A slot is reused after the fence of its last copy passes.
// `copyThreads` fill each slot together (see ParallelCopy).
class UploadRing {
 public:
  // Throws glnet::Error when the device lacks GL_ARB_buffer_storage.
  UploadRing(std::size_t slotBytes, std::size_t slots, unsigned copyThreads = 1);

  // The same contract as Buffer::upload; returns once the bytes are in the ring, before they reach `target`.
  void upload(Buffer& target, const void* data, std::size_t bytes, std::size_t offset = 0);

 private:
  std::size_t slotBytes_ = 0;
  std::vector<std::optional<Fence>> fences_;
  Buffer map_;
  std::size_t next_ = 0;
  std::unique_ptr<ParallelCopy> copier_;
};

}  // namespace glnet
