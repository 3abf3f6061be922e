// A language model from a Hugging Face folder (config.json, the safetensors weights, tokenizer.json) on the GPU, and
// text generation with it: the one engine API that glnet_generate, glnet_serve and Python's glnet.load use.
#pragma once

#include "decoder/Decoder.h"
#include "text/ByteLevelBpe.h"

#include <optional>
#include <string>
#include <vector>

namespace glnet {

class LanguageModel {
 public:
  // `contextPositions` 0: the config's, at most Decoder::defaultContextLimit. `storage`: the decode step's weights;
  // none: as the files store them (bf16 or fp16 where every tensor is, else fp32), so that no value is rounded. Throws
  // glnet::Error (FileNotFound for a missing file) naming the file and what is wrong with it. `sequences`: how many
  // generations may decode together (Decoder's sequences).
  LanguageModel(const Context& context, const std::string& folder, std::uint32_t contextPositions = 0,
                std::optional<WeightStorage> storage = std::nullopt, std::uint32_t sequences = 1);
  const ByteLevelBpe& tokenizer() const { return tokenizer_; }
  Decoder& decoder() { return decoder_; }
  const DecoderConfig& config() const { return decoder_.config(); }
  double loadSeconds() const { return loadSeconds_; }

 private:
  LanguageModel(const Context& context, const std::string& folder, DecoderConfig config, std::uint32_t contextPositions,
                std::optional<WeightStorage> storage, std::uint32_t sequences);
  ByteLevelBpe tokenizer_;
  double loadSeconds_ = 0;  // set while decoder_ loads: declared before it
  Decoder decoder_;
};

// "fp32", "fp16" or "bf16" (a --weights value); a UsageError naming the option otherwise.
WeightStorage weightStorageNamed(const std::string& name);

struct GenerationSettings {
  std::uint32_t maxNewTokens = 64;
  SamplingSettings sampling;
  // Generation stops before any of these texts (none of it is returned); the config's end-of-text tokens always stop it.
  std::vector<std::string> stops;
};

struct GenerationStats {
  std::size_t promptTokens = 0;
  std::vector<std::uint32_t> generatedIds;  // the end-of-text token that stopped it excluded
  double prefillSeconds = 0, decodeSeconds = 0;
  std::string stopReason;  // "length", "end of text", "stop text", "context full"; empty while running
  double prefillTokensPerSecond() const { return prefillSeconds > 0 ? promptTokens / prefillSeconds : 0; }
  // The first generated token comes from the prompt's pass; decode steps make the rest.
  double decodeTokensPerSecond() const {
    return generatedIds.size() > 1 && decodeSeconds > 0 ? (generatedIds.size() - 1) / decodeSeconds : 0;
  }
};

// One generation in one of the decoder's sequences, a piece of text at a time: the constructor runs the prompt; each
// next() returns the text that the next token completes (empty while a character spans tokens or might begin a stop
// text), or nothing once generation has ended. One generation per sequence at a time.
class Generation {
 public:
  Generation(LanguageModel& model, const std::string& prompt, const GenerationSettings& settings, std::uint32_t sequence = 0);
  // Ends the sequence's decoding: destroy a generation before another starts in its sequence.
  ~Generation();
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  // Alone in the decoder: takes the decode step it needs itself (Decoder::next).
  std::optional<std::string> next();

  // Decoded together with others (a server runs Decoder::step for all): the text of the token chosen last (and, where
  // the generation ends there, of its end); then either ended(), or the generation waits for the next step, whose id
  // for this sequence accept() takes (throws glnet::Error for a NaN's id).
  std::string advance();
  void accept(std::uint32_t id, double stepSeconds);
  bool ended() const { return ended_; }
  std::uint32_t sequence() const { return sequence_; }

  const GenerationStats& stats() const { return stats_; }

 private:
  std::string filtered(const std::string& piece);
  std::string finish();
  // The text of the token chosen last; generation has ended where it is an end-of-text token or completes a stop text.
  std::string taken();
  // Whether generation ends before another step (its length, or the context's end), setting the reason.
  bool endsBeforeStep();
  LanguageModel& model_;
  std::uint32_t sequence_;
  GenerationSettings settings_;
  TextStream stream_;
  GenerationStats stats_;
  std::string held_;  // text that might begin a stop text
  std::optional<std::uint32_t> token_;  // chosen, not yet returned
  bool ended_ = false;
};

}  // namespace glnet
