#include "base/FileInput.h"

#include "base/check.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sys/stat.h>

namespace glnet {

RegularFile::RegularFile(const std::string& path, std::uint64_t largestBytes) : path_(path) {
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0) {
    if (errno == ENOENT) throw FileNotFound(path + ": no such file");
    throw Error(path + ": cannot open (" + std::string(std::strerror(errno)) + ")");
  }
  if (S_ISDIR(status.st_mode)) throw Error(path + ": is a directory; give a file");
  if (!S_ISREG(status.st_mode)) throw Error(path + ": not a regular file (a device or a pipe); give a file");
  size_ = static_cast<std::uint64_t>(status.st_size);
  if (size_ > largestBytes) {
    throw Error(path + ": " + std::to_string(size_) + " bytes; glnet reads files of at most " + std::to_string(largestBytes) + " bytes here");
  }
  stream_.open(path, std::ios::binary);
  if (!stream_) throw Error(path + ": cannot open (no permission)");
}

void RegularFile::read(std::uint64_t offset, char* destination, std::uint64_t count) {
  GLNET_ASSERT(offset <= size_ && count <= size_ - offset, "a read past the size " + path_ + " had when opened");
  stream_.seekg(static_cast<std::streamoff>(offset));
  stream_.read(destination, static_cast<std::streamsize>(count));
  if (!stream_ || static_cast<std::uint64_t>(stream_.gcount()) != count) throw Error(path_ + ": changed size while being read");
}

bool RegularFile::grewSinceOpened() {
  stream_.clear();
  stream_.seekg(static_cast<std::streamoff>(size_));
  return stream_.peek() != std::char_traits<char>::eof();
}

std::string readRegularFile(const std::string& path, std::uint64_t largestBytes) {
  RegularFile file(path, largestBytes);
  std::string bytes(static_cast<std::size_t>(file.size()), '\0');
  file.read(0, bytes.data(), file.size());
  // The file may shrink or grow between stat and read; what was read is what the size said, or an error.
  if (file.grewSinceOpened()) throw Error(path + ": changed size while being read");
  return bytes;
}

}  // namespace glnet
