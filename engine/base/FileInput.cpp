#include "base/FileInput.h"

#include "base/check.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sys/stat.h>

namespace glnet {

std::string readRegularFile(const std::string& path, std::uint64_t largestBytes) {
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0) {
    if (errno == ENOENT) throw FileNotFound(path + ": no such file");
    throw Error(path + ": cannot open (" + std::string(std::strerror(errno)) + ")");
  }
  if (S_ISDIR(status.st_mode)) throw Error(path + ": is a directory; give a file");
  if (!S_ISREG(status.st_mode)) throw Error(path + ": not a regular file (a device or a pipe); give a file");
  const auto size = static_cast<std::uint64_t>(status.st_size);
  if (size > largestBytes) {
    throw Error(path + ": " + std::to_string(size) + " bytes; glnet reads files of at most " + std::to_string(largestBytes) + " bytes here");
  }
  std::ifstream stream(path, std::ios::binary);
  if (!stream) throw Error(path + ": cannot open (no permission)");
  std::string bytes(static_cast<std::size_t>(size), '\0');
  stream.read(bytes.data(), static_cast<std::streamsize>(size));
  // The file may shrink or grow between stat and read; what was read is what the size said, or an error.
  if (static_cast<std::uint64_t>(stream.gcount()) != size || stream.peek() != std::char_traits<char>::eof()) {
    throw Error(path + ": changed size while being read");
  }
  return bytes;
}

}  // namespace glnet
