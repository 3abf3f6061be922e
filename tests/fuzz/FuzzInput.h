// libFuzzer harnesses feed glnet's parsers the way the commands do: the bytes become a file (the parsers
// take paths, as the commands give them), and only glnet::Error may come out; anything else (another
// exception, a crash, a sanitizer report, an allocation past -malloc_limit_mb) is a finding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

#include <unistd.h>

namespace glnet::fuzz {

// A file holding `data`, rewritten for each input: /dev/shm (memory) when it exists, else /tmp.
inline std::string inputFile(const std::uint8_t* data, std::size_t size, const std::string& suffix) {
  static const std::string path = std::string(access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp") + "/glnet-fuzz-" +
                                  std::to_string(getpid()) + suffix;
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

}  // namespace glnet::fuzz
