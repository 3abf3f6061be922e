#include "base/AtomicFile.h"

#include "base/check.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <signal.h>
#include <unistd.h>

namespace glnet {

namespace {

constexpr const char* temporaryMark = ".tmp";

// Temporary siblings of `path` left by writers that were killed (their process no longer exists).
void removeStaleTemporaries(const std::string& path) {
  const std::filesystem::path target(path);
  const std::filesystem::path directory = target.parent_path().empty() ? "." : target.parent_path();
  const std::string prefix = target.filename().string() + temporaryMark;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(directory, error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string pid = name.substr(prefix.size());
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    if (::kill(static_cast<pid_t>(std::stol(pid)), 0) != 0 && errno == ESRCH) std::filesystem::remove(entry.path(), error);
  }
}

}  // namespace

void writeFileAtomically(const std::string& path, const std::string& bytes) {
  removeStaleTemporaries(path);
  const std::string temporary = path + temporaryMark + std::to_string(::getpid());
  {
    std::FILE* file = std::fopen(temporary.c_str(), "wb");
    if (!file) throw Error(path + ": cannot write (" + std::strerror(errno) + ")");
    int failure = 0;
    if (std::fwrite(bytes.data(), 1, bytes.size(), file) != bytes.size()) failure = errno;
    if (!failure && (std::fflush(file) != 0 || ::fsync(fileno(file)) != 0)) failure = errno;
    if (std::fclose(file) != 0 && !failure) failure = errno;
    if (failure) {
      std::remove(temporary.c_str());
      throw Error(path + ": writing " + std::to_string(bytes.size()) + " bytes failed (" + std::strerror(failure) +
                  "); the previous file, if any, is untouched");
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
  if (path.empty()) throw Error("an output file name is empty");
  if (std::filesystem::is_directory(path)) throw Error(path + ": is a directory; give the name of a file to write");
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string directory = parent.empty() ? "." : parent.string();
  if (!std::filesystem::is_directory(directory)) throw Error(path + ": cannot write (no directory " + directory + ")");
  if (::access(directory.c_str(), W_OK) != 0) throw Error(path + ": cannot write (" + directory + " is not writable)");
  // Permission bits say nothing to root or about /proc and read-only mounts: create the file's temporary sibling.
  const std::string probe = path + temporaryMark + std::to_string(::getpid());
  std::FILE* file = std::fopen(probe.c_str(), "wb");
  if (!file) throw Error(path + ": cannot write (" + std::strerror(errno) + ")");
  std::fclose(file);
  std::remove(probe.c_str());
}

}  // namespace glnet
