// A Hugging Face decoder-only language model's config.json, as save_pretrained writes it, read into the numbers glnet's
// decoder needs. GPT-2 (GPT2LMHeadModel) and the Llama family (LlamaForCausalLM, Qwen2ForCausalLM,
// MistralForCausalLM) are read; a field that would change the computation in a way glnet does not implement (another
// activation, sliding-window attention, another rope scaling) is refused by name rather than ignored.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace glnet {

enum class DecoderFamily { gpt2, llama };

struct RopeScaling {
  enum class Type { none, linear, llama3 } type = Type::none;
  double factor = 1, lowFrequencyFactor = 1, highFrequencyFactor = 4;
  std::uint32_t originalMaxPositions = 0;
};

struct DecoderConfig {
  std::string architecture;  // "GPT2LMHeadModel", "LlamaForCausalLM", "Qwen2ForCausalLM", "MistralForCausalLM"
  DecoderFamily family = DecoderFamily::gpt2;
  std::uint32_t layers = 0, hidden = 0, heads = 0, kvHeads = 0, headDim = 0, intermediate = 0, vocabulary = 0, maxPositions = 0;
  double normEpsilon = 0;
  bool tiedEmbeddings = false;
  bool attentionBias = false;        // query, key and value projections
  bool attentionOutputBias = false;  // the output projection
  bool mlpBias = false;
  double ropeTheta = 10000;  // llama family
  RopeScaling ropeScaling;
  std::optional<std::uint32_t> bosTokenId;
  std::vector<std::uint32_t> eosTokenIds;  // config.json has an int or a list
  std::string storedDtype;                 // its torch_dtype (or dtype) field, "" if absent
};

// Reads `folder`/config.json. Throws glnet::Error naming the file and the field for a missing or mistyped field, a
// value out of range, or a model glnet does not run (listing the supported architectures).
DecoderConfig readDecoderConfig(const std::string& folder);

// The inverse frequencies of the rotary embedding, headDim / 2 of them: 1 / theta^(2i / headDim), then scaled as
// config's rope_scaling says (linear: divided by the factor; llama3: Llama 3.1's blend of the two by wavelength), as
// Hugging Face's rope initialisation computes them (in double here).
std::vector<double> ropeInverseFrequencies(const DecoderConfig& config);

}  // namespace glnet
