#include "formats/Npy.h"
#include "base/check.h"
#include "support/TempDir.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace glnet;

namespace {

// A .npy file of version 1.0 with `header` as its dict (padded as NumPy pads it) and `data` after it.
std::string npy(const std::string& dict, const std::string& data) {
  std::string header = dict;
  header.append(63 - (10 + header.size()) % 64, ' ');
  header += '\n';
  std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>(header.size() >> 8);
  return bytes + header + data;
}

}  // namespace

TEST_CASE("npy files: float16 (NumPy's <f2) widens to float32 exactly, subnormals, infinities and NaN included") {
  const test::TempDir directory;
  // 1, -2, 65504 (the largest half), 2^-24 (the smallest subnormal), -0, +inf, NaN.
  const std::uint16_t halves[7] = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x8000, 0x7c00, 0x7e00};
  std::string data(sizeof halves, '\0');
  std::memcpy(data.data(), halves, sizeof halves);
  const NpyArray array = readNpy(directory.write("f2.npy", npy("{'descr': '<f2', 'fortran_order': False, 'shape': (7,), }", data)));
  CHECK(array.dtype == "float16");
  CHECK(array.shape == std::vector<std::int64_t>{7});
  REQUIRE(array.values.size() == 7);
  CHECK(array.values[0] == 1.0f);
  CHECK(array.values[1] == -2.0f);
  CHECK(array.values[2] == 65504.0f);
  CHECK(array.values[3] == std::ldexp(1.0f, -24));
  CHECK((array.values[4] == 0.0f && std::signbit(array.values[4])));
  CHECK(array.values[5] == INFINITY);
  CHECK(std::isnan(array.values[6]));
  CHECK_THROWS_WITH_AS(readNpy(directory.write("f2-short.npy", npy("{'descr': '<f2', 'fortran_order': False, 'shape': (8,), }", data))),
                       doctest::Contains("shape needs 16 bytes of data, the file holds 14"), Error);
}

TEST_CASE("npy files: float32 written and read back, float64 read, everything else refused with the reason") {
  const test::TempDir directory;
  const NpyArray array{{2, 3, 1}, {1.5f, -2, 0, 3.25f, 1e-7f, -0.0f}};
  writeNpy(directory.file("a.npy"), array);
  const NpyArray back = readNpy(directory.file("a.npy"));
  CHECK(back.shape == array.shape);
  CHECK(back.values == array.values);
  writeNpy(directory.file("scalar.npy"), {{}, {4.0f}});
  CHECK(readNpy(directory.file("scalar.npy")).values == std::vector<float>{4.0f});

  const double wide[2] = {0.25, -8};
  std::string data(16, '\0');
  std::memcpy(data.data(), wide, 16);
  const std::string f8 = directory.write("f8.npy", npy("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", data));
  CHECK(readNpy(f8).values == std::vector<float>{0.25f, -8.0f});

  const auto refused = [&](const std::string& name, const std::string& bytes, const char* reason) {
    CAPTURE(name);
    CHECK_THROWS_WITH_AS(readNpy(directory.write(name, bytes)), doctest::Contains(reason), Error);
  };
  refused("magic", "not numpy at all", "no .npy magic");
  // Integers and booleans (token ids, masks) read exactly; beyond float32's exact range, refused (never rounded).
  const std::int64_t ids[2] = {-16777216, 30521};
  std::string idData(16, '\0');
  std::memcpy(idData.data(), ids, 16);
  CHECK(readNpy(directory.write("ids.npy", npy("{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }", idData))).values ==
        std::vector<float>{-16777216.0f, 30521.0f});
  CHECK(readNpy(directory.write("ids32.npy", npy("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", idData.substr(8)))).values ==
        std::vector<float>{30521.0f, 0.0f});
  const NpyArray mask = readNpy(directory.write("mask.npy", npy("{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", std::string("\1\0", 2))));
  CHECK(mask.dtype == "bool");
  CHECK(mask.values == std::vector<float>{1.0f, 0.0f});
  refused("int", npy("{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }", data), "the int64 value at element 0 is beyond ±16777216");
  refused("uint", npy("{'descr': '<u8', 'fortran_order': False, 'shape': (2,), }", data), "the uint64 value at element 0 is beyond");
  refused("bool", npy("{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", std::string("\1\2", 2)), "a bool element 1 that is neither 0 nor 1");
  refused("int-big-endian", npy("{'descr': '>i8', 'fortran_order': False, 'shape': (2,), }", data), "dtype >i8");
  refused("big-endian", npy("{'descr': '>f4', 'fortran_order': False, 'shape': (4,), }", data), "dtype >f4");
  refused("fortran", npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", data), "Fortran order");
  refused("short", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }", data), "shape needs 20 bytes of data, the file holds 16");
  refused("long", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", data), "shape needs 12 bytes");
  refused("no-shape", npy("{'descr': '<f4', 'fortran_order': False}", data), "a header without shape (");
  refused("empty", npy("{}", data), "a header without descr, fortran_order, shape (");
  // NumPy's literal gives a repeated key its last value: taking either would disagree with some reader.
  refused("descr-twice", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'descr': '<f8'}", data), "gives 'descr' twice");
  refused("shape-twice", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), 'shape': (2,)}", data), "gives 'shape' twice");
  refused("extra-key", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), 'align': 1}", data), "a header key 'align'");
  refused("negative", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 4), }", data), "shape dimension -1 is negative");
  refused("float-dimension", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1.0, 4), }", data), "shape dimension 1.0 is not a whole number");
  refused("not-a-tuple", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4), }", data), "not a tuple");
  refused("order-word", npy("{'descr': '<f4', 'fortran_order': 0, 'shape': (4,), }", data), "fortran_order 0, not True or False");
  refused("after-dict", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), } x", data), "bytes after the header's dict at byte 58");
  refused("not-a-dict", npy("['descr']", data), "'{' expected at byte 0");
  // Bytes from the file are quoted escaped, never raw (a NUL, a terminal's escape sequence).
  const std::string control = npy(std::string("{'descr': '<f\0\x1b[2J', 'fortran_order': False, 'shape': (4,), }", 61), data);
  refused("control-bytes", control, "dtype <f\\x00\\x1b[2J;");
  try {
    readNpy(directory.write("control-bytes", control));
  } catch (const Error& error) {
    const std::string message = error.what();
    CHECK(std::none_of(message.begin(), message.end(), [](char c) { return c < 0x20 || c == 0x7f; }));
  }
  refused("huge", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", data), "too many elements");
  CHECK_THROWS_WITH_AS(readNpy(directory.path().string()), doctest::Contains("is a directory"), Error);
}
