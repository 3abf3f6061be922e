#include "data/GpuImages.h"
#include "gl/Buffer.h"
#include "base/check.h"
#include "support/GlContext.h"
#include "support/Random.h"

#include <doctest/doctest.h>

#include <cstring>

using namespace glnet;

TEST_SUITE("gl") {
  TEST_CASE("upload and download round-trip random bytes at odd sizes") {
    test::glContext();
    auto random = test::generator(1);
    for (const std::size_t size : {std::size_t{1}, std::size_t{3}, std::size_t{4095}, std::size_t{65537},
                                   std::size_t{1000003}, std::size_t{64} << 20}) {
      CAPTURE(size);
      const std::vector<std::uint8_t> bytes = test::randomBytes(random, size);
      Buffer buffer(size);
      buffer.upload(bytes.data(), size);
      std::vector<std::uint8_t> back(size, 0xAB);
      buffer.download(back.data(), size);
      CHECK(std::memcmp(bytes.data(), back.data(), size) == 0);
    }
  }

  TEST_CASE("partial upload and download respect offsets") {
    test::glContext();
    auto random = test::generator(2);
    const std::vector<std::uint8_t> bytes = test::randomBytes(random, 1001);
    Buffer buffer(1001);
    buffer.clear(0);
    buffer.upload(bytes.data() + 17, 500, 17);
    std::vector<std::uint8_t> back(1001);
    buffer.download(back.data(), 1001);
    for (std::size_t i = 0; i < back.size(); ++i) {
      const std::uint8_t expected = (i >= 17 && i < 517) ? bytes[i] : 0;
      REQUIRE(back[i] == expected);
    }
    std::vector<std::uint8_t> middle(100);
    buffer.download(middle.data(), 100, 200);
    CHECK(std::memcmp(middle.data(), bytes.data() + 200, 100) == 0);
  }

  TEST_CASE("clear sets every byte, fill every word") {
    test::glContext();
    Buffer odd(777);
    odd.clear(0x5A);
    for (const std::uint8_t byte : odd.read<std::uint8_t>()) REQUIRE(byte == 0x5A);
    Buffer words(4 * 1001);
    words.fill(0x7FC00000u);
    for (const std::uint32_t word : words.read<std::uint32_t>()) REQUIRE(word == 0x7FC00000u);
  }

  TEST_CASE("large uploads right after a clear are kept (NVIDIA 580 once lost them)") {
    test::glContext();
    auto random = test::generator(4);
    for (const std::size_t offset : {std::size_t{0}, std::size_t{16}, std::size_t{4096}}) {
      CAPTURE(offset);
      const std::vector<std::uint8_t> bytes = test::randomBytes(random, 1 << 20);
      Buffer buffer((2 << 20) + 64);
      buffer.clear();
      buffer.upload(bytes.data(), bytes.size(), offset);
      buffer.upload(bytes.data(), 4096, offset + bytes.size() + 64);
      const auto back = buffer.read<std::uint8_t>();
      CHECK(std::memcmp(back.data() + offset, bytes.data(), bytes.size()) == 0);
      CHECK(std::memcmp(back.data() + offset + bytes.size() + 64, bytes.data(), 4096) == 0);
      CHECK(back[offset + bytes.size() + 10] == 0);
    }
  }

  TEST_CASE("copy moves a range between buffers") {
    test::glContext();
    auto random = test::generator(3);
    const std::vector<std::uint8_t> bytes = test::randomBytes(random, 4099);
    Buffer source(4099, bytes.data());
    Buffer target(5000);
    target.clear(0xFF);
    target.copyFrom(source, 3001, 7, 11);
    const auto back = target.read<std::uint8_t>();
    for (std::size_t i = 0; i < back.size(); ++i) {
      const std::uint8_t expected = (i >= 11 && i < 3012) ? bytes[i - 11 + 7] : 0xFF;
      REQUIRE(back[i] == expected);
    }
  }

  TEST_CASE("buffers are move-only owners") {
    test::glContext();
    Buffer first(16);
    const unsigned id = first.id();
    Buffer second = std::move(first);
    CHECK(second.id() == id);
    CHECK(first.id() == 0u);  // NOLINT(bugprone-use-after-move): moved-from state is specified
    CHECK(second.bytes() == 16u);
  }

  TEST_CASE("an upload ring delivers bytes exactly, across slot edges, wrap-arounds and offsets") {
    test::glContext();
    if (!Buffer::hostVisibleAvailable()) {  // GLNET_MINIMUM_DEVICE: the ring refuses clearly, and uploads take glBufferSubData
      CHECK_THROWS_WITH_AS(UploadRing(64, 3), doctest::Contains("GL_EXT_buffer_storage on ES"), Error);
      return;
    }
    auto random = test::generator(5);
    for (const unsigned copyThreads : {1u, 3u}) {
      CAPTURE(copyThreads);
      // Slots of 61 bytes, rounded up to 64, three of them, so that one upload spans many slots and reuses each several times.
      UploadRing ring(61, 3, copyThreads);
      Buffer target(5003);
      target.clear(0xEE);
      std::vector<std::uint8_t> expected(5003, 0xEE);
      for (const auto& place : {std::pair<std::size_t, std::size_t>{0, 1}, {1, 63}, {7, 64}, {100, 65}, {211, 1000},
                                {2048, 2955}, {5002, 1}}) {
        const std::size_t offset = place.first, size = place.second;  // named copies: CAPTURE takes them by reference
        CAPTURE(offset);
        CAPTURE(size);
        std::vector<std::uint8_t> bytes = test::randomBytes(random, size);
        ring.upload(target, bytes.data(), size, offset);
        std::copy(bytes.begin(), bytes.end(), expected.begin() + static_cast<std::ptrdiff_t>(offset));
        std::fill(bytes.begin(), bytes.end(), 0x11);  // the caller's memory is free once upload returns
      }
      const auto back = target.read<std::uint8_t>();
      CHECK(std::memcmp(back.data(), expected.data(), expected.size()) == 0);
    }
  }

  TEST_CASE("images upload the same bytes through the staging ring and through glBufferSubData") {
    test::glContext();
    auto random = test::generator(6);
    // 6007 × 785 bytes pass 4 MiB, so they take the ring, across two slots.
    for (const std::size_t count : {std::size_t{1}, std::size_t{3}, std::size_t{6007}}) {
      CAPTURE(count);
      const std::vector<std::uint8_t> pixels = test::randomBytes(random, count * 785);
      GpuImages staged(count, 785), plain(count, 785, UploadPath::plain);
      CHECK(staged.staging.has_value() == (Buffer::hostVisibleAvailable() && count == 6007));
      CHECK_FALSE(plain.staging.has_value());
      for (GpuImages* images : {&staged, &plain}) {
        images->pixels.fill(0xDEADBEEFu);
        images->upload(pixels);
        const auto back = images->pixels.read<std::uint8_t>();
        REQUIRE(back.size() == (count * 785 + 3) / 4 * 4);
        CHECK(std::memcmp(back.data(), pixels.data(), pixels.size()) == 0);
        for (std::size_t i = pixels.size(); i < back.size(); ++i) CHECK(back[i] == 0);  // the last word completed with zeros
      }
    }
  }

  TEST_CASE("a host mirror pulls a buffer's bytes, lets the host change them in place, and pushes them back, whole or in part") {
    test::glContext();
    auto random = test::generator(8);
    const std::vector<std::uint8_t> bytes = test::randomBytes(random, 4 * 1001);
    Buffer device = Buffer::of(bytes);
    HostMirror mirror(device.bytes());
    mirror.startPull(device, 0, device.bytes()).wait();
    auto* host = static_cast<std::uint8_t*>(mirror.data());
    CHECK(std::memcmp(host, bytes.data(), bytes.size()) == 0);
    for (std::size_t i = 0; i < bytes.size(); ++i) host[i] = static_cast<std::uint8_t>(host[i] ^ 0x5A);
    device.fill(0xDEADBEEFu);
    mirror.push(device);
    const auto back = device.read<std::uint8_t>();
    for (std::size_t i = 0; i < bytes.size(); ++i) REQUIRE(back[i] == static_cast<std::uint8_t>(bytes[i] ^ 0x5A));
    // A part: bytes [1000, 3000) alone reach the device; the poison around them stays.
    device.fill(0xDEADBEEFu);
    mirror.push(device, 1000, 2000);
    const auto part = device.read<std::uint8_t>();
    const std::uint32_t poison = 0xDEADBEEFu;
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      const bool inside = i >= 1000 && i < 3000;
      REQUIRE(part[i] == (inside ? static_cast<std::uint8_t>(bytes[i] ^ 0x5A) : reinterpret_cast<const std::uint8_t*>(&poison)[i % 4]));
    }
  }
}

