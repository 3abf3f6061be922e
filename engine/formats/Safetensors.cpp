#include "formats/Safetensors.h"

#include "base/Bfloat16.h"
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
#include <set>

#include <unistd.h>

namespace glnet {
namespace {

constexpr std::uint64_t maxHeaderBytes = 100u << 20;
constexpr std::uint64_t largestIndexBytes = 64u << 20;

// The dtype a header names, or false when glnet does not read it.
bool parseDtype(const std::string& name, StoredDtype& dtype) {
  for (const StoredDtype candidate : {StoredDtype::f32, StoredDtype::f16, StoredDtype::bf16, StoredDtype::f64}) {
    if (name == storedDtypeName(candidate)) {
      dtype = candidate;
      return true;
    }
  }
  return false;
}

std::size_t dtypeBytes(StoredDtype dtype) {
  switch (dtype) {
    case StoredDtype::f32: return 4;
    case StoredDtype::f16:
    case StoredDtype::bf16: return 2;
    case StoredDtype::f64: return 8;
  }
  return 0;
}

// `count` elements of `dtype` from `file` at `offset` as floats. F32 is read straight into the result; the others
// through a bounded buffer, so no tensor's bytes are held whole beside its floats.
std::vector<float> readValues(RegularFile& file, std::uint64_t offset, StoredDtype dtype, std::size_t count) {
  std::vector<float> values(count);
  if (dtype == StoredDtype::f32) {
    file.read(offset, reinterpret_cast<char*>(values.data()), count * 4);
    return values;
  }
  const std::size_t elementBytes = dtypeBytes(dtype);
  constexpr std::size_t chunkElements = std::size_t{1} << 18;
  std::vector<std::uint8_t> chunk(std::min(count, chunkElements) * elementBytes);
  for (std::size_t first = 0; first < count; first += chunkElements) {
    const std::size_t n = std::min(chunkElements, count - first);
    file.read(offset + first * elementBytes, reinterpret_cast<char*>(chunk.data()), n * elementBytes);
    float* out = values.data() + first;
    for (std::size_t i = 0; i < n; ++i) {
      if (dtype == StoredDtype::f64) {
        double wide;
        std::memcpy(&wide, chunk.data() + 8 * i, 8);
        out[i] = static_cast<float>(wide);
      } else {
        std::uint16_t half;
        std::memcpy(&half, chunk.data() + 2 * i, 2);
        out[i] = dtype == StoredDtype::f16 ? halfToFloat(half) : fromBfloat16(half);
      }
    }
  }
  return values;
}

}  // namespace

const char* storedDtypeName(StoredDtype dtype) {
  switch (dtype) {
    case StoredDtype::f32: return "F32";
    case StoredDtype::f16: return "F16";
    case StoredDtype::bf16: return "BF16";
    case StoredDtype::f64: return "F64";
  }
  return "?";
}

std::size_t HostTensor::elements() const {
  std::size_t count = 1;
  for (const std::int64_t dimension : shape) count *= static_cast<std::size_t>(dimension);
  return count;
}

TensorFile readSafetensors(const std::string& path) {
  RegularFile input(path, largestSafetensorsBytes);
  const std::uint64_t fileBytes = input.size();
  if (fileBytes < 8) throw Error(path + ": too short to be a safetensors file");
  unsigned char lengthBytes[8];
  input.read(0, reinterpret_cast<char*>(lengthBytes), 8);
  std::uint64_t headerLength = 0;
  for (int i = 7; i >= 0; --i) headerLength = (headerLength << 8) | lengthBytes[i];
  if (headerLength > maxHeaderBytes || headerLength > fileBytes - 8) {
    throw Error(path + ": not a safetensors file (header length " + std::to_string(headerLength) +
                " does not fit in the file of " + std::to_string(fileBytes) + " bytes)");
  }
  std::string headerText(static_cast<std::size_t>(headerLength), '\0');
  input.read(8, headerText.data(), headerLength);
  const nlohmann::json header = parseUntrustedJson(headerText, path + ": the safetensors header");
  if (!header.is_object()) throw Error(path + ": safetensors header is not a JSON object");
  const std::uint64_t dataStart = 8 + headerLength;
  const std::uint64_t dataBytes = fileBytes - dataStart;

  TensorFile file;
  struct Pending {
    std::string name;
    std::uint64_t begin;
    std::size_t count;
  };
  // Every entry is checked, and the ranges against each other, before any tensor data is read.
  std::vector<Pending> pending;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
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
    const std::string dtypeText = entry["dtype"].get<std::string>();
    HostTensor tensor;
    if (!parseDtype(dtypeText, tensor.stored)) throw Error(where + " has dtype " + dtypeText + "; glnet reads F32, F16, BF16 and F64");
    const std::size_t elementBytes = dtypeBytes(tensor.stored);
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
      throw Error(where + ": shape needs " + std::to_string(count * elementBytes) + " bytes of " + dtypeText +
                  ", data_offsets give " + std::to_string(end - begin));
    }
    ranges.emplace_back(begin, end);
    pending.push_back({name, begin, count});
    file.tensors.emplace(name, std::move(tensor));
  }
  // The format's rule: the tensors' byte ranges tile the data section, which ends at the end of the file. A
  // header length off by a few bytes shifts every tensor, and shows here as a gap or trailing bytes.
  std::sort(ranges.begin(), ranges.end());
  std::uint64_t covered = 0;
  for (const auto& [begin, end] : ranges) {
    if (begin < covered) throw Error(path + ": tensors overlap in the data section");
    if (begin > covered) {
      throw Error(path + ": bytes " + std::to_string(covered) + " to " + std::to_string(begin) +
                  " of the data section belong to no tensor (a wrong header length, or a damaged file)");
    }
    covered = end;
  }
  if (covered != dataBytes) {
    const std::uint64_t left = dataBytes - covered;
    throw Error(path + ": " + std::to_string(left) + (left == 1 ? " byte" : " bytes") + " after the last tensor belong" +
                (left == 1 ? "s" : "") + " to no tensor (a wrong header length, or a damaged file)");
  }
  for (const Pending& tensor : pending) {
    HostTensor& target = file.tensors.at(tensor.name);
    target.values = readValues(input, dataStart + tensor.begin, target.stored, tensor.count);
  }
  if (input.grewSinceOpened()) throw Error(path + ": changed size while being read");
  return file;
}

TensorFile readShardedSafetensors(const std::string& indexPath) {
  const nlohmann::json index = parseUntrustedJson(readRegularFile(indexPath, largestIndexBytes), indexPath);
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    throw Error(indexPath + ": no weight_map object (the map from tensor names to shard files)");
  }
  const std::filesystem::path folder = std::filesystem::path(indexPath).parent_path();
  std::map<std::string, std::set<std::string>> shards;  // shard file -> the names the index puts there
  for (const auto& [name, shard] : index["weight_map"].items()) {
    if (!shard.is_string()) throw Error(indexPath + ": weight_map entry of " + name + " is " + describeJsonValue(shard) + ", not a file name");
    const std::string file = shard.get<std::string>();
    // Shards are files beside the index: a path elsewhere would let an index read any file.
    if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..") {
      throw Error(indexPath + ": weight_map entry of " + name + " is not a file name in the index's folder");
    }
    shards[file].insert(name);
  }
  if (shards.empty()) throw Error(indexPath + ": weight_map names no tensor");
  TensorFile result;
  for (auto& [shardName, names] : shards) {
    const std::string shardPath = (folder / shardName).string();
    TensorFile shard = readSafetensors(shardPath);
    for (auto& [name, tensor] : shard.tensors) {
      if (names.erase(name) == 0) {
        const bool elsewhere = result.tensors.count(name) != 0 || index["weight_map"].contains(name);
        throw Error(shardPath + ": tensor " + name +
                    (elsewhere ? " is mapped to another shard by " : " is not in the weight_map of ") + indexPath);
      }
      result.tensors.emplace(name, std::move(tensor));
    }
    if (!names.empty()) throw Error(shardPath + ": lacks tensor " + *names.begin() + ", which " + indexPath + " maps to it");
    for (auto& [key, value] : shard.metadata) result.metadata.emplace(key, std::move(value));
  }
  return result;
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
