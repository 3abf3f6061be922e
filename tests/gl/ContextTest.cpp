#include "gl/Context.h"
#include "base/check.h"
#include "support/GlContext.h"

#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

using namespace glnet;

TEST_SUITE("gl") {
  TEST_CASE("the default device gives a context of the API asked for (GLNET_API), with at least its compute limits") {
    const Context& context = test::glContext();
    const DeviceInfo& device = context.device();
    INFO("device: " << device.renderer << " " << device.glVersion);
    CHECK(device.usable());
    CHECK(context.api() == currentApi());
    CHECK(!device.renderer.empty());
    const Limits& limits = context.limits();
    const bool minimum = [] {
      const char* value = std::getenv("GLNET_MINIMUM_DEVICE");
      return value && std::string(value) == "1";
    }();
    if (context.api() == Api::gles) {
      // ES 3.1 requires these; the version string starts "OpenGL ES" (ES 3.1 specification, 20.2).
      CHECK(device.glVersion.rfind("OpenGL ES ", 0) == 0);
      CHECK((device.glMajor > 3 || (device.glMajor == 3 && device.glMinor >= 1)));
    } else {
      CHECK(device.glVersion.rfind("OpenGL ES", 0) == std::string::npos);
      CHECK((device.glMajor > 4 || (device.glMajor == 4 && device.glMinor >= 3)));
    }
    const bool es = context.api() == Api::gles || minimum;
    CHECK(limits.maxWorkGroupCount[0] >= 65535);
    CHECK(limits.maxWorkGroupSize[0] >= (es ? 128 : 1024));
    CHECK(limits.maxWorkGroupInvocations >= (es ? 128 : 1024));
    CHECK(limits.maxSharedMemoryBytes >= (es ? 16384 : 32768));
    CHECK(limits.maxStorageBlockBytes >= (es ? (1 << 27) : (1 << 24)));
    CHECK(limits.maxComputeStorageBlocks >= 8);
    // Mesa's EGL makes robust contexts of both APIs: a GPU reset would be reported, not hang the process.
    if (device.renderer.find("llvmpipe") != std::string::npos) CHECK(limits.resetNotification);
    CHECK_NOTHROW(throwIfContextLost());
    if (minimum) {
      CHECK(limits.maxWorkGroupInvocations == 128);
      CHECK(limits.maxSharedMemoryBytes == 16384);
      CHECK(limits.groupSize() == 128);
      CHECK(limits.timestampBits == 0);
      CHECK(!limits.persistentMaps);
    } else {
      CHECK(limits.groupSize() == 256);
    }
  }

  TEST_CASE("an unknown device name is a clear error that lists the devices, and the context survives") {
    Context& context = test::glContext();
    ContextOptions options;
    options.device = "no-such-gpu-anywhere";
    try {
      Context other(options);
      FAIL("expected glnet::Error");
    } catch (const Error& error) {
      const std::string message = error.what();
      CHECK(message.find("no device matches 'no-such-gpu-anywhere'") != std::string::npos);
      CHECK(message.find(context.device().renderer) != std::string::npos);
    }
    options.device = "4096";
    CHECK_THROWS_WITH_AS(Context{options}, doctest::Contains("out of range"), Error);
    // The failed attempts must leave the shared context current and working.
    CHECK(context.device().usable());
  }
}
