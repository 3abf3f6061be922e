// Bindings of the kernels only a language model's decoder runs (engine/decoder/): token embedding, rotary positions
// with the KV cache append, the SwiGLU gate, and a decode step's attention over the cache with its key splits. Each
// position a decode step depends on is read by the GPU (a plan parameter, or a buffer of one position per row), so that
// a plan recorded once replays at every position. A decode step may take several sequences at once (continuous
// batching): one row each, row r with its own position and its own cache, the r-th of a layer's cache buffer.
#pragma once

#include "numbers/ShaderModes.h"
#include "ops/Pointwise.h"
#include "plan/Plan.h"
#include "plan/ProgramCache.h"

#include <cstdint>
#include <optional>

namespace glnet {

// The sizes of a decoder's attention and its KV cache (RotaryCache.glsl's layout).
struct CacheShape {
  std::uint32_t heads = 0, kvHeads = 0, headSize = 0;
  std::uint32_t context = 0;  // positions per head
  std::uint32_t qkvWidth() const { return (heads + 2 * kvHeads) * headSize; }
  // Floats of one layer's cache of one sequence: K then V.
  std::size_t layerFloats() const { return std::size_t{2} * kvHeads * context * headSize; }
};

// Where rows sit in their sequences: one sequence from `first` on (a prompt), or, with `perRow` (uint32 per row), each
// row a sequence of its own at perRow[r] whose cache is the r-th of the cache binding (a decode step of several).
struct RowPositions {
  Uniform first = Uniform::u32(0, 0);
  std::optional<BufferView> perRow;
};

// y [rows, C] = tokens[ids] (+ positions[row's position]: pass a positions view with `positionRows` > 0).
Dispatch tokenEmbedding(ProgramCache& programs, const BufferView& ids, const BufferView& tokens, const BufferView& positions,
                        std::uint32_t positionRows, const BufferView& y, std::uint32_t rows, std::uint32_t columns,
                        std::uint32_t vocabulary, const RowPositions& at);

// The rows' keys and values of `qkv` into a layer's cache at their positions; with cosine and sine tables ([context,
// headSize / 2], `rotary`) the queries (in place) and keys rotated first.
Dispatch appendToCache(ProgramCache& programs, const BufferView& qkv, const BufferView& cache, bool rotary, const BufferView& cosines,
                       const BufferView& sines, const CacheShape& shape, std::uint32_t rows, const RowPositions& at);

// y [rows, I] = silu(x[:, :I])·x[:, I:].
Dispatch swiGlu(ProgramCache& programs, const BufferView& x, const BufferView& y, std::uint32_t rows, std::uint32_t inner);

// A decode step's dense layer for `rows` rows (sequences), y [rows, N] = after(x'·Wᵀ + b (+ r)), W [N, K] read once for
// all rows, with x' what `input` makes of x as the kernel reads it (Gemv.glsl): x itself, its layer or RMS norm (gamma,
// beta [K]; one row only), or the SwiGLU gate of a [rows, 2K] x. K must be a multiple of 4 (checkGemvInputs).
struct GemvLayer {
  GemvInput input = GemvInput::plain;
  std::uint32_t rows = 1;
  WeightStorage weights = WeightStorage::fp32;  // W packed by packWeights
  Pointwise after;
  float epsilon = 0;
  bool residual = false;
};
// A q/k/v layer's keys and values also written into a layer's cache, row r's into the r-th cache at positions[r]
// (uint32 per row; Gemv.glsl's CACHE_APPEND), for models without rotary positions.
struct CacheAppend {
  BufferView cache;
  CacheShape shape;
  BufferView positions;
};
// The most rows a Gemv dispatch takes on this device (its partial sums per row in shared memory).
std::uint32_t gemvRowLimit();
void checkGemvInputs(std::uint32_t inputs, const std::string& what);
// W's values as `storage` holds them (rounded to nearest even): float32's bits, or two 16-bit values per uint32.
std::vector<std::uint32_t> packWeights(const std::vector<float>& values, WeightStorage storage);
// The values packWeights keeps (for references).
float storedWeight(float value, WeightStorage storage);
Dispatch gemv(ProgramCache& programs, const GemvLayer& layer, const BufferView& x, const BufferView& weight, const BufferView& bias,
              const BufferView& y, std::uint32_t outputs, std::uint32_t inputs, const BufferView* residual = nullptr,
              const BufferView* gamma = nullptr, const BufferView* beta = nullptr, const CacheAppend* append = nullptr);

// A decode step's attention for `rows` sequences: row r's query row of `qkv` against keys [0, positions[r] + 1) of the
// r-th cache, y [rows, H·D] (heads after one another, as the output projection reads them). `splits` is a Uniform (a
// plan parameter: splits() of the most keys of any row). Single pass (while every row's keys ≤ chunk(D)): one dispatch
// that writes y; otherwise a group per chunk of keys and their combination (two dispatches), `workspace` holding
// workspaceBytes.
struct DecodeAttention {
  // Keys per group: 64, or fewer where the device's shared memory does not hold them staged (D + 1 floats each) with
  // the group's queries and weights. Throws DeviceLimitError where not even 8 fit.
  static std::uint32_t chunk(const CacheShape& shape);
  static std::uint32_t splits(std::uint32_t keys, const CacheShape& shape) { return (keys + chunk(shape) - 1) / chunk(shape); }
  static std::size_t workspaceBytes(const CacheShape& shape, std::uint32_t rows = 1);
  static std::vector<Dispatch> record(ProgramCache& programs, const BufferView& qkv, const BufferView& cache, const BufferView& workspace,
                                      const BufferView& y, const CacheShape& shape, float scale, const BufferView& positions,
                                      std::uint32_t rows, const Uniform& splits, bool singlePass);
};

}  // namespace glnet
