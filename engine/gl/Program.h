// A move-only compute program built from shaders/<file> behind a prologue of injected #defines.
#pragma once

#include "numbers/KindList.h"

#include <array>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace glnet {

struct ShaderDefine {
  std::string name;
  std::string value;
};

// The define that tells a shader which kind of a list (numbers/KindList.h) to compile: POINTWISE, AXIS_OP, ... with
// the kind's number, which the shader compares with the list's names (`#if POINTWISE == POINTWISE_ERF`).
template <class Kind>
ShaderDefine kindDefine(Kind kind) {
  return {KindList<Kind>::define, std::to_string(kindNumber(kind))};
}

class Program;
// Finishes `programs`, each as soon as the driver has it ready (Program::ready), so that each one's readyAt is when its
// compile ended rather than when the one before it was waited for.
void finishPrograms(std::vector<const Program*> programs);

class Program {
 public:
  Program() = default;
  // Compiles the prologue of the current context's language (`#version 430 core`, or `#version 310 es` with
  // highp defaults and GLNET_ES defined), the defines, shaders/common.glsl, the `includes` (shared shader code such as
  // Gemm.glsl), then shaders/<file>. A compile error throws glnet::Error reading `file:line: message` with
  // the offending source line. Linked binaries are cached on disk (see binaryCacheDirectory) and reused
  // when the vendor, renderer, driver version and source match; any failure to use one compiles afresh.
  // When GLNET_SHADER_DUMP names a folder, the whole text is also written there once per API, compiled or
  // not (the glslang validation in tests/shaders reads them).
  static Program compute(const std::string& file, const std::vector<ShaderDefine>& defines = {},
                         const std::vector<std::string>& includes = {});
  // The same, but returns as soon as the driver has the compile and link (or the cached binary): where it has
  // GL_KHR_parallel_shader_compile, programs started one after another compile side by side (a driver compiles one
  // at a time for the thread that waits on it). Its first localSize() or finish() waits for it and throws what
  // compute would have thrown; a Plan finishes the programs it records before its first run.
  static Program start(const std::string& file, const std::vector<ShaderDefine>& defines = {},
                       const std::vector<std::string>& includes = {});
  ~Program();
  Program(Program&& other) noexcept;
  Program& operator=(Program&& other) noexcept;
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  // The GL name, valid from the start (what it runs is known once finished).
  unsigned id() const { return id_; }
  const std::string& name() const { return name_; }
  // Whether its compile and link are still the driver's (started and not yet finished).
  bool pending() const { return pending_ != nullptr; }
  // Waits for a started program's compile and link, checks them and caches its binary; nothing when done. A failure
  // throws glnet::Error, again at every later call.
  void finish() const;
  // Whether finish() would return (or throw) without waiting: true when the driver cannot tell (no
  // Limits::parallelCompile), or once its compile and link are done.
  bool ready() const;
  // The local_size_{x,y,z} the shader declared (finishes it).
  const std::array<int, 3>& localSize() const;
  // From its start until it was ready (programs started together overlap), or loaded from the binary cache.
  double compileMilliseconds() const;
  std::chrono::steady_clock::time_point startedAt() const { return startedAt_; }
  std::chrono::steady_clock::time_point readyAt() const;
  bool fromBinaryCache() const { return fromBinaryCache_; }

  // GLNET_CACHE_DIR, else $XDG_CACHE_HOME/glnet, else $HOME/.cache/glnet; empty when GLNET_CACHE=0 or no
  // location is known.
  static std::string binaryCacheDirectory();
  // A hash of the current context's vendor, renderer and driver version: what names the files cached for it (program
  // binaries, GEMM tunings), 16 hexadecimal digits. A context must be current.
  static std::string deviceCacheName();

 private:
  struct PendingLink;
  unsigned id_ = 0;
  std::string name_;
  mutable std::array<int, 3> localSize_{};
  std::chrono::steady_clock::time_point startedAt_{};
  mutable std::chrono::steady_clock::time_point readyAt_{};
  bool fromBinaryCache_ = false;
  mutable std::unique_ptr<PendingLink> pending_;
};

}  // namespace glnet
