// Whole input files read with the checks every reader needs: a regular file (not a directory, a device such
// as /dev/zero, or a pipe) of bounded size, so no path a user passes can make glnet read without end.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

namespace glnet {

// The bytes of `path`; throws glnet::Error naming the path when it is missing, not a regular file, larger
// than `largestBytes`, or unreadable.
std::string readRegularFile(const std::string& path, std::uint64_t largestBytes);

// The same checks, for a reader that takes a large file in pieces (a model's tensors straight into their own
// arrays) instead of holding all of its bytes twice.
class RegularFile {
 public:
  RegularFile(const std::string& path, std::uint64_t largestBytes);
  std::uint64_t size() const { return size_; }
  // Reads bytes [offset, offset + count) into `destination`; throws naming the path when the file is shorter now.
  void read(std::uint64_t offset, char* destination, std::uint64_t count);
  // Whether bytes follow the size the file had when opened (it grew while being read).
  bool grewSinceOpened();

 private:
  std::string path_;
  std::uint64_t size_ = 0;
  std::ifstream stream_;
};

}  // namespace glnet
