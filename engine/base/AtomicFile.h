// Files written whole or not at all.
#pragma once

#include <string>

namespace glnet {

// Writes `bytes` to `path` atomically: a sibling temporary file, flushed, then renamed over `path`, so a
// crash never leaves a torn file. Throws glnet::Error naming the path.
void writeFileAtomically(const std::string& path, const std::string& bytes);

// Throws glnet::Error when `path` could not be written later (its directory is missing or not writable),
// so long work can refuse to start instead of failing at its end.
void checkWritable(const std::string& path);

}  // namespace glnet
