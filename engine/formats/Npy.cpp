#include "formats/Npy.h"

#include "formats/Float16.h"
#include "gl/AtomicFile.h"
#include "gl/FileInput.h"
#include "gl/check.h"

#include <cstring>
#include <regex>

namespace glnet {

NpyArray readNpy(const std::string& path) {
  const std::string bytes = readRegularFile(path, largestNpyBytes);
  const auto refuse = [&path](const std::string& why) { return Error(path + ": not a NumPy array glnet reads (" + why + ")"); };
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) throw refuse("no .npy magic");
  const int major = static_cast<unsigned char>(bytes[6]);
  if (major < 1 || major > 3) throw refuse("format version " + std::to_string(major));
  std::size_t headerLength = static_cast<unsigned char>(bytes[8]) | (std::size_t{static_cast<unsigned char>(bytes[9])} << 8);
  std::size_t dataStart = 10;
  if (major >= 2) {
    if (bytes.size() < 12) throw refuse("truncated header");
    headerLength |= (std::size_t{static_cast<unsigned char>(bytes[10])} << 16) | (std::size_t{static_cast<unsigned char>(bytes[11])} << 24);
    dataStart = 12;
  }
  // NumPy writes headers of a few dozen bytes; the bound also keeps std::regex's recursion shallow.
  if (headerLength > 4096) throw refuse("a header of " + std::to_string(headerLength) + " bytes");
  if (headerLength > bytes.size() - dataStart) throw refuse("the header runs past the end");
  const std::string header = bytes.substr(dataStart, headerLength);
  dataStart += headerLength;
  // The header is a Python dict literal: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
  std::smatch descr, order, shape;
  if (!std::regex_search(header, descr, std::regex(R"('descr'\s*:\s*'([^']*)')")) ||
      !std::regex_search(header, order, std::regex(R"('fortran_order'\s*:\s*(True|False))")) ||
      !std::regex_search(header, shape, std::regex(R"('shape'\s*:\s*\(([0-9,\s]*)\))"))) {
    throw refuse("a header without descr, fortran_order or shape");
  }
  if (order[1] == "True") throw refuse("Fortran order; save a C-ordered array (np.ascontiguousarray)");
  const std::string type = descr[1];
  const std::size_t elementBytes = type == "<f4" ? 4 : type == "<f8" ? 8 : type == "<f2" ? 2 : type == "|u1" ? 1 : 0;
  if (!elementBytes) {
    throw refuse("dtype " + type.substr(0, 10) + "; glnet reads float32 (<f4), float64 (<f8), float16 (<f2) and uint8 (|u1)");
  }
  NpyArray array;
  array.dtype = elementBytes == 4 ? "float32" : elementBytes == 8 ? "float64" : elementBytes == 2 ? "float16" : "uint8";
  std::size_t count = 1;
  const std::string dimensions = shape[1];
  const std::regex number("[0-9]+");
  for (std::sregex_iterator it(dimensions.begin(), dimensions.end(), number), end; it != end; ++it) {
    if (it->str().size() > 10) throw refuse("a dimension too large");
    const auto d = std::stoll(it->str());
    if (d != 0 && count > (std::size_t{1} << 32) / static_cast<std::size_t>(d)) throw refuse("too many elements");
    array.shape.push_back(d);
    count *= static_cast<std::size_t>(d);
  }
  if (bytes.size() - dataStart != count * elementBytes) {
    throw refuse("shape needs " + std::to_string(count * elementBytes) + " bytes of data, the file holds " + std::to_string(bytes.size() - dataStart));
  }
  array.values.resize(count);
  for (std::size_t i = 0; i < count; ++i) {
    if (elementBytes == 4) {
      std::memcpy(&array.values[i], bytes.data() + dataStart + 4 * i, 4);
    } else if (elementBytes == 1) {
      array.values[i] = static_cast<unsigned char>(bytes[dataStart + i]);
    } else if (elementBytes == 2) {
      std::uint16_t half;
      std::memcpy(&half, bytes.data() + dataStart + 2 * i, 2);
      array.values[i] = halfToFloat(half);
    } else {
      double wide;
      std::memcpy(&wide, bytes.data() + dataStart + 8 * i, 8);
      array.values[i] = static_cast<float>(wide);
    }
  }
  return array;
}

void writeNpy(const std::string& path, const NpyArray& array) {
  std::string shape;
  for (const std::int64_t d : array.shape) shape += std::to_string(d) + ", ";
  if (array.shape.size() > 1) shape.erase(shape.size() - 2);
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + shape + "), }";
  // Padded with spaces and ended by a newline so that the data starts 64-byte aligned, as NumPy writes it.
  header.append(63 - (10 + header.size()) % 64, ' ');
  header += '\n';
  std::string bytes = "\x93NUMPY";
  bytes += '\x01';
  bytes += '\x00';
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>(header.size() >> 8);
  bytes += header;
  bytes.append(reinterpret_cast<const char*>(array.values.data()), array.values.size() * sizeof(float));
  writeFileAtomically(path, bytes);
}

}  // namespace glnet
