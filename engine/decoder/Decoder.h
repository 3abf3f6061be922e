// A language model's decoder on the GPU (GPT-2 and the Llama family): its weights uploaded once, a KV cache of
// `context` positions per layer, a prompt run as one batched pass (prefill: causal fused attention over the prompt),
// then one recorded plan per decode step, replayed at every position with the position as a plan parameter, so that
// a step issues its dispatches with no host work between them. A step ends with the next token chosen on the GPU;
// the host reads back only its id.
#pragma once

#include "decoder/DecoderConfig.h"
#include "decoder/DecoderWeights.h"
#include "gl/Context.h"
#include "ops/Decoding.h"
#include "ops/NextToken.h"

#include <memory>
#include <optional>
#include <vector>

namespace glnet {

class Decoder {
 public:
  // The cache's positions when none is asked for: the config's, at most this many (a Llama 3 config's 131 072 would
  // hold gigabytes of cache that a chat never fills); --max-context raises it.
  static constexpr std::uint32_t defaultContextLimit = 8192;
  // The most positions a cache may hold (2^20: the attention's key chunks stay within a dispatch's groups).
  static constexpr std::uint32_t largestContext = 1u << 20;
  // `context` 0: the default above. `storage`: how the decode step's dense weights are held (fp16 and bf16 halve the
  // bytes a step reads, the arithmetic staying fp32; the prompt's pass keeps float32 copies). Throws glnet::Error when
  // the weights do not fit the config or the context is more than largestContext.
  Decoder(const Context& context, DecoderConfig config, const DecoderWeights& weights, std::uint32_t contextPositions = 0,
          WeightStorage storage = WeightStorage::fp32);
  ~Decoder();
  Decoder(Decoder&&) noexcept;
  Decoder& operator=(Decoder&&) = delete;
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  const DecoderConfig& config() const;
  std::uint32_t context() const;
  // Tokens in the cache: the prompt and every token fed since.
  std::uint32_t position() const;

  // The logits [ids.size(), vocabulary] after each token of `ids`, run from position 0 (the cache refilled with them).
  std::vector<float> logits(const std::vector<std::uint32_t>& ids);
  // Runs `prompt` from position 0 and chooses the token after it with `sampling`; each next() then feeds the token
  // chosen last and chooses the one after it. Throws glnet::Error when the cache is full or the logits are NaN.
  std::uint32_t start(const std::vector<std::uint32_t>& prompt, const SamplingSettings& sampling);
  std::uint32_t next();
  // next() with every dispatch of the step timed on the GPU (timestamp queries; waits for each): the token, and per
  // dispatch its label and milliseconds in issue order.
  std::uint32_t profiledNext(std::vector<std::pair<std::string, double>>& dispatchMilliseconds);

  // What the next decode step issues (at the current position), for reports: dispatches, barriers, and the bytes of
  // weights it reads; the step's weight storage.
  std::size_t stepDispatches() const;
  std::size_t stepBarriers() const;
  std::size_t weightBytes() const;
  WeightStorage weightStorage() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace glnet
