#include "gl/Context.h"

#include "base/check.h"
#include "gl/GlCheck.h"
#include "base/log.h"

#include <glad/egl.h>
#include <glad/gl.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace glnet {
namespace {

bool hasToken(const char* list, const char* token) {
  if (!list) return false;
  std::istringstream words(list);
  std::string word;
  while (words >> word) {
    if (word == token) return true;
  }
  return false;
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

std::string eglErrorName(EGLint error) {
  switch (error) {
    case EGL_NOT_INITIALIZED: return "EGL_NOT_INITIALIZED";
    case EGL_BAD_ACCESS: return "EGL_BAD_ACCESS";
    case EGL_BAD_ALLOC: return "EGL_BAD_ALLOC";
    case EGL_BAD_ATTRIBUTE: return "EGL_BAD_ATTRIBUTE";
    case EGL_BAD_CONFIG: return "EGL_BAD_CONFIG";
    case EGL_BAD_CONTEXT: return "EGL_BAD_CONTEXT";
    case EGL_BAD_DISPLAY: return "EGL_BAD_DISPLAY";
    case EGL_BAD_MATCH: return "EGL_BAD_MATCH";
    case EGL_BAD_PARAMETER: return "EGL_BAD_PARAMETER";
    default: {
      std::ostringstream hex;
      hex << "EGL error 0x" << std::hex << error;
      return hex.str();
    }
  }
}

GLADapiproc loadGlFunction(const char* name) { return reinterpret_cast<GLADapiproc>(eglGetProcAddress(name)); }

void GLAD_API_PTR forwardDebugMessage(GLenum source, GLenum type, GLuint id, GLenum severity, GLsizei,
                                      const GLchar* text, const void*) {
  const std::string message = "GL debug (id " + std::to_string(id) + "): " + text;
  // Compile errors reach the user through Program's exception, with file names and lines.
  if (source == GL_DEBUG_SOURCE_SHADER_COMPILER) {
    log::debug(message);
  } else if (type == GL_DEBUG_TYPE_ERROR || severity == GL_DEBUG_SEVERITY_HIGH) {
    log::error(message);
  } else if (severity == GL_DEBUG_SEVERITY_MEDIUM) {
    log::info(message);
  } else {
    log::debug(message);
  }
}

// One EGL display with a GL context on it, made while enumerating so each device can be described.
struct Candidate {
  DeviceInfo info;
  EGLDisplay display = EGL_NO_DISPLAY;
  EGLContext context = EGL_NO_CONTEXT;

  // EGL hands out one display per device, so a display another context still uses must not be terminated.
  void release(EGLDisplay inUse = EGL_NO_DISPLAY) {
    if (display == EGL_NO_DISPLAY) return;
    if (eglGetCurrentContext && eglGetCurrentContext() == context) eglMakeCurrent(display, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
    if (context != EGL_NO_CONTEXT) eglDestroyContext(display, context);
    if (display != inUse) eglTerminate(display);
    display = EGL_NO_DISPLAY;
    context = EGL_NO_CONTEXT;
  }
};

// The oldest version of each API that has compute shaders.
constexpr int requiredMajor(Api api) { return api == Api::gles ? 3 : 4; }
constexpr int requiredMinor(Api api) { return api == Api::gles ? 1 : 3; }

std::string requiredName(Api api) {
  return api == Api::gles ? "an OpenGL ES 3.1 context" : "an OpenGL 4.3 core context";
}

EGLContext createContext(EGLDisplay display, Api api, bool debug, bool versioned, bool robust) {
  EGLConfig config = EGL_NO_CONFIG_KHR;
  if (!hasToken(eglQueryString(display, EGL_EXTENSIONS), "EGL_KHR_no_config_context")) {
    const EGLint renderable = api == Api::gles ? EGL_OPENGL_ES3_BIT : EGL_OPENGL_BIT;
    const EGLint wanted[] = {EGL_RENDERABLE_TYPE, renderable, EGL_SURFACE_TYPE, EGL_PBUFFER_BIT, EGL_NONE};
    EGLint count = 0;
    if (!eglChooseConfig(display, wanted, &config, 1, &count) || count == 0) return EGL_NO_CONTEXT;
  }
  std::vector<EGLint> attributes;
  // A robust context reports a GPU reset (throwIfContextLost) where one without would hang or crash.
  // EGL 1.5 has the attribute for desktop GL; ES takes EXT_create_context_robustness's.
  if (robust) {
    attributes = {api == Api::gles ? EGL_CONTEXT_OPENGL_RESET_NOTIFICATION_STRATEGY_EXT : EGL_CONTEXT_OPENGL_RESET_NOTIFICATION_STRATEGY,
                  EGL_LOSE_CONTEXT_ON_RESET};
  }
  if (versioned) {
    attributes.insert(attributes.end(), {EGL_CONTEXT_MAJOR_VERSION, requiredMajor(api), EGL_CONTEXT_MINOR_VERSION, requiredMinor(api)});
    if (api == Api::gl) attributes.insert(attributes.end(), {EGL_CONTEXT_OPENGL_PROFILE_MASK, EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT});
    if (debug) attributes.insert(attributes.end(), {EGL_CONTEXT_OPENGL_DEBUG, EGL_TRUE});
  } else if (api == Api::gles) {
    attributes.insert(attributes.end(), {EGL_CONTEXT_CLIENT_VERSION, 2});
  }
  attributes.push_back(EGL_NONE);
  return eglCreateContext(display, config, EGL_NO_CONTEXT, attributes.data());
}

// The loader of the API's functions; the merged GLAD loader fills one table for both, and aliases
// (glBufferStorageEXT for glBufferStorage, ...) resolve the ES extension entry points to the core names.
int loadApi(Api api) { return api == Api::gles ? gladLoadGLES2(loadGlFunction) : gladLoadGL(loadGlFunction); }

// Initializes the display, makes a context of `api` current on it, and fills in the description.
void probe(Candidate& candidate, Api api, bool debug) {
  DeviceInfo& info = candidate.info;
  EGLint eglMajor = 0, eglMinor = 0;
  if (!eglInitialize(candidate.display, &eglMajor, &eglMinor)) {
    info.problem = "eglInitialize failed (" + eglErrorName(eglGetError()) + ")";
    candidate.display = EGL_NO_DISPLAY;
    return;
  }
  // Without an initialized display GLAD can only see EGL 1.0; load the rest against this one.
  gladLoaderLoadEGL(candidate.display);
  if (const char* vendor = eglQueryString(candidate.display, EGL_VENDOR)) info.eglVendor = vendor;
  if (!eglBindAPI(api == Api::gles ? EGL_OPENGL_ES_API : EGL_OPENGL_API)) {
    info.problem = api == Api::gles ? "the EGL driver has no OpenGL ES" : "the EGL driver has no desktop OpenGL";
    return;
  }
  const bool robustness = api == Api::gl ? (eglMajor > 1 || eglMinor >= 5)
                                         : hasToken(eglQueryString(candidate.display, EGL_EXTENSIONS), "EGL_EXT_create_context_robustness");
  candidate.context = robustness ? createContext(candidate.display, api, debug, true, true) : EGL_NO_CONTEXT;
  if (candidate.context == EGL_NO_CONTEXT) candidate.context = createContext(candidate.display, api, debug, true, false);
  const bool compatible = candidate.context != EGL_NO_CONTEXT;
  if (!compatible) candidate.context = createContext(candidate.display, api, false, false, false);
  if (candidate.context == EGL_NO_CONTEXT) {
    info.problem = "could not create " + std::string(api == Api::gles ? "an OpenGL ES" : "an OpenGL") + " context (" +
                   eglErrorName(eglGetError()) + ")";
    return;
  }
  if (!eglMakeCurrent(candidate.display, EGL_NO_SURFACE, EGL_NO_SURFACE, candidate.context)) {
    info.problem = "could not make a surfaceless context current (" + eglErrorName(eglGetError()) +
                   "); the driver lacks EGL_KHR_surfaceless_context";
    return;
  }
  const int version = loadApi(api);
  const auto text = [](GLenum name) {
    const auto* value = reinterpret_cast<const char*>(glGetString(name));
    return value ? std::string(value) : std::string();
  };
  info.renderer = text(GL_RENDERER);
  info.glVendor = text(GL_VENDOR);
  info.glVersion = text(GL_VERSION);
  info.shadingLanguageVersion = text(GL_SHADING_LANGUAGE_VERSION);
  info.glMajor = GLAD_VERSION_MAJOR(version);
  info.glMinor = GLAD_VERSION_MINOR(version);
  const std::string name = lower(info.renderer);
  info.software = info.software || name.find("llvmpipe") != std::string::npos ||
                  name.find("softpipe") != std::string::npos || name.find("swiftshader") != std::string::npos;
  if (version == 0) {
    info.problem = "could not load OpenGL functions";
  } else if (!compatible || version < GLAD_MAKE_VERSION(requiredMajor(api), requiredMinor(api))) {
    info.problem = "only " + std::string(api == Api::gles ? "OpenGL ES " : "OpenGL ") + std::to_string(info.glMajor) +
                   "." + std::to_string(info.glMinor) + " (glnet needs " + requiredName(api) + " with compute shaders)";
  }
  eglMakeCurrent(candidate.display, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
}

void loadEgl() {
  if (!gladLoaderLoadEGL(EGL_NO_DISPLAY)) {
    throw Error("could not load libEGL.so.1: install libegl1 and a driver (libegl-mesa0, or your GPU vendor's)");
  }
}

std::vector<Candidate> enumerate(Api api, bool debug) {
  const char* clientExtensions = eglQueryString(EGL_NO_DISPLAY, EGL_EXTENSIONS);
  std::vector<Candidate> candidates;
  // GLVND advertises EGL_EXT_device_base, which is device_enumeration plus device_query.
  if ((hasToken(clientExtensions, "EGL_EXT_device_enumeration") || hasToken(clientExtensions, "EGL_EXT_device_base")) &&
      hasToken(clientExtensions, "EGL_EXT_platform_device") && eglQueryDevicesEXT) {
    EGLint count = 0;
    eglQueryDevicesEXT(0, nullptr, &count);
    std::vector<EGLDeviceEXT> devices(static_cast<std::size_t>(std::max(count, 0)));
    if (count > 0) eglQueryDevicesEXT(count, devices.data(), &count);
    for (EGLDeviceEXT device : devices) {
      Candidate candidate;
      candidate.info.platform = "device";
      candidate.info.software =
          hasToken(eglQueryDeviceStringEXT ? eglQueryDeviceStringEXT(device, EGL_EXTENSIONS) : nullptr,
                   "EGL_MESA_device_software");
      candidate.display = eglGetPlatformDisplayEXT(EGL_PLATFORM_DEVICE_EXT, device, nullptr);
      candidates.push_back(candidate);
    }
  }
  if (candidates.empty()) {
    Candidate candidate;
    if (hasToken(clientExtensions, "EGL_MESA_platform_surfaceless") && eglGetPlatformDisplayEXT) {
      candidate.info.platform = "surfaceless";
      candidate.display = eglGetPlatformDisplayEXT(EGL_PLATFORM_SURFACELESS_MESA, EGL_DEFAULT_DISPLAY, nullptr);
    } else {
      candidate.info.platform = "default";
      candidate.display = eglGetDisplay(EGL_DEFAULT_DISPLAY);
    }
    candidates.push_back(candidate);
  }
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    candidates[i].info.index = static_cast<int>(i);
    if (candidates[i].display == EGL_NO_DISPLAY) {
      candidates[i].info.problem = "no EGL display for this device";
      continue;
    }
    probe(candidates[i], api, debug);
    log::debug("device " + std::to_string(i) + ": " + candidates[i].info.renderer + " " +
               candidates[i].info.glVersion + (candidates[i].info.usable() ? "" : " (" + candidates[i].info.problem + ")"));
  }
  return candidates;
}

std::string describeAll(const std::vector<Candidate>& candidates) {
  std::string list;
  for (const Candidate& candidate : candidates) {
    const DeviceInfo& info = candidate.info;
    if (!list.empty()) list += "; ";
    list += std::to_string(info.index) + ": " + (info.renderer.empty() ? info.eglVendor : info.renderer);
    if (!info.usable()) list += " (" + info.problem + ")";
  }
  return list.empty() ? "none" : list;
}

std::size_t choose(const std::vector<Candidate>& candidates, const std::string& selector, int localRank, Api api) {
  if (selector.empty()) {
    for (const bool software : {false, true}) {
      std::vector<std::size_t> usable;
      for (std::size_t i = 0; i < candidates.size(); ++i) {
        if (candidates[i].info.usable() && candidates[i].info.software == software) usable.push_back(i);
      }
      if (!usable.empty()) return usable[static_cast<std::size_t>(std::max(localRank, 0)) % usable.size()];
    }
    throw Error("no EGL device offers " + requiredName(api) + " with compute shaders (devices: " + describeAll(candidates) +
                "); install a GPU driver with EGL, or Mesa (libegl-mesa0 libgl1-mesa-dri) for llvmpipe" +
                ", or try " + optionSetting("api", api == Api::gles ? "gl" : "gles"));
  }
  const bool numeric = std::all_of(selector.begin(), selector.end(), [](unsigned char c) { return std::isdigit(c); });
  std::size_t found = candidates.size();
  if (numeric) {
    const unsigned long index = std::strtoul(selector.c_str(), nullptr, 10);
    if (index >= candidates.size()) {
      throw Error("device " + selector + " is out of range: there are " + std::to_string(candidates.size()) +
                  " devices (" + describeAll(candidates) + ")");
    }
    found = index;
  } else {
    const std::string wanted = lower(selector);
    for (std::size_t i = 0; i < candidates.size() && found == candidates.size(); ++i) {
      if (lower(candidates[i].info.renderer).find(wanted) != std::string::npos ||
          lower(candidates[i].info.eglVendor).find(wanted) != std::string::npos) {
        found = i;
      }
    }
    if (found == candidates.size()) {
      throw Error("no device matches '" + selector + "' (devices: " + describeAll(candidates) +
                  "); give an index or part of the renderer name");
    }
  }
  if (!candidates[found].info.usable()) {
    throw Error("device " + std::to_string(found) + " (" + candidates[found].info.renderer +
                ") cannot run glnet: " + candidates[found].info.problem);
  }
  return found;
}

// A context must be current on this thread only while its owner lives; restores whatever was current.
class CurrentContextGuard {
 public:
  CurrentContextGuard() : api_(currentApi()), limits_(currentLimits()) {
    // GLAD loads eglGetCurrentContext (EGL 1.4) only once a display was initialized; before that,
    // nothing of ours can be current.
    if (!eglGetCurrentContext) return;
    display_ = eglGetCurrentDisplay();
    draw_ = eglGetCurrentSurface(EGL_DRAW);
    read_ = eglGetCurrentSurface(EGL_READ);
    context_ = eglGetCurrentContext();
  }
  EGLDisplay display() const { return display_; }
  void restore() const {
    if (context_ != EGL_NO_CONTEXT) {
      eglBindAPI(api_ == Api::gles ? EGL_OPENGL_ES_API : EGL_OPENGL_API);
      eglMakeCurrent(display_, draw_, read_, context_);
      loadApi(api_);
      setCurrentApi(api_);
      setCurrentLimits(limits_);
    }
  }

 private:
  Api api_;
  Limits limits_;
  EGLDisplay display_ = EGL_NO_DISPLAY;
  EGLSurface draw_ = EGL_NO_SURFACE, read_ = EGL_NO_SURFACE;
  EGLContext context_ = EGL_NO_CONTEXT;
};

}  // namespace

std::vector<std::vector<ApiOffer>> surveyApis() {
  loadEgl();
  const CurrentContextGuard previous;
  std::vector<std::vector<ApiOffer>> offers;
  for (const Api api : {Api::gl, Api::gles}) {
    std::vector<Candidate> candidates = enumerate(api, false);
    if (offers.size() < candidates.size()) offers.resize(candidates.size());
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      Candidate& candidate = candidates[i];
      ApiOffer offer;
      offer.api = api;
      offer.version = candidate.info.glVersion;
      offer.shadingLanguageVersion = candidate.info.shadingLanguageVersion;
      offer.problem = candidate.info.problem;
      if (candidate.info.usable()) {
        eglBindAPI(api == Api::gles ? EGL_OPENGL_ES_API : EGL_OPENGL_API);
        if (eglMakeCurrent(candidate.display, EGL_NO_SURFACE, EGL_NO_SURFACE, candidate.context) && loadApi(api)) {
          offer.limits = queryLimits(api);
        }
      }
      candidate.release(previous.display());
      offers[i].push_back(offer);
    }
  }
  previous.restore();
  return offers;
}

Context::Context(const ContextOptions& options) {
  if (options.api) {
    api_ = *options.api;
  } else if (const char* fromEnvironment = std::getenv("GLNET_API"); fromEnvironment && *fromEnvironment) {
    api_ = parseApi(fromEnvironment);
  }
  const auto start = std::chrono::steady_clock::now();
  std::string selector = options.device;
  if (selector.empty()) {
    if (const char* fromEnvironment = std::getenv("GLNET_DEVICE")) selector = fromEnvironment;
  }
  loadEgl();
  const CurrentContextGuard previous;
  std::vector<Candidate> candidates = enumerate(api_, options.debug);
  std::size_t chosen = 0;
  try {
    chosen = choose(candidates, selector, options.localRank, api_);
  } catch (...) {
    for (Candidate& candidate : candidates) candidate.release(previous.display());
    previous.restore();
    throw;
  }
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (i != chosen) candidates[i].release();
    devices_.push_back(candidates[i].info);
  }
  chosen_ = chosen;
  display_ = candidates[chosen].display;
  context_ = candidates[chosen].context;
  eglBindAPI(api_ == Api::gles ? EGL_OPENGL_ES_API : EGL_OPENGL_API);
  if (!eglMakeCurrent(display_, EGL_NO_SURFACE, EGL_NO_SURFACE, context_) || !loadApi(api_)) {
    candidates[chosen].release();
    throw Error("could not make the GL context of device " + std::to_string(chosen) + " current");
  }
  GLint count = 0;
  glGetIntegerv(GL_NUM_EXTENSIONS, &count);
  for (GLint i = 0; i < count; ++i) {
    extensions_.insert(reinterpret_cast<const char*>(glGetStringi(GL_EXTENSIONS, static_cast<GLuint>(i))));
  }
  // Debug output is core in GL 4.3 and ES 3.2; an ES 3.1 device may have no KHR_debug at all.
  if (options.debug && glDebugMessageCallback) {
    glEnable(GL_DEBUG_OUTPUT);
    glEnable(GL_DEBUG_OUTPUT_SYNCHRONOUS);
    glDebugMessageCallback(forwardDebugMessage, nullptr);
  }
  limits_ = queryLimits(api_);
  const char* minimum = std::getenv("GLNET_MINIMUM_DEVICE");
  if (options.minimumDevice || (minimum && std::string(minimum) == "1")) limits_ = minimumEsLimits(limits_);
  // Programs started one after another (Program::start) then compile on as many of the driver's threads as it has.
  if (limits_.parallelCompile) glMaxShaderCompilerThreadsKHR(0xFFFFFFFFu);
  setCurrentApi(api_);
  setCurrentLimits(limits_);
  creationMilliseconds_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  log::info("using device " + std::to_string(chosen) + ": " + device().renderer + " (" + device().glVersion + ")");
}

Context::~Context() {
  eglBindAPI(api_ == Api::gles ? EGL_OPENGL_ES_API : EGL_OPENGL_API);
  eglMakeCurrent(display_, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
  eglDestroyContext(display_, context_);
  eglTerminate(display_);
  eglReleaseThread();
}

std::vector<std::pair<std::string, bool>> Context::optionalExtensions() const {
  std::vector<std::pair<std::string, bool>> result;
  // Under ES, program binaries and debug output are core (3.0, 3.2) and the rest have EXT names.
  const std::vector<const char*> names =
      api_ == Api::gles ? std::vector<const char*>{"GL_EXT_buffer_storage", "GL_EXT_disjoint_timer_query", "GL_KHR_debug",
                                                   "GL_KHR_parallel_shader_compile", "GL_KHR_shader_subgroup"}
                        : std::vector<const char*>{"GL_ARB_buffer_storage", "GL_ARB_get_program_binary", "GL_KHR_debug",
                                                   "GL_KHR_parallel_shader_compile", "GL_KHR_shader_subgroup",
                                                   "GL_NV_shader_atomic_float"};
  for (const char* name : names) result.emplace_back(name, hasExtension(name));
  return result;
}

}  // namespace glnet
