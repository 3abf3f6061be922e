#include "base/FileInput.h"
#include "base/check.h"
#include "decoder/DecoderConfig.h"
#include "formats/UntrustedJson.h"
#include "support/TempDir.h"
#include "support/TinyDecoders.h"

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <functional>

using namespace glnet;

namespace {

nlohmann::json configOf(const std::string& model) {
  const std::string path = test::tinyDecoder(model) + "/config.json";
  return parseUntrustedJson(readRegularFile(path, 1 << 20), path);
}

// The config of `model` changed by `edit`, read from a folder of its own.
DecoderConfig readEdited(const test::TempDir& directory, const std::string& model, const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json config = configOf(model);
  edit(config);
  directory.write("config.json", config.dump());
  return readDecoderConfig(directory.path().string());
}

void refuse(const std::string& model, const std::function<void(nlohmann::json&)>& edit, const std::string& reason) {
  CAPTURE(model);
  CAPTURE(reason);
  const test::TempDir directory;
  CHECK_THROWS_WITH_AS(readEdited(directory, model, edit), doctest::Contains(reason.c_str()), Error);
}

}  // namespace

TEST_CASE("config.json of GPT-2, Llama and Qwen2 folders as save_pretrained writes them") {
  const DecoderConfig gpt2 = readDecoderConfig(test::tinyDecoder("gpt2"));
  CHECK(gpt2.architecture == "GPT2LMHeadModel");
  CHECK(gpt2.family == DecoderFamily::gpt2);
  CHECK(gpt2.layers == 2);
  CHECK(gpt2.hidden == 64);
  CHECK(gpt2.heads == 4);
  CHECK(gpt2.kvHeads == 4);
  CHECK(gpt2.headDim == 16);
  CHECK(gpt2.intermediate == 256);  // n_inner null: 4 n_embd
  CHECK(gpt2.vocabulary == 576);
  CHECK(gpt2.maxPositions == 64);
  CHECK(gpt2.normEpsilon == 1e-5);
  CHECK(gpt2.tiedEmbeddings);  // absent: GPT-2's default
  CHECK(gpt2.attentionBias);
  CHECK(gpt2.attentionOutputBias);
  CHECK(gpt2.mlpBias);
  CHECK(gpt2.bosTokenId == 575u);
  CHECK(gpt2.eosTokenIds == std::vector<std::uint32_t>{575});
  CHECK(gpt2.storedDtype == "float32");

  const DecoderConfig llama = readDecoderConfig(test::tinyDecoder("llama"));
  CHECK(llama.architecture == "LlamaForCausalLM");
  CHECK(llama.family == DecoderFamily::llama);
  CHECK(llama.layers == 3);
  CHECK(llama.heads == 4);
  CHECK(llama.kvHeads == 2);
  CHECK(llama.headDim == 16);
  CHECK(llama.intermediate == 176);
  CHECK(llama.normEpsilon == 1e-5);
  CHECK_FALSE(llama.tiedEmbeddings);
  CHECK_FALSE(llama.attentionBias);
  CHECK_FALSE(llama.attentionOutputBias);
  CHECK_FALSE(llama.mlpBias);
  CHECK(llama.ropeTheta == 10000);
  CHECK(llama.ropeScaling.type == RopeScaling::Type::llama3);
  CHECK(llama.ropeScaling.factor == 8);
  CHECK(llama.ropeScaling.lowFrequencyFactor == 1);
  CHECK(llama.ropeScaling.highFrequencyFactor == 4);
  CHECK(llama.ropeScaling.originalMaxPositions == 32);
  CHECK(llama.bosTokenId == 1u);
  CHECK(llama.eosTokenIds == std::vector<std::uint32_t>{2});

  const DecoderConfig qwen2 = readDecoderConfig(test::tinyDecoder("qwen2"));
  CHECK(qwen2.architecture == "Qwen2ForCausalLM");
  CHECK(qwen2.family == DecoderFamily::llama);
  CHECK(qwen2.layers == 2);
  CHECK(qwen2.normEpsilon == 1e-6);
  CHECK(qwen2.tiedEmbeddings);
  CHECK(qwen2.attentionBias);
  CHECK_FALSE(qwen2.attentionOutputBias);
  CHECK_FALSE(qwen2.mlpBias);
  CHECK(qwen2.ropeTheta == 1e6);
  CHECK(qwen2.ropeScaling.type == RopeScaling::Type::none);
  CHECK(qwen2.eosTokenIds == std::vector<std::uint32_t>{574, 575});
  CHECK(qwen2.storedDtype == "bfloat16");
}

TEST_CASE("rotary frequencies match the reference's, llama3 scaling included") {
  for (const char* model : {"llama", "qwen2"}) {
    CAPTURE(model);
    const std::string folder = test::tinyDecoder(model);
    const nlohmann::json expected = parseUntrustedJson(readRegularFile(folder + "/expected.json", 1 << 20), "expected.json");
    const std::vector<double> frequencies = ropeInverseFrequencies(readDecoderConfig(folder));
    const auto reference = expected.at("inverse_frequencies").get<std::vector<double>>();
    REQUIRE(frequencies.size() == reference.size());
    for (std::size_t i = 0; i < reference.size(); ++i) CHECK(frequencies[i] == doctest::Approx(reference[i]).epsilon(1e-12));
  }
  // The three bands of the llama3 scaling: the first frequency kept, the second blended, the rest divided by 8.
  DecoderConfig config = readDecoderConfig(test::tinyDecoder("llama"));
  const std::vector<double> scaled = ropeInverseFrequencies(config);
  config.ropeScaling = {};
  const std::vector<double> plain = ropeInverseFrequencies(config);
  CHECK(scaled[0] == plain[0]);
  CHECK(scaled[1] < plain[1]);
  CHECK(scaled[1] > plain[1] / 8);
  CHECK(scaled[7] == doctest::Approx(plain[7] / 8));
  config.ropeScaling.type = RopeScaling::Type::linear;
  config.ropeScaling.factor = 2;
  CHECK(ropeInverseFrequencies(config)[3] == doctest::Approx(plain[3] / 2));
}

TEST_CASE("config.json variants that change the computation are read or refused, never ignored") {
  const test::TempDir directory;
  // GPT-2: an explicit MLP width; the transformers 5 spelling of the dtype.
  DecoderConfig config = readEdited(directory, "gpt2", [](nlohmann::json& c) {
    c["n_inner"] = 100;
    c["dtype"] = "bfloat16";
  });
  CHECK(config.intermediate == 100);
  CHECK(config.storedDtype == "bfloat16");
  // Llama: linear scaling in the older spelling, no num_key_value_heads (as many as heads), no head_dim.
  config = readEdited(directory, "llama", [](nlohmann::json& c) {
    c["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
    c.erase("num_key_value_heads");
    c.erase("head_dim");
    c["attention_bias"] = true;
    c["eos_token_id"] = {2, 5};
    c["bos_token_id"] = nullptr;
  });
  CHECK(config.ropeScaling.type == RopeScaling::Type::linear);
  CHECK(config.ropeScaling.factor == 2);
  CHECK(config.kvHeads == 4);
  CHECK(config.headDim == 16);
  CHECK(config.attentionBias);
  CHECK(config.attentionOutputBias);  // Llama's attention_bias covers o_proj too
  CHECK(config.eosTokenIds == std::vector<std::uint32_t>{2, 5});
  CHECK_FALSE(config.bosTokenId.has_value());
  // Transformers 5: rope_theta and the scaling in rope_parameters.
  config = readEdited(directory, "llama", [](nlohmann::json& c) {
    c.erase("rope_scaling");
    c.erase("rope_theta");
    c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 500000.0}};
  });
  CHECK(config.ropeTheta == 500000);
  CHECK(config.ropeScaling.type == RopeScaling::Type::none);
  // Mistral: a window that covers every position changes nothing.
  const auto mistral = [](nlohmann::json& c) {
    c["model_type"] = "mistral";
    c["architectures"] = {"MistralForCausalLM"};
    c.erase("attention_bias");
    c.erase("mlp_bias");
    c["sliding_window"] = 4096;
  };
  config = readEdited(directory, "llama", mistral);
  CHECK(config.architecture == "MistralForCausalLM");
  CHECK_FALSE(config.attentionBias);
  config = readEdited(directory, "llama", [&](nlohmann::json& c) {
    mistral(c);
    c["sliding_window"] = nullptr;
    c["max_position_embeddings"] = 32768;
  });
  CHECK(config.maxPositions == 32768);

  refuse("gpt2", [](nlohmann::json& c) { c.erase("n_embd"); }, "config.json: field n_embd is missing");
  refuse("gpt2", [](nlohmann::json& c) { c["n_head"] = "4"; }, "field n_head is a JSON string; it must be an integer from 1 to 268435456");
  refuse("gpt2", [](nlohmann::json& c) { c["n_layer"] = 0; }, "field n_layer is 0; it must be an integer from 1 to 268435456");
  refuse("gpt2", [](nlohmann::json& c) { c["n_layer"] = 2.5; }, "field n_layer is 2.5");
  refuse("gpt2", [](nlohmann::json& c) { c["n_embd"] = 1u << 30; }, "field n_embd is 1073741824");
  refuse("gpt2", [](nlohmann::json& c) { c["n_head"] = 5; }, "field n_embd (64) is not a multiple of n_head (5)");
  refuse("gpt2", [](nlohmann::json& c) { c["activation_function"] = "relu"; },
         "field activation_function is 'relu'; glnet runs GPT-2 with gelu_new only");
  refuse("gpt2", [](nlohmann::json& c) { c["scale_attn_by_inverse_layer_idx"] = true; },
         "field scale_attn_by_inverse_layer_idx is true; glnet runs only false");
  refuse("gpt2", [](nlohmann::json& c) { c["reorder_and_upcast_attn"] = true; }, "field reorder_and_upcast_attn is true");
  refuse("gpt2", [](nlohmann::json& c) { c["scale_attn_weights"] = false; }, "field scale_attn_weights is false; glnet runs only true");
  refuse("gpt2", [](nlohmann::json& c) { c["tie_word_embeddings"] = "yes"; }, "field tie_word_embeddings is a JSON string; it must be true or false");
  refuse("gpt2", [](nlohmann::json& c) { c["layer_norm_epsilon"] = -1; }, "field layer_norm_epsilon is -1; it must be a positive number");
  refuse("gpt2", [](nlohmann::json& c) { c["model_type"] = "bert"; },
         "field model_type is 'bert'; glnet runs GPT2LMHeadModel (gpt2), LlamaForCausalLM (llama)");
  refuse("gpt2", [](nlohmann::json& c) { c.erase("model_type"); }, "field model_type is missing; glnet runs GPT2LMHeadModel");
  refuse("gpt2", [](nlohmann::json& c) { c["architectures"] = {"GPT2Model"}; }, "field architectures names 'GPT2Model'; with model_type gpt2 glnet runs GPT2LMHeadModel");
  refuse("gpt2", [](nlohmann::json& c) { c["architectures"] = "GPT2LMHeadModel"; }, "field architectures is not a list of one name");
  refuse("gpt2", [](nlohmann::json& c) { c["eos_token_id"] = 576; }, "field eos_token_id holds 576, past the vocabulary of 576");
  refuse("gpt2", [](nlohmann::json& c) { c["eos_token_id"] = {1, "2"}; }, "field eos_token_id holds a JSON string; token ids are non-negative integers");
  refuse("gpt2", [](nlohmann::json& c) { c["bos_token_id"] = -1; }, "field bos_token_id holds -1");
  refuse("llama", [](nlohmann::json& c) { c["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}}; },
         "field rope_scaling.rope_type is 'yarn'; glnet runs rotary embeddings unscaled (default), linear or llama3");
  refuse("llama", [](nlohmann::json& c) { c["rope_scaling"] = {{"type", "dynamic"}, {"factor", 4.0}}; }, "field rope_scaling.type is 'dynamic'");
  refuse("llama", [](nlohmann::json& c) { c["rope_scaling"] = {{"type", "linear"}}; }, "field rope_scaling.factor is missing");
  refuse("llama", [](nlohmann::json& c) { c["rope_scaling"].erase("original_max_position_embeddings"); },
         "field rope_scaling.original_max_position_embeddings is missing");
  refuse("llama", [](nlohmann::json& c) { c["rope_scaling"]["high_freq_factor"] = 0.5; }, "field rope_scaling.high_freq_factor is not larger than low_freq_factor");
  refuse("llama", [](nlohmann::json& c) { c["rope_scaling"] = 2; }, "field rope_scaling is 2; it must be an object or null");
  refuse("llama", [](nlohmann::json& c) { c["hidden_act"] = "gelu"; }, "field hidden_act is 'gelu'; glnet runs the Llama family with silu only");
  refuse("llama", [](nlohmann::json& c) { c["num_key_value_heads"] = 3; }, "field num_key_value_heads (3) does not divide num_attention_heads (4)");
  refuse("llama", [](nlohmann::json& c) { c["head_dim"] = 15; }, "field head_dim is odd");
  refuse("llama", [](nlohmann::json& c) { c.erase("intermediate_size"); }, "field intermediate_size is missing");
  refuse("llama", [](nlohmann::json& c) { c["rope_theta"] = nullptr; c["rope_parameters"] = {{"rope_theta", "big"}}; },
         "field rope_parameters.rope_theta is a JSON string");
  refuse("qwen2", [](nlohmann::json& c) { c["use_sliding_window"] = true; }, "field use_sliding_window is true; glnet runs full causal attention only");
  refuse("llama", [&](nlohmann::json& c) { mistral(c); c["sliding_window"] = 16; },
         "field sliding_window is smaller than max_position_embeddings (64)");
  refuse("llama", [&](nlohmann::json& c) { mistral(c); c.erase("sliding_window"); c["max_position_embeddings"] = 8192; },
         "field sliding_window is smaller than max_position_embeddings (8192)");
}

TEST_CASE("a folder without a readable config.json is refused naming the file") {
  const test::TempDir directory;
  CHECK_THROWS_WITH_AS(readDecoderConfig(directory.path().string()), doctest::Contains("config.json: no such file"), Error);
  directory.write("config.json", "{\"model_type\": ");
  CHECK_THROWS_WITH_AS(readDecoderConfig(directory.path().string()), doctest::Contains("config.json is not valid JSON"), Error);
  directory.write("config.json", "[1]");
  CHECK_THROWS_WITH_AS(readDecoderConfig(directory.path().string()), doctest::Contains("config.json: not a JSON object"), Error);
  directory.write("config.json", R"({"model_type": "gpt2", "model_type": "llama"})");
  CHECK_THROWS_WITH_AS(readDecoderConfig(directory.path().string()), doctest::Contains("\"model_type\" appears twice"), Error);
}
