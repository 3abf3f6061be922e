// Work-group counts shared by the op bindings.
#pragma once

#include "gl/Program.h"
#include "plan/Plan.h"

#include <array>
#include <cstdint>

namespace glnet {

// Groups along x covering `count` invocations of a 1-D program.
inline std::array<std::uint32_t, 3> linearGroups(std::uint64_t count, const Program& program) {
  const auto size = static_cast<std::uint64_t>(program.localSize()[0]);
  return {static_cast<std::uint32_t>((count + size - 1) / size), 1, 1};
}

// A linear dispatch of `program` over `count` invocations (the shader bounds-checks LINEAR_INVOCATION_INDEX).
inline Dispatch linearDispatch(const Program& program, const std::string& label, std::uint64_t count) {
  Dispatch dispatch;
  dispatch.program = &program;
  dispatch.label = label;
  dispatch.groups = linearGroups(count, program);
  dispatch.linear = true;
  return dispatch;
}

}  // namespace glnet
