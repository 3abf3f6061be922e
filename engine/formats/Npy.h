// NumPy .npy files (format versions 1.0 to 3.0): little-endian float32, float64 or float16 arrays, uint8 pixels, and
// the integers and booleans of token ids and masks, in C order, read as float32 (integers exactly: base/ExactInteger.h);
// float32 arrays written, so that glnet_run exchanges tensors with NumPy and PyTorch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace glnet {

struct NpyArray {
  std::vector<std::int64_t> shape;
  std::vector<float> values;
  // As the file stored them, in NumPy's names: float32, float64, float16, uint8 (pixels, held here as 0 to 255), bool,
  // int8 to int64 or uint16 to uint64.
  std::string dtype = "float32";
};

// Arrays are read whole; larger files are refused before reading.
constexpr std::uint64_t largestNpyBytes = std::uint64_t{2} << 30;

// Throws glnet::Error naming the file: not .npy, a header NumPy would read otherwise or not at all (a key twice, a
// shape that is not a tuple of counts), an unsupported dtype or Fortran order, data that does not match the shape, an
// integer beyond float32's exact range.
// File bytes quoted in the message are escaped.
NpyArray readNpy(const std::string& path);
// Writes a float32 array through a temporary file renamed into place.
void writeNpy(const std::string& path, const NpyArray& array);

}  // namespace glnet
