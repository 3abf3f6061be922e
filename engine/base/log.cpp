#include "base/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace glnet::log {
namespace {
std::atomic<Level> currentLevel{Level::warn};
const char* levelName(Level level) {
  switch (level) {
    case Level::error: return "error";
    case Level::warn: return "warning";
    case Level::info: return "info";
    case Level::debug: return "debug";
  }
  return "";
}
}  // namespace

void setLevel(Level level) { currentLevel = level; }
Level level() { return currentLevel; }
bool enabled(Level level) { return static_cast<int>(level) <= static_cast<int>(currentLevel.load()); }

void readEnvironment() {
  const char* value = std::getenv("GLNET_DEBUG");
  if (value && *value && std::strcmp(value, "0") != 0) setLevel(Level::debug);
}

void write(Level level, const std::string& message) {
  if (!enabled(level)) return;
  std::fprintf(stderr, "glnet: %s: %s\n", levelName(level), message.c_str());
}

}  // namespace glnet::log
