// The one owner of the EGL display and GL context: device enumeration, selection, limits and extensions.
#pragma once

#include "gl/Api.h"
#include "gl/Limits.h"

#include <array>
#include <cstdint>
#include <optional>
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
  std::string glVersion;  // GL_VERSION ("OpenGL ES 3.2 ..." under the ES API)
  std::string shadingLanguageVersion;  // GL_SHADING_LANGUAGE_VERSION
  int glMajor = 0;
  int glMinor = 0;
  bool software = false;
  std::string problem;    // why this device cannot run glnet; empty when usable
  bool usable() const { return problem.empty(); }
};

// What one API gives on one device: its version strings and the limits that constrain glnet, or why not.
struct ApiOffer {
  Api api = Api::gl;
  std::string version;                 // GL_VERSION
  std::string shadingLanguageVersion;  // GL_SHADING_LANGUAGE_VERSION
  Limits limits;
  std::string problem;  // empty when glnet can run under this API on this device
};

// For each EGL device (indexed as Context::devices() lists them), what desktop OpenGL and OpenGL ES give
// there: a context of each is made and released in turn; the caller's current context is kept.
std::vector<std::vector<ApiOffer>> surveyApis();


struct ContextOptions {
  // Desktop OpenGL 4.3 core or OpenGL ES 3.1; unset means GLNET_API, then gl.
  std::optional<Api> api;
  // Index or case-insensitive substring of the renderer; empty means GLNET_DEVICE, then the default.
  std::string device;
  // One of several processes on a host (data-parallel ranks): with no device named, take the usable
  // hardware device numbered localRank modulo their count (software ones when there is no hardware one).
  int localRank = -1;
  // KHR_debug output to the logger, synchronous so messages point at the call that caused them.
  bool debug = false;
  // Use only what every OpenGL ES 3.1 device offers (128 invocations per group, 16 KiB of shared memory,
  // no timer queries, no buffer storage; storage blocks down to the 8 that glnet's kernels need, where ES
  // guarantees 4) whatever this one has, to check that glnet fits its kernels to the limits and works
  // around missing extensions; GLNET_MINIMUM_DEVICE=1 sets it too.
  bool minimumDevice = false;
};

class Context {
 public:
  explicit Context(const ContextOptions& options = {});
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const std::vector<DeviceInfo>& devices() const { return devices_; }
  const DeviceInfo& device() const { return devices_[chosen_]; }
  Api api() const { return api_; }
  const Limits& limits() const { return limits_; }
  bool hasExtension(const std::string& name) const { return extensions_.count(name) != 0; }
  // The optional extensions glnet uses when present, with whether this device has them.
  std::vector<std::pair<std::string, bool>> optionalExtensions() const;
  double creationMilliseconds() const { return creationMilliseconds_; }

 private:
  std::vector<DeviceInfo> devices_;
  std::size_t chosen_ = 0;
  Api api_ = Api::gl;
  Limits limits_;
  std::set<std::string> extensions_;
  void* display_ = nullptr;
  void* context_ = nullptr;
  double creationMilliseconds_ = 0;
};

}  // namespace glnet
