// How the next token is chosen from logits (shaders/NextToken.glsl, ops/NextToken, the float64 reference ref::nextTokens),
// and the uniform number each row draws: one definition, compiled as C++ here and as GLSL in the shader.
#pragma once

#include <cstdint>
#include <string>

namespace glnet {

// Hugging Face generate's semantics: logits / temperature, then top-k keeps the k largest (and every one equal to the
// k-th), then top-p keeps the smallest set of the most probable whose probability sum reaches p (tokens of equal
// logits kept or left together; always at least one), then a draw from the renormalised distribution: the first token,
// in id order, at which the running sum of the kept probabilities passes the row's uniform number u. The GPU sums
// weights exp((z − max)/T) as fixed point in units of 2^-31 of the largest's (exact sums, so a seed gives the same
// tokens on every run): a token whose logit lies more than 22·T below the largest is never drawn (together such
// tokens hold at most V·2^-32 of the probability: 3·10^-5 at V = 128 256).
struct SamplingSettings {
  float temperature = 0;  // 0: greedy (the first largest logit)
  std::uint32_t topK = 0;  // 0: off
  float topP = 1;          // 1: off
  std::uint64_t seed = 0;
  bool greedy() const { return temperature == 0; }
  // A UsageError naming the option (--temperature, --top-p) for a negative, infinite, NaN or denormal temperature, a
  // top-p outside (0, 1].
  void check() const;
};

// The draw of one row at one decode step: 32 bits from a counter-based hash of (seed, step, row) (Chris Wellons'
// lowbias32 mix, three rounds), so that a run is reproducible and each step draws afresh. u = bits / 2^32 in [0, 1).
// GLNET_DRAW_BITS is the hash as an expression over uint32 `h` (a scratch variable), seedLow, seedHigh, decodeStep and
// row, valid C++ and GLSL alike: drawBits below compiles it, and ops/NextToken gives the shader its text (drawBitsGlsl).
#define GLNET_DRAW_MIX (h ^= h >> 16, h *= 0x7feb352dU, h ^= h >> 15, h *= 0x846ca68bU, h ^= h >> 16)
#define GLNET_DRAW_BITS \
  (h = row * 0x9e3779b9U ^ decodeStep, GLNET_DRAW_MIX, h ^= seedLow, GLNET_DRAW_MIX, h ^= seedHigh, GLNET_DRAW_MIX, h)

inline std::uint32_t drawBits(std::uint64_t seed, std::uint32_t decodeStep, std::uint32_t row) {
  const auto seedLow = static_cast<std::uint32_t>(seed), seedHigh = static_cast<std::uint32_t>(seed >> 32);
  std::uint32_t h = 0;
  return GLNET_DRAW_BITS;
}

inline double drawUniform(std::uint64_t seed, std::uint32_t decodeStep, std::uint32_t row) {
  return drawBits(seed, decodeStep, row) / 4294967296.0;
}

// GLNET_DRAW_BITS's text, for the shader's DRAW_BITS define.
std::string drawBitsGlsl();

}  // namespace glnet
