// safetensors files: 8-byte little-endian header length, a JSON header, raw little-endian tensor data.
// glnet keeps every tensor as float32 in memory; F16, BF16 and F64 convert on load, and each tensor records the
// type its file stored, so that a command can report it.
#pragma once

#include "base/AtomicFile.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace glnet {

// The element types glnet reads from safetensors files, by the format's names.
enum class StoredDtype { f32, f16, bf16, f64 };
const char* storedDtypeName(StoredDtype dtype);  // "F32", "F16", "BF16", "F64"

struct HostTensor {
  std::vector<std::int64_t> shape;
  std::vector<float> values;
  StoredDtype stored = StoredDtype::f32;  // what the file held; values are float32 whatever it was
  std::size_t elements() const;
};

struct TensorFile {
  std::map<std::string, HostTensor> tensors;
  std::map<std::string, std::string> metadata;  // "__metadata__"
};

// Larger files are refused before reading: a 1B-parameter model in float32 is one file of about 5 GB. Tensors are read
// straight into their own arrays, so a file of F32 takes its size in memory once, not twice.
constexpr std::uint64_t largestSafetensorsBytes = std::uint64_t{16} << 30;

// Validates what the format requires: a regular file, the header length, the JSON (unique names), dtypes
// (F32, F16, BF16, F64), shapes against byte ranges, and ranges that tile the data section to the end of the file;
// errors name the file and the tensor.
TensorFile readSafetensors(const std::string& path);

// A checkpoint sharded as save_pretrained writes it: `indexPath` (model.safetensors.index.json) maps each tensor name
// to a shard file in the same folder ("weight_map"). Every shard is read and checked as readSafetensors does; the
// tensors of all shards must be exactly those the index maps, each in the shard the index names (so no name is in two
// shards). The result holds every tensor; metadata of the shards is merged (the first shard's value wins).
TensorFile readShardedSafetensors(const std::string& indexPath);

// Writes every tensor as F32 (whatever its `stored` type) to `path` through a temporary file renamed into place, so a
// crash never leaves a torn file.
void writeSafetensors(const std::string& path, const TensorFile& file);

}  // namespace glnet
