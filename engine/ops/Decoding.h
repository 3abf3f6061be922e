// Bindings of the kernels only a language model's decoder runs (engine/decoder/): token embedding, rotary positions
// with the KV cache append, the SwiGLU gate, and a decode step's attention over the cache with its key splits. Each
// position a decode step depends on is a Uniform, so that a plan recorded once replays at every position with the
// position as a plan parameter.
#pragma once

#include "numbers/ShaderModes.h"
#include "ops/Pointwise.h"
#include "plan/Plan.h"
#include "plan/ProgramCache.h"

#include <cstdint>

namespace glnet {

// The sizes of a decoder's attention and its KV cache (RotaryCache.glsl's layout).
struct CacheShape {
  std::uint32_t heads = 0, kvHeads = 0, headSize = 0;
  std::uint32_t context = 0;  // positions per head
  std::uint32_t qkvWidth() const { return (heads + 2 * kvHeads) * headSize; }
  // Floats of one layer's cache: K then V.
  std::size_t layerFloats() const { return std::size_t{2} * kvHeads * context * headSize; }
};

// y [rows, C] = tokens[ids] (+ positions[first + r]: pass a positions view with `positionRows` > 0).
Dispatch tokenEmbedding(ProgramCache& programs, const BufferView& ids, const BufferView& tokens, const BufferView& positions,
                        std::uint32_t positionRows, const BufferView& y, std::uint32_t rows, std::uint32_t columns,
                        std::uint32_t vocabulary, const Uniform& firstPosition);

// The rows' keys and values of `qkv` into a layer's cache at positions first, first + 1, ...; with cosine and sine
// tables ([context, headSize / 2], `rotary`) the queries (in place) and keys rotated first.
Dispatch appendToCache(ProgramCache& programs, const BufferView& qkv, const BufferView& cache, bool rotary, const BufferView& cosines,
                       const BufferView& sines, const CacheShape& shape, std::uint32_t rows, const Uniform& firstPosition);

// y [rows, I] = silu(x[:, :I])·x[:, I:].
Dispatch swiGlu(ProgramCache& programs, const BufferView& x, const BufferView& y, std::uint32_t rows, std::uint32_t inner);

// A decode step's dense layer for one row, y [N] = after(W·x' + b (+ r)), W [N, K], with x' what `input` makes of x
// as the kernel reads it (Gemv.glsl): x itself, its layer or RMS norm (gamma, beta [K]), or the SwiGLU gate of a
// [2K] x. K must be a multiple of 4 (checkGemvInputs).
struct GemvLayer {
  GemvInput input = GemvInput::plain;
  WeightStorage weights = WeightStorage::fp32;  // W packed by packWeights
  Pointwise after;
  float epsilon = 0;
  bool residual = false;
};
// A q/k/v layer's keys and values also written into a layer's cache at `position` (Gemv.glsl's CACHE_APPEND), for
// models without rotary positions.
struct CacheAppend {
  BufferView cache;
  CacheShape shape;
  Uniform position;
};
void checkGemvInputs(std::uint32_t inputs, const std::string& what);
// W's values as `storage` holds them (rounded to nearest even): float32's bits, or two 16-bit values per uint32.
std::vector<std::uint32_t> packWeights(const std::vector<float>& values, WeightStorage storage);
// The values packWeights keeps (for references).
float storedWeight(float value, WeightStorage storage);
Dispatch gemv(ProgramCache& programs, const GemvLayer& layer, const BufferView& x, const BufferView& weight, const BufferView& bias,
              const BufferView& y, std::uint32_t outputs, std::uint32_t inputs, const BufferView* residual = nullptr,
              const BufferView* gamma = nullptr, const BufferView* beta = nullptr, const CacheAppend* append = nullptr);

// A decode step's attention: the one query row of `qkv` against keys [0, keys) of `cache`, y [H·D] (heads after one
// another, as the output projection reads them). `keys` and `splits` are Uniforms (plan parameters: the position + 1
// and splits() of it). Single pass (while keys ≤ chunk(D)): one dispatch that writes y; otherwise a group per chunk of
// keys and their combination (two dispatches), `workspace` holding workspaceBytes.
struct DecodeAttention {
  // Keys per group: 64, or fewer where the device's shared memory does not hold them staged (D + 1 floats each) with
  // the group's queries and weights. Throws DeviceLimitError where not even 8 fit.
  static std::uint32_t chunk(const CacheShape& shape);
  static std::uint32_t splits(std::uint32_t keys, const CacheShape& shape) { return (keys + chunk(shape) - 1) / chunk(shape); }
  static std::size_t workspaceBytes(const CacheShape& shape);
  static std::vector<Dispatch> record(ProgramCache& programs, const BufferView& qkv, const BufferView& cache, const BufferView& workspace,
                                      const BufferView& y, const CacheShape& shape, float scale, const Uniform& keys,
                                      const Uniform& splits, bool singlePass);
};

}  // namespace glnet
