#include "formats/Npy.h"

#include "base/ExactInteger.h"

#include "base/Float16.h"
#include "base/AtomicFile.h"
#include "base/FileInput.h"
#include "base/check.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>

namespace glnet {

namespace {

Error refusal(const std::string& path, const std::string& why) { return Error(path + ": not a NumPy array glnet reads (" + why + ")"); }

struct NpyHeader {
  std::optional<std::string> descr;
  std::optional<bool> fortranOrder;
  std::optional<std::vector<std::int64_t>> shape;
};

// The header is a Python dict literal: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }, read as np.load
// reads it: exactly these three keys, each once (in a literal a repeated key's last value wins, so a reader taking
// the first would read other data than NumPy), a tuple of counts as the shape, then only padding.
NpyHeader parseHeader(const std::string& header, const std::string& path) {
  const auto refuse = [&path](const std::string& why) { return refusal(path, why); };
  std::size_t at = 0;
  const auto skipSpaces = [&] {
    while (at < header.size() && std::isspace(static_cast<unsigned char>(header[at]))) ++at;
  };
  const auto peek = [&](char c) {
    skipSpaces();
    return at < header.size() && header[at] == c;
  };
  const auto expect = [&](char c, const std::string& what) {
    if (!peek(c)) throw refuse("a header that is not a dict literal: " + what + " expected at byte " + std::to_string(at));
    ++at;
  };
  const auto string = [&] {
    if (!peek('\'') && !peek('"')) throw refuse("a header that is not a dict literal: a string expected at byte " + std::to_string(at));
    const std::size_t end = header.find(header[at], at + 1);
    if (end == std::string::npos) throw refuse("a header with an unterminated string at byte " + std::to_string(at));
    std::string text = header.substr(at + 1, end - at - 1);
    at = end + 1;
    return text;
  };
  const auto word = [&] {  // a value that is not a string or tuple: up to the next separator
    skipSpaces();
    const std::size_t begin = at;
    while (at < header.size() && !std::isspace(static_cast<unsigned char>(header[at])) && std::strchr(",)}", header[at]) == nullptr) ++at;
    return header.substr(begin, at - begin);
  };
  const auto shape = [&] {
    expect('(', "the shape's '('");
    std::vector<std::int64_t> dimensions;
    bool trailingComma = false;
    while (!peek(')')) {
      const std::string d = word();
      const bool digits = !d.empty() && std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; });
      if (!digits) {
        const bool negative = d.size() > 1 && d[0] == '-' && std::all_of(d.begin() + 1, d.end(), [](char c) { return c >= '0' && c <= '9'; });
        throw refuse("shape dimension " + printable(d.substr(0, 20)) + (negative ? " is negative" : " is not a whole number"));
      }
      if (d.size() > 10) throw refuse("a dimension too large");
      dimensions.push_back(std::stoll(d));
      trailingComma = peek(',');
      if (!trailingComma && !peek(')')) expect(',', "',' or ')' in the shape");
      if (trailingComma) ++at;
    }
    ++at;
    if (dimensions.size() == 1 && !trailingComma) throw refuse("a shape that is a number in parentheses, not a tuple: NumPy writes (n,)");
    return dimensions;
  };
  NpyHeader result;
  expect('{', "'{'");
  while (!peek('}')) {
    const std::string key = string();
    expect(':', "':'");
    const auto once = [&](bool seen) {
      if (seen) throw refuse("a header that gives '" + key + "' twice");
    };
    if (key == "descr") {
      once(result.descr.has_value());
      result.descr = string();
    } else if (key == "fortran_order") {
      once(result.fortranOrder.has_value());
      const std::string value = word();
      if (value != "True" && value != "False") throw refuse("fortran_order " + printable(value.substr(0, 20)) + ", not True or False");
      result.fortranOrder = value == "True";
    } else if (key == "shape") {
      once(result.shape.has_value());
      result.shape = shape();
    } else {
      throw refuse("a header key '" + printable(key.substr(0, 20)) + "'; NumPy's are descr, fortran_order and shape");
    }
    if (!peek('}')) expect(',', "',' or '}'");
  }
  ++at;
  skipSpaces();  // NumPy's padding
  if (at != header.size()) throw refuse("bytes after the header's dict at byte " + std::to_string(at));
  std::string missing;
  for (const auto& [absent, name] : {std::pair{!result.descr, "descr"}, {!result.fortranOrder, "fortran_order"}, {!result.shape, "shape"}}) {
    if (absent) missing += std::string(missing.empty() ? "" : ", ") + name;
  }
  if (!missing.empty()) throw refuse("a header without " + missing + " (NumPy's has descr, fortran_order and shape)");
  return result;
}

}  // namespace

NpyArray readNpy(const std::string& path) {
  const std::string bytes = readRegularFile(path, largestNpyBytes);
  const auto refuse = [&path](const std::string& why) { return refusal(path, why); };
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
  // NumPy writes headers of a few dozen bytes.
  if (headerLength > 4096) throw refuse("a header of " + std::to_string(headerLength) + " bytes");
  if (headerLength > bytes.size() - dataStart) throw refuse("the header runs past the end");
  const NpyHeader header = parseHeader(bytes.substr(dataStart, headerLength), path);
  dataStart += headerLength;
  if (*header.fortranOrder) throw refuse("Fortran order; save a C-ordered array (np.ascontiguousarray)");
  // NumPy's descr of each dtype glnet reads: float, pixels, and the integers and booleans of token ids and masks.
  struct Dtype {
    const char* descr;
    const char* name;
    std::size_t bytes;
    bool integer;
  };
  static constexpr Dtype dtypes[] = {{"<f4", "float32", 4, false}, {"<f8", "float64", 8, false}, {"<f2", "float16", 2, false},
                                     {"|u1", "uint8", 1, true},    {"|b1", "bool", 1, true},     {"|i1", "int8", 1, true},
                                     {"<i2", "int16", 2, true},    {"<u2", "uint16", 2, true},   {"<i4", "int32", 4, true},
                                     {"<u4", "uint32", 4, true},   {"<i8", "int64", 8, true},    {"<u8", "uint64", 8, true}};
  const Dtype* dtype = nullptr;
  for (const Dtype& d : dtypes) {
    if (*header.descr == d.descr) dtype = &d;
  }
  if (!dtype) {
    throw refuse("dtype " + printable(header.descr->substr(0, 10)) +
                 "; glnet reads float32 (<f4), float64 (<f8), float16 (<f2), uint8 (|u1), bool (|b1) and little-endian signed and unsigned integers");
  }
  const std::size_t elementBytes = dtype->bytes;
  NpyArray array;
  array.dtype = dtype->name;
  std::size_t count = 1;
  for (const std::int64_t d : *header.shape) {
    if (d != 0 && count > (std::size_t{1} << 32) / static_cast<std::size_t>(d)) throw refuse("too many elements");
    array.shape.push_back(d);
    count *= static_cast<std::size_t>(d);
  }
  if (bytes.size() - dataStart != count * elementBytes) {
    throw refuse("shape needs " + std::to_string(count * elementBytes) + " bytes of data, the file holds " + std::to_string(bytes.size() - dataStart));
  }
  array.values.resize(count);
  const char* data = bytes.data() + dataStart;
  // A whole number as it is stored, little-endian, of `elementBytes`, signed or not.
  const auto wholeNumber = [&](std::size_t i) -> std::int64_t {
    std::uint64_t raw = 0;
    std::memcpy(&raw, data + elementBytes * i, elementBytes);
    const bool signedType = dtype->name[0] == 'i';
    if (signedType && elementBytes < 8 && (raw >> (8 * elementBytes - 1)) != 0) raw |= ~std::uint64_t{0} << (8 * elementBytes);
    if (!signedType && raw > static_cast<std::uint64_t>(largestExactInteger)) return largestExactInteger + 1;
    return static_cast<std::int64_t>(raw);
  };
  for (std::size_t i = 0; i < count; ++i) {
    if (dtype->integer) {
      const std::int64_t v = wholeNumber(i);
      if (!exactAsFloat(v)) {
        throw Error(path + ": the " + array.dtype + " value at element " + std::to_string(i) + " is beyond ±" + std::to_string(largestExactInteger) +
                    " (glnet holds integers as float32, exact only up to that)");
      }
      if (array.dtype == "bool" && v > 1) throw refuse("a bool element " + std::to_string(i) + " that is neither 0 nor 1");
      array.values[i] = static_cast<float>(v);
    } else if (elementBytes == 4) {
      std::memcpy(&array.values[i], data + 4 * i, 4);
    } else if (elementBytes == 2) {
      std::uint16_t half;
      std::memcpy(&half, data + 2 * i, 2);
      array.values[i] = halfToFloat(half);
    } else {
      double wide;
      std::memcpy(&wide, data + 8 * i, 8);
      array.values[i] = static_cast<float>(wide);
      // A finite value float32 cannot hold would become infinite here, and later seem to be the model's doing.
      if (std::isfinite(wide) && !std::isfinite(array.values[i])) {
        char text[32];
        std::snprintf(text, sizeof text, "%g", wide);
        throw Error(path + ": the float64 value " + text + " at element " + std::to_string(i) + " is beyond float32's range (glnet computes in float32)");
      }
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
