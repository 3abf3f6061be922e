// The one owner of the EGL display and GL context: device enumeration, selection, limits and extensions.
#pragma once

#include <array>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace glnet {

struct DeviceInfo {
  int index = 0;
  std::string platform;   // "device" (EGL_EXT_platform_device) or "surfaceless"/"default" fallbacks
  std::string eglVendor;
  std::string renderer;   // GL_RENDERER
  std::string glVendor;   // GL_VENDOR
  std::string glVersion;  // GL_VERSION
  int glMajor = 0;
  int glMinor = 0;
  bool software = false;
  std::string problem;    // why this device cannot run glnet; empty when usable
  bool usable() const { return problem.empty(); }
};

struct Limits {
  std::array<int, 3> maxWorkGroupSize{};
  std::array<int, 3> maxWorkGroupCount{};
  int maxWorkGroupInvocations = 0;
  std::int64_t maxSharedMemoryBytes = 0;
  std::int64_t maxStorageBlockBytes = 0;
  int maxComputeStorageBlocks = 0;
  int maxStorageBufferBindings = 0;
  int storageBufferOffsetAlignment = 0;
  int timestampBits = 0;
};

struct ContextOptions {
  // Index or case-insensitive substring of the renderer; empty means GLNET_DEVICE, then the default.
  std::string device;
  // One of several processes on a host (data-parallel ranks): with no device named, take the usable
  // hardware device numbered localRank modulo their count (software ones when there is no hardware one).
  int localRank = -1;
  // KHR_debug output to the logger, synchronous so messages point at the call that caused them.
  bool debug = false;
};

class Context {
 public:
  explicit Context(const ContextOptions& options = {});
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const std::vector<DeviceInfo>& devices() const { return devices_; }
  const DeviceInfo& device() const { return devices_[chosen_]; }
  const Limits& limits() const { return limits_; }
  bool hasExtension(const std::string& name) const { return extensions_.count(name) != 0; }
  // The optional extensions glnet uses when present, with whether this device has them.
  std::vector<std::pair<std::string, bool>> optionalExtensions() const;
  double creationMilliseconds() const { return creationMilliseconds_; }

 private:
  std::vector<DeviceInfo> devices_;
  std::size_t chosen_ = 0;
  Limits limits_;
  std::set<std::string> extensions_;
  void* display_ = nullptr;
  void* context_ = nullptr;
  double creationMilliseconds_ = 0;
};

}  // namespace glnet
