#include "ops/Decoding.h"

#include "base/Bfloat16.h"
#include "base/Float16.h"
#include "base/check.h"
#include "gl/Limits.h"
#include "gl/Program.h"
#include "numbers/Activation.h"
#include "plan/Groups.h"

#include <algorithm>
#include <cstring>

namespace glnet {
namespace {

// The uniform at `location` that `value` describes (a constant or a plan parameter).
Uniform at(int location, Uniform value) {
  value.location = location;
  return value;
}

}  // namespace

Dispatch tokenEmbedding(ProgramCache& programs, const BufferView& ids, const BufferView& tokens, const BufferView& positions,
                        std::uint32_t positionRows, const BufferView& y, std::uint32_t rows, std::uint32_t columns,
                        std::uint32_t vocabulary, const RowPositions& atPositions) {
  const bool withPositions = positionRows > 0, perRow = withPositions && atPositions.perRow;
  const std::uint64_t count = std::uint64_t{rows} * columns;
  std::vector<ShaderDefine> defines;
  if (withPositions) defines.push_back({"HAS_POSITIONS", "1"});
  if (perRow) defines.push_back({"ROW_POSITIONS", "1"});
  Dispatch dispatch = linearDispatch(programs.get("TokenEmbedding.glsl", defines), withPositions ? "token + position embedding" : "token embedding", count);
  dispatch.buffers = {{0, ids, Access::read}, {1, tokens, Access::read}, {3, y, Access::write}};
  if (withPositions) dispatch.buffers.push_back({2, positions, Access::read});
  if (perRow) dispatch.buffers.push_back({4, *atPositions.perRow, Access::read});
  dispatch.uniforms = {Uniform::u32(0, static_cast<std::uint32_t>(count)), Uniform::u32(1, columns), Uniform::u32(2, vocabulary)};
  if (withPositions) {
    if (!perRow) dispatch.uniforms.push_back(at(3, atPositions.first));
    dispatch.uniforms.push_back(Uniform::u32(4, positionRows));
  }
  return dispatch;
}

Dispatch appendToCache(ProgramCache& programs, const BufferView& qkv, const BufferView& cache, bool rotary, const BufferView& cosines,
                       const BufferView& sines, const CacheShape& shape, std::uint32_t rows, const RowPositions& atPositions) {
  GLNET_ASSERT(!rotary || shape.headSize % 2 == 0, "rotary positions take an even head size");
  const std::uint64_t copies = std::uint64_t{rows} * shape.kvHeads * shape.headSize;
  const std::uint64_t pairs = rotary ? std::uint64_t{rows} * (shape.heads + shape.kvHeads) * (shape.headSize / 2) : 0;
  std::vector<ShaderDefine> defines;
  if (rotary) defines.push_back({"ROTARY", "1"});
  if (atPositions.perRow) defines.push_back({"ROW_POSITIONS", "1"});
  Dispatch dispatch = linearDispatch(programs.get("RotaryCache.glsl", defines), rotary ? "rotary + cache append" : "cache append", pairs + copies);
  dispatch.buffers = {{0, qkv, rotary ? Access::readWrite : Access::read}, {1, cache, Access::write}};
  if (rotary) {
    dispatch.buffers.push_back({2, cosines, Access::read});
    dispatch.buffers.push_back({3, sines, Access::read});
  }
  if (atPositions.perRow) dispatch.buffers.push_back({4, *atPositions.perRow, Access::read});
  dispatch.uniforms = {Uniform::u32(0, static_cast<std::uint32_t>(pairs + copies)), Uniform::u32(1, rows), Uniform::u32(2, shape.heads),
                       Uniform::u32(3, shape.kvHeads), Uniform::u32(4, shape.headSize), Uniform::u32(6, shape.context)};
  if (!atPositions.perRow) dispatch.uniforms.push_back(at(5, atPositions.first));
  return dispatch;
}

Dispatch swiGlu(ProgramCache& programs, const BufferView& x, const BufferView& y, std::uint32_t rows, std::uint32_t inner) {
  const std::uint64_t count = std::uint64_t{rows} * inner;
  Dispatch dispatch = linearDispatch(programs.get("SwiGlu.glsl"), "swiglu", count);
  dispatch.buffers = {{0, x, Access::read}, {1, y, Access::write}};
  dispatch.uniforms = {Uniform::u32(0, static_cast<std::uint32_t>(count)), Uniform::u32(1, inner)};
  return dispatch;
}

void checkGemvInputs(std::uint32_t inputs, const std::string& what) {
  if (inputs % 4 != 0) {
    throw Error("glnet's decode kernels read rows in runs of 4 floats: " + what + " of " + std::to_string(inputs) + " is not a multiple of 4");
  }
}

std::vector<std::uint32_t> packWeights(const std::vector<float>& values, WeightStorage storage) {
  if (storage == WeightStorage::fp32) {
    std::vector<std::uint32_t> bits(values.size());
    std::memcpy(bits.data(), values.data(), values.size() * sizeof(float));
    return bits;
  }
  GLNET_ASSERT(values.size() % 2 == 0, "16-bit weights are packed in pairs (rows of a multiple of 4)");
  const auto narrow = [storage](float value) -> std::uint32_t { return storage == WeightStorage::fp16 ? floatToHalf(value) : toBfloat16(value); };
  std::vector<std::uint32_t> packed(values.size() / 2);
  for (std::size_t i = 0; i < packed.size(); ++i) packed[i] = narrow(values[2 * i]) | narrow(values[2 * i + 1]) << 16;
  return packed;
}

float storedWeight(float value, WeightStorage storage) {
  switch (storage) {
    case WeightStorage::fp32: return value;
    case WeightStorage::fp16: return halfToFloat(floatToHalf(value));
    case WeightStorage::bf16: return fromBfloat16(toBfloat16(value));
  }
  return value;
}

std::uint32_t gemvRowLimit() {
  // Gemv.glsl's partial sums, a float per invocation and row, beside the norms' two reductions.
  const std::size_t perRow = sizeof(float) * static_cast<std::size_t>(currentLimits().groupSize());
  const auto room = static_cast<std::size_t>(currentLimits().maxSharedMemoryBytes);
  return static_cast<std::uint32_t>(std::min<std::size_t>(32, room > 2 * perRow ? room / perRow - 2 : 0));
}

Dispatch gemv(ProgramCache& programs, const GemvLayer& layer, const BufferView& x, const BufferView& weight, const BufferView& bias,
              const BufferView& y, std::uint32_t outputs, std::uint32_t inputs, const BufferView* residual, const BufferView* gamma,
              const BufferView* beta, const CacheAppend* append) {
  checkGemvInputs(inputs, "a layer's input size");
  const bool normed = layer.input == GemvInput::layerNorm || layer.input == GemvInput::rmsNorm;
  GLNET_ASSERT(!normed || gamma, "a normed input needs its gamma");
  GLNET_ASSERT(layer.input != GemvInput::layerNorm || beta, "a layer norm needs its beta");
  GLNET_ASSERT(!layer.residual || residual, "a residual layer needs its residual");
  GLNET_ASSERT(layer.rows == 1 || !normed, "a normed input takes one row");
  if (layer.rows == 0 || layer.rows > gemvRowLimit()) {
    throw DeviceLimitError("a decode step's dense layer takes 1 to " + std::to_string(gemvRowLimit()) + " rows on this device, not " +
                           std::to_string(layer.rows));
  }
  // Teams per output: enough groups (about 1024, several per multiprocessor of a large GPU) for the memory to stay busy,
  // while each team still has a run of 32 vec4s to read per pass.
  const std::uint32_t teams = static_cast<std::uint32_t>(currentLimits().groupSize()) / 32;
  std::uint32_t teamsPerRow = 1;
  while (teamsPerRow < 8 && teamsPerRow < teams && std::uint64_t{outputs} * teamsPerRow / teams < 1024 && inputs / 4 >= 64 * teamsPerRow) teamsPerRow *= 2;
  std::vector<ShaderDefine> defines{kindDefine(layer.input), kindDefine(layer.weights), kindDefine(Activation::none),
                                    {"TEAMS_PER_ROW", std::to_string(teamsPerRow)}, {"ROWS", std::to_string(layer.rows)}};
  if (layer.residual) defines.push_back({"RESIDUAL", "1"});
  if (append) {
    GLNET_ASSERT(outputs == append->shape.qkvWidth(), "a layer that appends to the cache is the q/k/v projection");
    defines.push_back({"CACHE_APPEND", "1"});
  }
  for (const ShaderDefine& define : layer.after.fusedDefines()) defines.push_back(define);
  const Program& program = programs.get("Gemv.glsl", defines, layer.after.fusedIncludes());
  GLNET_ASSERT(static_cast<std::uint32_t>(program.localSize()[0]) == teams * 32, "Gemv.glsl's group is the device's group size");
  const std::uint32_t rowsPerGroup = teams / teamsPerRow;
  Dispatch dispatch;
  dispatch.program = &program;
  dispatch.label = std::string("gemv") + (layer.weights != WeightStorage::fp32 ? std::string(" ") + kindName(layer.weights) : "") + (layer.input != GemvInput::plain ? std::string(" on ") + kindName(layer.input) : "") +
                   (layer.after.kind != PointwiseKind::identity ? ", " + layer.after.name() : "") + (layer.residual ? ", + residual" : "") +
                   (append ? ", + cache append" : "") + " " + std::to_string(outputs) + "x" + std::to_string(inputs) +
                   (layer.rows > 1 ? " (" + std::to_string(layer.rows) + " rows)" : "");
  dispatch.groups = {(outputs + rowsPerGroup - 1) / rowsPerGroup, 1, 1};
  dispatch.linear = true;
  dispatch.buffers = {{0, x, Access::read}, {1, weight, Access::read}, {2, bias, Access::read}, {3, y, Access::write}};
  if (layer.residual) dispatch.buffers.push_back({4, *residual, Access::read});
  if (normed) dispatch.buffers.push_back({5, *gamma, Access::read});
  if (layer.input == GemvInput::layerNorm) dispatch.buffers.push_back({6, *beta, Access::read});
  dispatch.uniforms = {Uniform::u32(0, outputs), Uniform::u32(1, inputs), Uniform::f32(2, layer.epsilon)};
  if (append) {
    const CacheShape& c = append->shape;
    dispatch.buffers.push_back({7, append->cache, Access::write});
    dispatch.buffers.push_back({8, append->positions, Access::read});
    for (const auto& [location, value] : {std::pair{4, c.context}, {5, c.heads * c.headSize}, {6, c.kvHeads * c.headSize}, {7, c.headSize}}) {
      dispatch.uniforms.push_back(Uniform::u32(location, value));
    }
  }
  return dispatch;
}

std::uint32_t DecodeAttention::chunk(const CacheShape& shape) {
  const std::size_t groupHeads = shape.heads / shape.kvHeads, room = static_cast<std::size_t>(currentLimits().maxSharedMemoryBytes);
  // DecodeAttention.glsl's shared arrays: the queries, the staged chunk, the weights and their reduction, 2 per head.
  const auto bytes = [&](std::size_t keys) { return sizeof(float) * (groupHeads * shape.headSize + keys * (shape.headSize + 1) + 2 * groupHeads * keys + 2 * groupHeads); };
  for (std::uint32_t keys = 64; keys >= 8; keys /= 2) {
    if (bytes(keys) <= room) return keys;
  }
  throw DeviceLimitError("decode attention over heads of " + std::to_string(shape.headSize) + " features (" + std::to_string(groupHeads) +
                         " query heads per KV head) needs " + std::to_string(bytes(8)) + " bytes of shared memory; this device has " +
                         std::to_string(room) + " (GL_MAX_COMPUTE_SHARED_MEMORY_SIZE)");
}

std::size_t DecodeAttention::workspaceBytes(const CacheShape& shape, std::uint32_t rows) {
  return sizeof(float) * std::size_t{splits(shape.context, shape)} * rows * shape.heads * (shape.headSize + 2);
}

std::vector<Dispatch> DecodeAttention::record(ProgramCache& programs, const BufferView& qkv, const BufferView& cache,
                                              const BufferView& workspace, const BufferView& y, const CacheShape& shape, float scale,
                                              const BufferView& positions, std::uint32_t rows, const Uniform& splitCount, bool singlePass) {
  GLNET_ASSERT(rows >= 1 && rows <= 65535, "a decode step's rows are a dispatch's z groups");
  const std::uint32_t groupHeads = shape.heads / shape.kvHeads;
  std::vector<ShaderDefine> defines{{"HEAD_D", std::to_string(shape.headSize)},
                                    {"GROUP_HEADS", std::to_string(groupHeads)},
                                    {"CHUNK", std::to_string(chunk(shape))}};
  if (singlePass) defines.push_back({"SINGLE_PASS", "1"});
  Dispatch attend;
  attend.program = &programs.get("DecodeAttention.glsl", defines);
  attend.label = "decode attention D" + std::to_string(shape.headSize) + (groupHeads > 1 ? " GQA " + std::to_string(groupHeads) : "") +
                 (singlePass ? "" : " split");
  attend.groups = {singlePass ? 1 : splits(shape.context, shape), shape.kvHeads, rows};
  attend.buffers = {{0, qkv, Access::read}, {1, cache, Access::read}, {2, singlePass ? y : workspace, Access::write}, {3, positions, Access::read}};
  attend.uniforms = {singlePass ? Uniform::u32(1, 1) : at(1, splitCount), Uniform::u32(2, shape.heads), Uniform::u32(3, shape.context),
                     Uniform::f32(4, scale)};
  if (singlePass) return {attend};
  const std::uint32_t rowWidth = shape.heads * shape.headSize, count = rows * rowWidth;
  Dispatch combine = linearDispatch(programs.get("AttentionCombine.glsl"), "attention combine", count);
  combine.buffers = {{0, workspace, Access::read}, {1, y, Access::write}};
  // AttentionCombine.glsl's output strides (batch, head, query, feature): rows as its batch, heads after one another.
  combine.uniforms = {Uniform::u32(0, count), at(1, splitCount), Uniform::u32(2, shape.heads), Uniform::u32(3, 1), Uniform::u32(4, shape.headSize),
                      Uniform::u32(5, rowWidth), Uniform::u32(6, shape.headSize), Uniform::u32(7, rowWidth), Uniform::u32(8, 1)};
  return {attend, combine};
}

}  // namespace glnet
