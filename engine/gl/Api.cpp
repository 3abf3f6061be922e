#include "gl/Api.h"

#include "base/check.h"

#include <atomic>

namespace glnet {
namespace {
std::atomic<Api> current{Api::gl};
}  // namespace

const char* apiName(Api api) { return api == Api::gles ? "gles" : "gl"; }

Api parseApi(const std::string& text) {
  if (text == "gl") return Api::gl;
  if (text == "gles") return Api::gles;
  throw Error("unknown API '" + text + "': use gl (OpenGL 4.3 core) or gles (OpenGL ES 3.1)");
}

Api currentApi() { return current.load(std::memory_order_relaxed); }

void setCurrentApi(Api api) { current.store(api, std::memory_order_relaxed); }

}  // namespace glnet
