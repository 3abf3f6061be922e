// A language model's decoder on the GPU (GPT-2 and the Llama family): its weights uploaded once, a KV cache of
// `context` positions per layer for each of its sequences, a prompt run as one batched pass (prefill: causal fused
// attention over the prompt), then one recorded plan per decode step, replayed at every position with the positions
// read by the GPU, so that a step issues its dispatches with no host work between them. A step ends with the next
// token chosen on the GPU; the host reads back only the ids.
// Several sequences decode together (continuous batching, for a server): each has its own cache and position, a step
// advances every started one with each weight read once for all of them, and a sequence may start (its prompt run on
// its own) or end between any two steps.
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
  // The most sequences decoded together.
  static constexpr std::uint32_t largestBatch = 16;
  // step()'s id for a sequence not started.
  static constexpr std::uint32_t noToken = 0xffffffffu;
  // The most sequences of `contextPositions` positions (0: the default) this device decodes together (their caches
  // bound at once, their rows in one dense-layer dispatch); 0 when not even one cache binds.
  static std::uint32_t sequencesThatFit(const Limits& limits, const DecoderConfig& config, std::uint32_t contextPositions);
  // `context` 0: the default above. `storage`: how the decode step's dense weights are held (fp16 and bf16 halve the
  // bytes a step reads, the arithmetic staying fp32; the prompt's pass keeps float32 copies). Throws glnet::Error when
  // the weights do not fit the config or the context is more than largestContext. `sequences`: how many decode
  // together (1 to largestBatch, each with a cache of `context` positions; DeviceLimitError past sequencesThatFit).
  Decoder(const Context& context, DecoderConfig config, const DecoderWeights& weights, std::uint32_t contextPositions = 0,
          WeightStorage storage = WeightStorage::fp32, std::uint32_t sequences = 1);
  ~Decoder();
  Decoder(Decoder&&) noexcept;
  Decoder& operator=(Decoder&&) = delete;
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  const DecoderConfig& config() const;
  std::uint32_t context() const;
  std::uint32_t sequences() const;
  // Tokens in a sequence's cache: its prompt and every token fed since.
  std::uint32_t position(std::uint32_t sequence = 0) const;

  // The logits [ids.size(), vocabulary] after each token of `ids`, run from position 0 of sequence 0 (its cache
  // refilled with them; it is no longer started).
  std::vector<float> logits(const std::vector<std::uint32_t>& ids);
  // Runs `prompt` from position 0 of `sequence` and chooses the token after it with `sampling`; the sequence is then
  // started: each step feeds the token it chose last and chooses the one after it. Throws glnet::Error when the logits
  // are NaN.
  std::uint32_t start(const std::vector<std::uint32_t>& prompt, const SamplingSettings& sampling, std::uint32_t sequence = 0);
  // One decode step of every started sequence: the ids by sequence, noToken for those not started, and the vocabulary
  // size for one whose logits hold a NaN (it is no longer started). Throws glnet::Error when none is started or a
  // started one's cache is full.
  std::vector<std::uint32_t> step();
  // The sequence takes no more steps (its cache is left to the next start()).
  void end(std::uint32_t sequence);
  // step() where sequence 0 alone is started: its token. Throws glnet::Error when it is not started, another one is,
  // or its logits are NaN.
  std::uint32_t next();
  // next() with every dispatch of the step timed on the GPU (timestamp queries; waits for each): the token, and per
  // dispatch its label and milliseconds in issue order.
  std::uint32_t profiledNext(std::vector<std::pair<std::string, double>>& dispatchMilliseconds);

  // What the last decode step issued, for reports (0 before any step has run): dispatches, barriers; the bytes of
  // weights a step reads; the step's weight storage.
  std::size_t stepDispatches() const;
  std::size_t stepBarriers() const;
  std::size_t weightBytes() const;
  WeightStorage weightStorage() const;

  // Defined in decoder/DecoderState.h, which only the decoder's own files include.
  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace glnet
