// GL_CHECK(call): a GL call whose failure must be named, thrown as glnet::Error with the call and file:line (the third
// tier of base/check.h's errors, here because base/ holds no GL).
#pragma once

namespace glnet {

void throwIfGlError(const char* call, const char* file, int line);
const char* glErrorName(unsigned error);

}  // namespace glnet

#define GL_CHECK(call)                                  \
  do {                                                  \
    call;                                               \
    ::glnet::throwIfGlError(#call, __FILE__, __LINE__); \
  } while (false)
