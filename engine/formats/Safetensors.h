// safetensors files: 8-byte little-endian header length, a JSON header, raw little-endian tensor data.
// glnet keeps every tensor as float32 in memory; F16 and F64 convert on load.
#pragma once

#include "base/AtomicFile.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace glnet {

struct HostTensor {
  std::vector<std::int64_t> shape;
  std::vector<float> values;
  std::size_t elements() const;
};

struct TensorFile {
  std::map<std::string, HostTensor> tensors;
  std::map<std::string, std::string> metadata;  // "__metadata__"
};

// Model files are read whole; larger ones are refused before reading.
constexpr std::uint64_t largestSafetensorsBytes = std::uint64_t{4} << 30;

// Validates what the format requires: a regular file, the header length, the JSON (unique names), dtypes
// (F32, F16, F64), shapes against byte ranges, and ranges that tile the data section to the end of the file;
// errors name the file and the tensor.
TensorFile readSafetensors(const std::string& path);

// Writes F32 tensors to `path` through a temporary file renamed into place, so a crash never leaves a torn file.
void writeSafetensors(const std::string& path, const TensorFile& file);

}  // namespace glnet
