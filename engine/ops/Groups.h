// Work-group counts shared by the op bindings.
#pragma once

#include "gl/Program.h"

#include <array>
#include <cstdint>

namespace glnet {

// Groups along x covering `count` invocations of a 1-D program.
inline std::array<std::uint32_t, 3> linearGroups(std::uint64_t count, const Program& program) {
  const auto size = static_cast<std::uint64_t>(program.localSize()[0]);
  return {static_cast<std::uint32_t>((count + size - 1) / size), 1, 1};
}

}  // namespace glnet
