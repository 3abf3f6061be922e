// Whole input files read with the checks every reader needs: a regular file (not a directory, a device such
// as /dev/zero, or a pipe) of bounded size, so no path a user passes can make glnet read without end.
#pragma once

#include <cstdint>
#include <string>

namespace glnet {

// The bytes of `path`; throws glnet::Error naming the path when it is missing, not a regular file, larger
// than `largestBytes`, or unreadable.
std::string readRegularFile(const std::string& path, std::uint64_t largestBytes);

}  // namespace glnet
