#include "formats/Safetensors.h"

#include "base/Float16.h"
#include "formats/UntrustedJson.h"
#include "base/AtomicFile.h"
#include "base/FileInput.h"
#include "base/check.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <unistd.h>

namespace glnet {
namespace {

constexpr std::uint64_t maxHeaderBytes = 100u << 20;

std::size_t dtypeBytes(const std::string& dtype) {
  if (dtype == "F32") return 4;
  if (dtype == "F16") return 2;
  if (dtype == "F64") return 8;
  return 0;
}

std::vector<float> convert(const std::string& dtype, const std::uint8_t* data, std::size_t count) {
  std::vector<float> values(count);
  for (std::size_t i = 0; i < count; ++i) {
    if (dtype == "F32") {
      std::memcpy(&values[i], data + 4 * i, 4);
    } else if (dtype == "F16") {
      std::uint16_t half;
      std::memcpy(&half, data + 2 * i, 2);
      values[i] = halfToFloat(half);
    } else {
      double wide;
      std::memcpy(&wide, data + 8 * i, 8);
      values[i] = static_cast<float>(wide);
    }
  }
  return values;
}

}  // namespace

std::size_t HostTensor::elements() const {
  std::size_t count = 1;
  for (const std::int64_t dimension : shape) count *= static_cast<std::size_t>(dimension);
  return count;
}

TensorFile readSafetensors(const std::string& path) {
  const std::string bytes = readRegularFile(path, largestSafetensorsBytes);
  if (bytes.size() < 8) throw Error(path + ": too short to be a safetensors file");
  std::uint64_t headerLength = 0;
  for (int i = 7; i >= 0; --i) headerLength = (headerLength << 8) | static_cast<unsigned char>(bytes[i]);
  if (headerLength > maxHeaderBytes || headerLength > bytes.size() - 8) {
    throw Error(path + ": not a safetensors file (header length " + std::to_string(headerLength) +
                " does not fit in the file of " + std::to_string(bytes.size()) + " bytes)");
  }
  const nlohmann::json header =
      parseUntrustedJson(std::string_view(bytes).substr(8, headerLength), path + ": the safetensors header");
  if (!header.is_object()) throw Error(path + ": safetensors header is not a JSON object");
  const std::size_t dataStart = 8 + headerLength;
  const std::size_t dataBytes = bytes.size() - dataStart;

  TensorFile file;
  std::vector<std::pair<std::size_t, std::size_t>> ranges;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) throw Error(path + ": __metadata__ is not an object");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) throw Error(path + ": __metadata__ value of " + key + " is not a string");
        file.metadata[key] = value.get<std::string>();
      }
      continue;
    }
    const std::string where = path + ": tensor " + name;
    if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets")) {
      throw Error(where + " lacks dtype, shape or data_offsets");
    }
    if (!entry["dtype"].is_string()) throw Error(where + ": dtype is not a string");
    const std::string dtype = entry["dtype"].get<std::string>();
    const std::size_t elementBytes = dtypeBytes(dtype);
    if (elementBytes == 0) throw Error(where + " has dtype " + dtype + "; glnet reads F32, F16 and F64");
    HostTensor tensor;
    std::size_t count = 1;
    if (!entry["shape"].is_array()) throw Error(where + ": shape is not a list");
    for (const auto& dimension : entry["shape"]) {
      if (!dimension.is_number_integer() || dimension.get<std::int64_t>() < 0 ||
          dimension.get<std::int64_t>() > (std::int64_t{1} << 32)) {
        throw Error(where + ": shape has an invalid dimension");
      }
      const auto size = static_cast<std::size_t>(dimension.get<std::int64_t>());
      // The element count must not wrap around: a huge shape would otherwise match a small byte range.
      if (size != 0 && count > (std::size_t{1} << 40) / size) throw Error(where + ": shape has more than 2^40 elements");
      tensor.shape.push_back(dimension.get<std::int64_t>());
      count *= size;
    }
    const auto& offsets = entry["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned()) {
      throw Error(where + ": data_offsets is not a pair of non-negative integers");
    }
    const auto begin = offsets[0].get<std::uint64_t>(), end = offsets[1].get<std::uint64_t>();
    if (begin > end || end > dataBytes) {
      throw Error(where + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                  "] run past the end of the data (" + std::to_string(dataBytes) + " bytes)");
    }
    if (end - begin != count * elementBytes) {
      throw Error(where + ": shape needs " + std::to_string(count * elementBytes) + " bytes of " + dtype + ", data_offsets give " +
                  std::to_string(end - begin));
    }
    ranges.emplace_back(begin, end);
    tensor.values = convert(dtype, reinterpret_cast<const std::uint8_t*>(bytes.data()) + dataStart + begin, count);
    file.tensors.emplace(name, std::move(tensor));
  }
  // The format's rule: the tensors' byte ranges tile the data section, which ends at the end of the file. A
  // header length off by a few bytes shifts every tensor, and shows here as a gap or trailing bytes.
  std::sort(ranges.begin(), ranges.end());
  std::size_t covered = 0;
  for (const auto& [begin, end] : ranges) {
    if (begin < covered) throw Error(path + ": tensors overlap in the data section");
    if (begin > covered) {
      throw Error(path + ": bytes " + std::to_string(covered) + " to " + std::to_string(begin) +
                  " of the data section belong to no tensor (a wrong header length, or a damaged file)");
    }
    covered = end;
  }
  if (covered != dataBytes) {
    const std::size_t left = dataBytes - covered;
    throw Error(path + ": " + std::to_string(left) + (left == 1 ? " byte" : " bytes") + " after the last tensor belong" +
                (left == 1 ? "s" : "") + " to no tensor (a wrong header length, or a damaged file)");
  }
  return file;
}

void writeSafetensors(const std::string& path, const TensorFile& file) {
  nlohmann::json header = nlohmann::json::object();
  if (!file.metadata.empty()) header["__metadata__"] = file.metadata;
  std::size_t offset = 0;
  for (const auto& [name, tensor] : file.tensors) {
    GLNET_ASSERT(tensor.values.size() == tensor.elements(), "tensor " + name + " has values that disagree with its shape");
    const std::size_t size = tensor.values.size() * sizeof(float);
    header[name] = {{"dtype", "F32"}, {"shape", tensor.shape}, {"data_offsets", {offset, offset + size}}};
    offset += size;
  }
  std::string json = header.dump();
  // Pad the header with spaces so the data starts 8-byte aligned, as the reference writer does.
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[static_cast<std::size_t>(i)] = static_cast<char>((json.size() >> (8 * i)) & 0xff);
  bytes += json;
  for (const auto& [name, tensor] : file.tensors) {
    bytes.append(reinterpret_cast<const char*>(tensor.values.data()), tensor.values.size() * sizeof(float));
  }
  writeFileAtomically(path, bytes);
}

}  // namespace glnet
