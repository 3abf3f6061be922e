// Work-group counts shared by the op bindings.
#pragma once

#include "gl/Program.h"
#include "plan/Plan.h"

#include <cstdint>
#include <string>

namespace glnet {

// A linear dispatch of `program` over `count` invocations (the shader bounds-checks LINEAR_INVOCATION_INDEX); its
// groups are counted when the program has compiled (Dispatch::invocations).
inline Dispatch linearDispatch(const Program& program, const std::string& label, std::uint64_t count) {
  Dispatch dispatch;
  dispatch.program = &program;
  dispatch.label = label;
  dispatch.invocations = count;
  dispatch.linear = true;
  return dispatch;
}

}  // namespace glnet
