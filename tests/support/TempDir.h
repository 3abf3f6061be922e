// A temporary directory removed with the object, for tests that write files.
#pragma once

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

namespace glnet::test {

class TempDir {
 public:
  TempDir() : path_(std::filesystem::temp_directory_path() / ("glnet-test-" + std::to_string(std::random_device{}()))) {
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string write(const std::string& name, const std::string& bytes) const {
    std::ofstream(path_ / name, std::ios::binary) << bytes;
    return file(name);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace glnet::test
