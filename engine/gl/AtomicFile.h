// Files written whole or not at all.
#pragma once

#include <string>

namespace glnet {

// Writes `bytes` to `path` atomically: a sibling temporary file, flushed, then renamed over `path`, so a
// crash never leaves a torn file. Throws glnet::Error naming the path.
void writeFileAtomically(const std::string& path, const std::string& bytes);

}  // namespace glnet
