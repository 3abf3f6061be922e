#include "gl/AtomicFile.h"

#include "gl/check.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <unistd.h>

namespace glnet {

void writeFileAtomically(const std::string& path, const std::string& bytes) {
  const std::string temporary = path + ".tmp" + std::to_string(::getpid());
  {
    std::FILE* file = std::fopen(temporary.c_str(), "wb");
    if (!file) throw Error(path + ": cannot write (" + std::strerror(errno) + ")");
    const bool written = std::fwrite(bytes.data(), 1, bytes.size(), file) == bytes.size();
    const bool flushed = std::fflush(file) == 0 && ::fsync(fileno(file)) == 0;
    const bool closed = std::fclose(file) == 0;
    if (!written || !flushed || !closed) {
      std::remove(temporary.c_str());
      throw Error(path + ": write failed (disk full?)");
    }
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) {
    std::remove(temporary.c_str());
    throw Error(path + ": cannot rename the finished file into place (" + error.message() + ")");
  }
}

void checkWritable(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string directory = parent.empty() ? "." : parent.string();
  if (!std::filesystem::is_directory(directory)) throw Error(path + ": cannot write (no directory " + directory + ")");
  if (::access(directory.c_str(), W_OK) != 0) throw Error(path + ": cannot write (" + directory + " is not writable)");
}

}  // namespace glnet
