// What the commands know of an ONNX file before parsing it (no protobuf here: apps include this).
#pragma once

#include <cstdint>
#include <string>

namespace glnet {

// Model files are read whole; larger ones are refused before reading (protobuf's own limit is 2 GiB).
constexpr std::uint64_t largestOnnxBytes = std::uint64_t{2} << 30;

// True when the file name says ONNX (".onnx"): the commands that take --model choose the reader by it.
inline bool isOnnxPath(const std::string& path) { return path.size() >= 5 && path.compare(path.size() - 5, 5, ".onnx") == 0; }

}  // namespace glnet
