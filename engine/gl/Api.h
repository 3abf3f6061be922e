// Which OpenGL API a context speaks: desktop OpenGL 4.3 core, or OpenGL ES 3.1 (what embedded GPUs offer).
#pragma once

#include <string>

namespace glnet {

enum class Api { gl, gles };

// "gl" or "gles", as `--api` and GLNET_API spell them.
const char* apiName(Api api);
// Throws glnet::Error naming the accepted values.
Api parseApi(const std::string& text);
// The API of the context glnet last made current in this process (set by Context); gl before any.
Api currentApi();
void setCurrentApi(Api api);

}  // namespace glnet
