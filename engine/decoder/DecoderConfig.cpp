#include "decoder/DecoderConfig.h"

#include "base/FileInput.h"
#include "base/check.h"
#include "formats/UntrustedJson.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

namespace glnet {
namespace {

constexpr std::uint64_t largestConfigBytes = 4u << 20;
constexpr const char* supported = "GPT2LMHeadModel (gpt2), LlamaForCausalLM (llama), Qwen2ForCausalLM (qwen2), MistralForCausalLM (mistral)";

// The fields of one JSON object, each read with the error a user needs: the file, the field (with its parent for
// nested ones) and what it should be. JSON null counts as absent, as Hugging Face's configs write unset values.
class Fields {
 public:
  Fields(const nlohmann::json& object, std::string file, std::string prefix = "")
      : object_(object), file_(std::move(file)), prefix_(std::move(prefix)) {}

  bool has(const char* name) const { return object_.contains(name) && !object_[name].is_null(); }
  const nlohmann::json& at(const char* name) const { return object_[name]; }

  [[noreturn]] void fail(const char* name, const std::string& problem) const {
    throw Error(file_ + ": field " + prefix_ + name + " " + problem);
  }
  void require(const char* name) const {
    if (!has(name)) fail(name, "is missing");
  }

  // A count: an integer from `least` to 2^28 (far above any model's sizes; 4 n_embd and the products of sizes glnet
  // forms stay far from overflow).
  std::uint32_t count(const char* name, std::uint32_t least = 1) const {
    require(name);
    const nlohmann::json& value = at(name);
    constexpr std::int64_t most = std::int64_t{1} << 28;
    if (!value.is_number_integer() || value.get<std::int64_t>() < least || value.get<std::int64_t>() > most) {
      fail(name, "is " + describeJsonValue(value) + "; it must be an integer from " + std::to_string(least) + " to " + std::to_string(most));
    }
    return static_cast<std::uint32_t>(value.get<std::int64_t>());
  }
  std::uint32_t count(const char* name, std::uint32_t least, std::uint32_t fallback) const {
    return has(name) ? count(name, least) : fallback;
  }
  std::uint32_t tokenId(const nlohmann::json& value, const char* name) const {
    if (!value.is_number_integer() || value.get<std::int64_t>() < 0 || value.get<std::int64_t>() > std::numeric_limits<std::uint32_t>::max()) {
      fail(name, "holds " + describeJsonValue(value) + "; token ids are non-negative integers");
    }
    return static_cast<std::uint32_t>(value.get<std::int64_t>());
  }
  // A positive finite number.
  double positive(const char* name) const {
    require(name);
    const nlohmann::json& value = at(name);
    if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() <= 0) {
      fail(name, "is " + describeJsonValue(value) + "; it must be a positive number");
    }
    return value.get<double>();
  }
  double positive(const char* name, double fallback) const { return has(name) ? positive(name) : fallback; }
  bool flag(const char* name, bool fallback) const {
    if (!has(name)) return fallback;
    if (!at(name).is_boolean()) fail(name, "is " + describeJsonValue(at(name)) + "; it must be true or false");
    return at(name).get<bool>();
  }
  std::string text(const char* name, const std::string& fallback) const {
    if (!has(name)) return fallback;
    if (!at(name).is_string()) fail(name, "is " + describeJsonValue(at(name)) + "; it must be a string");
    return at(name).get<std::string>();
  }
  // A field that must hold `expected` (Hugging Face's default when absent) because glnet computes only that.
  void expectFlag(const char* name, bool expected) const {
    if (flag(name, expected) != expected) {
      fail(name, std::string("is ") + (expected ? "false" : "true") + "; glnet runs only " + (expected ? "true" : "false"));
    }
  }

 private:
  const nlohmann::json& object_;
  std::string file_;
  std::string prefix_;
};

// A short value from the file for a message: only printable text of modest length is echoed.
std::string shown(const std::string& text) {
  const bool printable = text.size() <= 64 && std::all_of(text.begin(), text.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
  return printable ? "'" + text + "'" : "a string of " + std::to_string(text.size()) + " bytes";
}

void readGpt2(const Fields& fields, DecoderConfig& config) {
  config.family = DecoderFamily::gpt2;
  config.layers = fields.count("n_layer");
  config.hidden = fields.count("n_embd");
  config.heads = fields.count("n_head");
  config.vocabulary = fields.count("vocab_size");
  config.maxPositions = fields.count("n_positions");
  if (config.hidden % config.heads != 0) {
    fields.fail("n_embd", "(" + std::to_string(config.hidden) + ") is not a multiple of n_head (" + std::to_string(config.heads) + ")");
  }
  config.kvHeads = config.heads;
  config.headDim = config.hidden / config.heads;
  config.intermediate = fields.count("n_inner", 1, 4 * config.hidden);  // null means 4 n_embd
  config.normEpsilon = fields.positive("layer_norm_epsilon", 1e-5);
  const std::string activation = fields.text("activation_function", "gelu_new");
  if (activation != "gelu_new") fields.fail("activation_function", "is " + shown(activation) + "; glnet runs GPT-2 with gelu_new only");
  fields.expectFlag("scale_attn_weights", true);
  fields.expectFlag("scale_attn_by_inverse_layer_idx", false);
  fields.expectFlag("reorder_and_upcast_attn", false);
  config.tiedEmbeddings = fields.flag("tie_word_embeddings", true);
  config.attentionBias = config.attentionOutputBias = config.mlpBias = true;
}

RopeScaling readRopeScaling(const nlohmann::json& value, const std::string& file, const char* field) {
  RopeScaling scaling;
  if (!value.is_object()) throw Error(file + ": field " + field + " is " + describeJsonValue(value) + "; it must be an object or null");
  const Fields fields(value, file, std::string(field) + ".");
  // Older configs spell the kind "type", newer ones "rope_type".
  const char* kindField = fields.has("rope_type") ? "rope_type" : "type";
  const std::string kind = fields.text(kindField, "default");
  if (kind == "default") return scaling;
  if (kind == "linear") {
    scaling.type = RopeScaling::Type::linear;
    scaling.factor = fields.positive("factor");
  } else if (kind == "llama3") {
    scaling.type = RopeScaling::Type::llama3;
    scaling.factor = fields.positive("factor");
    scaling.lowFrequencyFactor = fields.positive("low_freq_factor");
    scaling.highFrequencyFactor = fields.positive("high_freq_factor");
    scaling.originalMaxPositions = fields.count("original_max_position_embeddings");
    if (scaling.highFrequencyFactor <= scaling.lowFrequencyFactor) {
      fields.fail("high_freq_factor", "is not larger than low_freq_factor");
    }
  } else {
    fields.fail(kindField, "is " + shown(kind) + "; glnet runs rotary embeddings unscaled (default), linear or llama3");
  }
  return scaling;
}

void readLlama(const Fields& fields, const std::string& modelType, const std::string& file, const nlohmann::json& json,
               DecoderConfig& config) {
  config.family = DecoderFamily::llama;
  config.layers = fields.count("num_hidden_layers");
  config.hidden = fields.count("hidden_size");
  config.heads = fields.count("num_attention_heads");
  config.kvHeads = fields.count("num_key_value_heads", 1, config.heads);
  if (config.heads % config.kvHeads != 0) {
    fields.fail("num_key_value_heads", "(" + std::to_string(config.kvHeads) + ") does not divide num_attention_heads (" +
                                           std::to_string(config.heads) + ")");
  }
  if (!fields.has("head_dim") && config.hidden % config.heads != 0) {
    fields.fail("hidden_size", "(" + std::to_string(config.hidden) + ") is not a multiple of num_attention_heads and no head_dim is given");
  }
  config.headDim = fields.count("head_dim", 1, config.hidden / config.heads);
  if (config.headDim % 2 != 0) fields.fail("head_dim", "is odd; rotary embeddings rotate pairs of dimensions");
  config.intermediate = fields.count("intermediate_size");
  config.vocabulary = fields.count("vocab_size");
  config.maxPositions = fields.count("max_position_embeddings");
  config.normEpsilon = fields.positive("rms_norm_eps", 1e-6);
  const std::string activation = fields.text("hidden_act", "silu");
  if (activation != "silu") fields.fail("hidden_act", "is " + shown(activation) + "; glnet runs the Llama family with silu only");
  config.tiedEmbeddings = fields.flag("tie_word_embeddings", false);
  // Transformers 5 moves rope_theta and the scaling into one rope_parameters object.
  if (fields.has("rope_parameters")) {
    const nlohmann::json& parameters = fields.at("rope_parameters");
    config.ropeScaling = readRopeScaling(parameters, file, "rope_parameters");
    config.ropeTheta = Fields(parameters, file, "rope_parameters.").positive("rope_theta", 10000);
  } else {
    config.ropeTheta = fields.positive("rope_theta", 10000);
    if (fields.has("rope_scaling")) config.ropeScaling = readRopeScaling(fields.at("rope_scaling"), file, "rope_scaling");
  }
  if (modelType == "llama") {
    config.attentionBias = config.attentionOutputBias = fields.flag("attention_bias", false);
    config.mlpBias = fields.flag("mlp_bias", false);
  } else if (modelType == "qwen2") {
    config.attentionBias = true;  // Qwen2's q, k and v projections have biases, its output projection none
    if (fields.flag("use_sliding_window", false)) {
      fields.fail("use_sliding_window", "is true; glnet runs full causal attention only");
    }
  } else {  // mistral: Hugging Face's default window is 4096 tokens; one that covers every position changes nothing
    const bool windowed = !json.contains("sliding_window") || !json["sliding_window"].is_null();
    if (windowed && fields.count("sliding_window", 1, 4096) < config.maxPositions) {
      fields.fail("sliding_window", "is smaller than max_position_embeddings (" + std::to_string(config.maxPositions) +
                                        "); glnet runs full causal attention only (null or at least max_position_embeddings)");
    }
  }
}

}  // namespace

DecoderConfig readDecoderConfig(const std::string& folder) {
  const std::string file = (std::filesystem::path(folder) / "config.json").string();
  const nlohmann::json json = parseUntrustedJson(readRegularFile(file, largestConfigBytes), file);
  if (!json.is_object()) throw Error(file + ": not a JSON object");
  const Fields fields(json, file);
  const std::string modelType = fields.text("model_type", "");
  if (modelType.empty()) fields.fail("model_type", "is missing; glnet runs " + std::string(supported));
  const std::pair<const char*, const char*> known[] = {
      {"gpt2", "GPT2LMHeadModel"}, {"llama", "LlamaForCausalLM"}, {"qwen2", "Qwen2ForCausalLM"}, {"mistral", "MistralForCausalLM"}};
  DecoderConfig config;
  for (const auto& [type, architecture] : known) {
    if (modelType == type) config.architecture = architecture;
  }
  if (config.architecture.empty()) fields.fail("model_type", "is " + shown(modelType) + "; glnet runs " + supported);
  if (fields.has("architectures")) {
    const nlohmann::json& architectures = fields.at("architectures");
    if (!architectures.is_array() || architectures.size() != 1 || !architectures[0].is_string()) {
      fields.fail("architectures", "is not a list of one name");
    }
    const std::string named = architectures[0].get<std::string>();
    if (named != config.architecture) {
      fields.fail("architectures", "names " + shown(named) + "; with model_type " + modelType + " glnet runs " + config.architecture +
                                       " (glnet runs " + supported + ")");
    }
  }
  if (modelType == "gpt2") {
    readGpt2(fields, config);
  } else {
    readLlama(fields, modelType, file, json, config);
  }
  if (fields.has("bos_token_id")) config.bosTokenId = fields.tokenId(fields.at("bos_token_id"), "bos_token_id");
  if (fields.has("eos_token_id")) {
    const nlohmann::json& eos = fields.at("eos_token_id");
    if (eos.is_array()) {
      for (const nlohmann::json& id : eos) config.eosTokenIds.push_back(fields.tokenId(id, "eos_token_id"));
    } else {
      config.eosTokenIds.push_back(fields.tokenId(eos, "eos_token_id"));
    }
  }
  for (const std::uint32_t id : config.eosTokenIds) {
    if (id >= config.vocabulary) fields.fail("eos_token_id", "holds " + std::to_string(id) + ", past the vocabulary of " + std::to_string(config.vocabulary));
  }
  if (config.bosTokenId && *config.bosTokenId >= config.vocabulary) {
    fields.fail("bos_token_id", "is " + std::to_string(*config.bosTokenId) + ", past the vocabulary of " + std::to_string(config.vocabulary));
  }
  // Transformers 4.56 renamed torch_dtype to dtype.
  config.storedDtype = fields.text("dtype", fields.text("torch_dtype", ""));
  return config;
}

std::vector<double> ropeInverseFrequencies(const DecoderConfig& config) {
  const std::uint32_t pairs = config.headDim / 2;
  std::vector<double> frequencies(pairs);
  const RopeScaling& scaling = config.ropeScaling;
  constexpr double pi = 3.14159265358979323846;
  for (std::uint32_t i = 0; i < pairs; ++i) {
    const double frequency = 1.0 / std::pow(config.ropeTheta, 2.0 * i / config.headDim);
    double scaled = frequency;
    if (scaling.type == RopeScaling::Type::linear) {
      scaled = frequency / scaling.factor;
    } else if (scaling.type == RopeScaling::Type::llama3) {
      // Wavelengths longer than the original context over low_freq_factor are slowed by the factor, shorter than it
      // over high_freq_factor kept, and those between blended linearly in original context / wavelength.
      const double wavelength = 2 * pi / frequency;
      const double original = scaling.originalMaxPositions;
      if (wavelength > original / scaling.lowFrequencyFactor) {
        scaled = frequency / scaling.factor;
      } else if (wavelength >= original / scaling.highFrequencyFactor) {
        const double smooth = (original / wavelength - scaling.lowFrequencyFactor) / (scaling.highFrequencyFactor - scaling.lowFrequencyFactor);
        scaled = (1 - smooth) * frequency / scaling.factor + smooth * frequency;
      }
    }
    frequencies[i] = scaled;
  }
  return frequencies;
}

}  // namespace glnet
