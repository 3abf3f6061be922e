#include "base/check.h"
#include "decoder/DecoderWeights.h"
#include "formats/Safetensors.h"
#include "support/TempDir.h"
#include "support/TinyDecoders.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <functional>

using namespace glnet;

namespace {

// The tensors of DecoderWeights by the names tiny_decoders.py gives them in expected-layers.safetensors.
const HostTensor& canonical(const DecoderWeights& weights, const std::string& name) {
  const DecoderLayerWeights& layer = weights.layers.at(0);
  const std::pair<const char*, const HostTensor*> fields[] = {
      {"tokenEmbedding", &weights.tokenEmbedding}, {"positionEmbedding", &weights.positionEmbedding},
      {"finalNorm", &weights.finalNorm}, {"finalNormBias", &weights.finalNormBias}, {"lmHead", &weights.lmHead},
      {"layers.0.attentionNorm", &layer.attentionNorm}, {"layers.0.attentionNormBias", &layer.attentionNormBias},
      {"layers.0.query", &layer.query}, {"layers.0.key", &layer.key}, {"layers.0.value", &layer.value},
      {"layers.0.output", &layer.output}, {"layers.0.queryBias", &layer.queryBias}, {"layers.0.keyBias", &layer.keyBias},
      {"layers.0.valueBias", &layer.valueBias}, {"layers.0.outputBias", &layer.outputBias}, {"layers.0.mlpNorm", &layer.mlpNorm},
      {"layers.0.gate", &layer.gate}, {"layers.0.up", &layer.up}, {"layers.0.down", &layer.down},
      {"layers.0.upBias", &layer.upBias}, {"layers.0.downBias", &layer.downBias}};
  for (const auto& [field, tensor] : fields) {
    if (name == field) return *tensor;
  }
  throw Error("no field " + name);
}

// Every tensor the reference lists equals glnet's, shape and values, bit for bit (both are the stored floats).
void checkAgainstReference(const std::string& model, const DecoderWeights& weights) {
  const TensorFile reference = readSafetensors(test::tinyDecoder(model) + "/expected-layers.safetensors");
  for (const auto& [name, expected] : reference.tensors) {
    CAPTURE(name);
    const HostTensor& actual = canonical(weights, name);
    CHECK(actual.shape == expected.shape);
    CHECK(actual.values == expected.values);
  }
}

// A copy of a tiny model's folder, its config.json and weights as they are, for a test to damage.
std::string copyOf(const test::TempDir& directory, const std::string& model) {
  const std::filesystem::path target = directory.path() / model;
  std::filesystem::copy(test::tinyDecoder(model), target, std::filesystem::copy_options::recursive);
  return target.string();
}

void refuseEdited(const std::string& model, const std::string& file, const std::function<void(TensorFile&)>& edit, const std::string& reason) {
  CAPTURE(reason);
  const test::TempDir directory;
  const std::string folder = copyOf(directory, model);
  TensorFile tensors = readSafetensors(folder + "/" + file);
  edit(tensors);
  writeSafetensors(folder + "/" + file, tensors);
  CHECK_THROWS_WITH_AS(readDecoderWeights(folder, readDecoderConfig(folder)), doctest::Contains(reason.c_str()), Error);
}

}  // namespace

TEST_CASE("GPT-2's Conv1D weights are split into q, k and v and transposed to [out, in]") {
  const std::string folder = test::tinyDecoder("gpt2");
  const DecoderWeights weights = readDecoderWeights(folder, readDecoderConfig(folder));
  REQUIRE(weights.layers.size() == 2);
  checkAgainstReference("gpt2", weights);
  CHECK(weights.layers[1].query.shape == std::vector<std::int64_t>{64, 64});
  CHECK(weights.layers[1].up.shape == std::vector<std::int64_t>{256, 64});
  CHECK(weights.layers[1].down.shape == std::vector<std::int64_t>{64, 256});
  CHECK(weights.positionEmbedding.shape == std::vector<std::int64_t>{64, 64});
  CHECK(weights.lmHead.values.empty());  // tied
  CHECK(weights.layers[0].gate.values.empty());
  CHECK(weights.layers[0].gate.shape.empty());
  CHECK(weights.storedDtype == "F32");
}

TEST_CASE("a GPT-2 checkpoint without the transformer. prefix, with the old mask buffers, reads the same") {
  const test::TempDir directory;
  const std::string folder = copyOf(directory, "gpt2");
  TensorFile file = readSafetensors(folder + "/model.safetensors");
  TensorFile bare;
  for (auto& [name, tensor] : file.tensors) bare.tensors[name.substr(std::string("transformer.").size())] = tensor;
  bare.tensors["h.0.attn.bias"] = {{1, 1, 2, 2}, {1, 0, 1, 1}};
  bare.tensors["h.1.attn.masked_bias"] = {{}, {-1e4f}};
  bare.tensors["lm_head.weight"] = file.tensors.at("transformer.wte.weight");  // a tied copy, as some files hold
  writeSafetensors(folder + "/model.safetensors", bare);
  checkAgainstReference("gpt2", readDecoderWeights(folder, readDecoderConfig(folder)));
}

TEST_CASE("a sharded Llama with grouped-query attention and an untied head") {
  const std::string folder = test::tinyDecoder("llama");
  CHECK_FALSE(std::filesystem::exists(folder + "/model.safetensors"));
  const DecoderWeights weights = readDecoderWeights(folder, readDecoderConfig(folder));
  REQUIRE(weights.layers.size() == 3);
  checkAgainstReference("llama", weights);
  CHECK(weights.layers[2].key.shape == std::vector<std::int64_t>{32, 64});
  CHECK(weights.lmHead.shape == std::vector<std::int64_t>{576, 64});
  CHECK(weights.positionEmbedding.values.empty());
  CHECK(weights.finalNormBias.values.empty());
  CHECK(weights.layers[0].attentionNormBias.values.empty());
  CHECK(weights.layers[0].queryBias.values.empty());
  CHECK(weights.storedDtype == "F32");
}

TEST_CASE("a Qwen2 stored as BF16: q, k and v biases, tied head, the stored type reported") {
  const std::string folder = test::tinyDecoder("qwen2");
  const DecoderWeights weights = readDecoderWeights(folder, readDecoderConfig(folder));
  checkAgainstReference("qwen2", weights);
  CHECK(weights.layers[1].valueBias.shape == std::vector<std::int64_t>{32});
  CHECK(weights.layers[1].outputBias.values.empty());
  CHECK(weights.lmHead.values.empty());
  CHECK(weights.storedDtype == "BF16");
  CHECK(weights.layers[0].query.stored == StoredDtype::bf16);
}

TEST_CASE("missing, misshapen and unexpected tensors are refused by name with the shape config.json makes") {
  refuseEdited("gpt2", "model.safetensors", [](TensorFile& f) { f.tensors.erase("transformer.h.1.mlp.c_fc.bias"); },
               "tensor transformer.h.1.mlp.c_fc.bias [256] is missing");
  refuseEdited("gpt2", "model.safetensors", [](TensorFile& f) { f.tensors["transformer.h.0.attn.c_attn.weight"].shape = {192, 64}; },
               "tensor transformer.h.0.attn.c_attn.weight has shape [192, 64]; config.json makes it [64, 192]");
  refuseEdited("gpt2", "model.safetensors", [](TensorFile& f) { f.tensors["transformer.h.2.ln_1.weight"] = {{64}, std::vector<float>(64)}; },
               "tensor transformer.h.2.ln_1.weight is not one a GPT2LMHeadModel with this config.json has");
  refuseEdited("qwen2", "model.safetensors", [](TensorFile& f) { f.tensors.erase("model.layers.1.self_attn.k_proj.bias"); },
               "tensor model.layers.1.self_attn.k_proj.bias [32] is missing");
  refuseEdited("qwen2", "model.safetensors", [](TensorFile& f) { f.tensors["model.layers.0.self_attn.o_proj.bias"] = {{64}, std::vector<float>(64)}; },
               "tensor model.layers.0.self_attn.o_proj.bias is not one a Qwen2ForCausalLM with this config.json has");
  refuseEdited("llama", "model-00002-of-00002.safetensors", [](TensorFile& f) { f.tensors.erase("lm_head.weight"); },
               "lacks tensor lm_head.weight, which");
  refuseEdited("llama", "model-00001-of-00002.safetensors",
               [](TensorFile& f) { f.tensors["model.layers.0.self_attn.k_proj.weight"] = {{64, 64}, std::vector<float>(64 * 64)}; },
               "tensor model.layers.0.self_attn.k_proj.weight has shape [64, 64]; config.json makes it [32, 64]");
}

TEST_CASE("weights that disagree with config.json, or no weights at all, are refused") {
  const test::TempDir directory;
  const std::string folder = copyOf(directory, "llama");
  DecoderConfig config = readDecoderConfig(folder);
  config.attentionBias = true;  // as attention_bias true in config.json says
  CHECK_THROWS_WITH_AS(readDecoderWeights(folder, config), doctest::Contains("tensor model.layers.0.self_attn.q_proj.bias [64] is missing"), Error);
  config = readDecoderConfig(folder);
  config.tiedEmbeddings = true;  // a file with its own head and a config that ties it: the head is transformers' tied one
  CHECK(readDecoderWeights(folder, config).lmHead.values.empty());
  config.layers = 2;
  CHECK_THROWS_WITH_AS(readDecoderWeights(folder, config), doctest::Contains("tensor model.layers.2."), Error);
  std::filesystem::remove(folder + "/model.safetensors.index.json");
  CHECK_THROWS_WITH_AS(readDecoderWeights(folder, readDecoderConfig(folder)),
                       doctest::Contains("has neither model.safetensors nor model.safetensors.index.json"), Error);
}
