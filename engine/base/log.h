// The engine's only way to print. Apps choose the level (--verbose, GLNET_DEBUG=1); messages go to stderr.
#pragma once

#include <string>

namespace glnet::log {

enum class Level { error = 0, warn = 1, info = 2, debug = 3 };

void setLevel(Level level);
Level level();
bool enabled(Level level);
// Raises the level to debug when GLNET_DEBUG is set to anything but "0" or "".
void readEnvironment();

void write(Level level, const std::string& message);
inline void error(const std::string& message) { write(Level::error, message); }
inline void warn(const std::string& message) { write(Level::warn, message); }
inline void info(const std::string& message) { write(Level::info, message); }
inline void debug(const std::string& message) { write(Level::debug, message); }

}  // namespace glnet::log
