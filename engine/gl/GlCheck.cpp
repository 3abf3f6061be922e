#include "gl/GlCheck.h"

#include "base/check.h"

#include <glad/gl.h>

#include <string>

namespace glnet {

const char* glErrorName(unsigned error) {
  switch (error) {
    case GL_INVALID_ENUM: return "GL_INVALID_ENUM";
    case GL_INVALID_VALUE: return "GL_INVALID_VALUE";
    case GL_INVALID_OPERATION: return "GL_INVALID_OPERATION";
    case GL_INVALID_FRAMEBUFFER_OPERATION: return "GL_INVALID_FRAMEBUFFER_OPERATION";
    case GL_OUT_OF_MEMORY: return "GL_OUT_OF_MEMORY";
    case GL_STACK_OVERFLOW: return "GL_STACK_OVERFLOW";
    case GL_STACK_UNDERFLOW: return "GL_STACK_UNDERFLOW";
    default: return "unknown GL error";
  }
}

void throwIfGlError(const char* call, const char* file, int line) {
  const GLenum error = glGetError();
  if (error == GL_NO_ERROR) return;
  while (glGetError() != GL_NO_ERROR) {
  }
  throw Error(std::string(glErrorName(error)) + " from " + call + " at " + file + ":" + std::to_string(line));
}

}  // namespace glnet
