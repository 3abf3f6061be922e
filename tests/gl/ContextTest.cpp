#include "gl/Context.h"
#include "gl/check.h"
#include "support/GlContext.h"

#include <doctest/doctest.h>

#include <string>

using namespace glnet;

TEST_SUITE("gl") {
  TEST_CASE("the default device gives a GL 4.3 core context with compute limits") {
    const Context& context = test::glContext();
    const DeviceInfo& device = context.device();
    INFO("device: " << device.renderer << " " << device.glVersion);
    CHECK(device.usable());
    CHECK((device.glMajor > 4 || (device.glMajor == 4 && device.glMinor >= 3)));
    CHECK(!device.renderer.empty());
    const Limits& limits = context.limits();
    // GL 4.3 guarantees these minimums.
    CHECK(limits.maxWorkGroupCount[0] >= 65535);
    CHECK(limits.maxWorkGroupSize[0] >= 1024);
    CHECK(limits.maxWorkGroupInvocations >= 1024);
    CHECK(limits.maxSharedMemoryBytes >= 32768);
    CHECK(limits.maxStorageBlockBytes >= (1 << 24));
    CHECK(limits.maxComputeStorageBlocks >= 8);
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
