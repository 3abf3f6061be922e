#include "decoder/DecoderWeights.h"

#include "base/check.h"
#include "formats/OnnxProto.h"

#include <filesystem>
#include <set>

namespace glnet {
namespace {

using Shape = std::vector<std::int64_t>;
using onnxformat::describe;  // "[64, 192]"

// Takes tensors out of a checkpoint by name, each checked against the shape the config makes; what is left at the end
// is what the model does not have.
class Checkpoint {
 public:
  Checkpoint(TensorFile file, std::string where) : tensors_(std::move(file.tensors)), where_(std::move(where)) {}

  bool has(const std::string& name) const { return tensors_.count(name) != 0; }

  HostTensor take(const std::string& name, const Shape& shape) {
    const auto found = tensors_.find(name);
    if (found == tensors_.end()) throw Error(where_ + ": tensor " + name + " " + describe(shape) + " is missing");
    if (found->second.shape != shape) {
      throw Error(where_ + ": tensor " + name + " has shape " + describe(found->second.shape) + "; config.json makes it " + describe(shape));
    }
    HostTensor tensor = std::move(found->second);
    tensors_.erase(found);
    dtypes_.insert(storedDtypeName(tensor.stored));
    return tensor;
  }
  // An empty tensor where the model has none.
  HostTensor takeIf(bool present, const std::string& name, const Shape& shape) { return present ? take(name, shape) : HostTensor{}; }

  void drop(const std::string& name) { tensors_.erase(name); }

  // Refuses a tensor left over: a checkpoint of another model, or a config that does not match its weights (a bias
  // the config says the model lacks would otherwise be dropped silently).
  void checkNothingLeft(const std::string& architecture) const {
    if (!tensors_.empty()) {
      throw Error(where_ + ": tensor " + tensors_.begin()->first + " is not one a " + architecture + " with this config.json has");
    }
  }

  std::string dtypes() const {
    std::string joined;
    for (const std::string& dtype : dtypes_) joined += (joined.empty() ? "" : "+") + dtype;
    return joined;
  }

 private:
  std::map<std::string, HostTensor> tensors_;
  std::string where_;
  std::set<std::string> dtypes_;
};

// Columns [first, first + count) of a [rows, columns] matrix, transposed to [count, rows]: Conv1D's [in, out]
// weight (a part of it) as nn.Linear's [out, in].
HostTensor transposedColumns(const HostTensor& matrix, std::size_t first, std::size_t count) {
  const auto rows = static_cast<std::size_t>(matrix.shape[0]), columns = static_cast<std::size_t>(matrix.shape[1]);
  HostTensor result{{static_cast<std::int64_t>(count), static_cast<std::int64_t>(rows)}, std::vector<float>(count * rows), matrix.stored};
  for (std::size_t r = 0; r < rows; ++r) {
    const float* row = matrix.values.data() + r * columns + first;
    for (std::size_t c = 0; c < count; ++c) result.values[c * rows + r] = row[c];
  }
  return result;
}

HostTensor slice(const HostTensor& vector, std::size_t first, std::size_t count) {
  return HostTensor{{static_cast<std::int64_t>(count)},
                    std::vector<float>(vector.values.begin() + static_cast<std::ptrdiff_t>(first),
                                       vector.values.begin() + static_cast<std::ptrdiff_t>(first + count)),
                    vector.stored};
}

void readGpt2(Checkpoint& checkpoint, const DecoderConfig& config, DecoderWeights& weights) {
  // save_pretrained of GPT2LMHeadModel writes "transformer."; GPT2Model checkpoints (openai-community/gpt2 among
  // them) have no prefix.
  const std::string prefix = checkpoint.has("wte.weight") && !checkpoint.has("transformer.wte.weight") ? "" : "transformer.";
  const std::int64_t hidden = config.hidden, inner = config.intermediate;
  weights.tokenEmbedding = checkpoint.take(prefix + "wte.weight", {config.vocabulary, hidden});
  weights.positionEmbedding = checkpoint.take(prefix + "wpe.weight", {config.maxPositions, hidden});
  for (std::uint32_t index = 0; index < config.layers; ++index) {
    const std::string layer = prefix + "h." + std::to_string(index) + ".";
    DecoderLayerWeights w;
    w.attentionNorm = checkpoint.take(layer + "ln_1.weight", {hidden});
    w.attentionNormBias = checkpoint.take(layer + "ln_1.bias", {hidden});
    const HostTensor qkv = checkpoint.take(layer + "attn.c_attn.weight", {hidden, 3 * hidden});
    const HostTensor qkvBias = checkpoint.take(layer + "attn.c_attn.bias", {3 * hidden});
    const auto h = static_cast<std::size_t>(hidden);
    w.query = transposedColumns(qkv, 0, h);
    w.key = transposedColumns(qkv, h, h);
    w.value = transposedColumns(qkv, 2 * h, h);
    w.queryBias = slice(qkvBias, 0, h);
    w.keyBias = slice(qkvBias, h, h);
    w.valueBias = slice(qkvBias, 2 * h, h);
    const HostTensor projection = checkpoint.take(layer + "attn.c_proj.weight", {hidden, hidden});
    w.output = transposedColumns(projection, 0, h);
    w.outputBias = checkpoint.take(layer + "attn.c_proj.bias", {hidden});
    w.mlpNorm = checkpoint.take(layer + "ln_2.weight", {hidden});
    w.mlpNormBias = checkpoint.take(layer + "ln_2.bias", {hidden});
    const HostTensor up = checkpoint.take(layer + "mlp.c_fc.weight", {hidden, inner});
    w.up = transposedColumns(up, 0, static_cast<std::size_t>(inner));
    w.upBias = checkpoint.take(layer + "mlp.c_fc.bias", {inner});
    const HostTensor down = checkpoint.take(layer + "mlp.c_proj.weight", {inner, hidden});
    w.down = transposedColumns(down, 0, h);
    w.downBias = checkpoint.take(layer + "mlp.c_proj.bias", {hidden});
    // The causal mask buffers older transformers saved; glnet makes its own mask.
    checkpoint.drop(layer + "attn.bias");
    checkpoint.drop(layer + "attn.masked_bias");
    weights.layers.push_back(std::move(w));
  }
  weights.finalNorm = checkpoint.take(prefix + "ln_f.weight", {hidden});
  weights.finalNormBias = checkpoint.take(prefix + "ln_f.bias", {hidden});
}

void readLlama(Checkpoint& checkpoint, const DecoderConfig& config, DecoderWeights& weights) {
  const std::int64_t hidden = config.hidden, inner = config.intermediate;
  const std::int64_t queries = std::int64_t{config.heads} * config.headDim, keys = std::int64_t{config.kvHeads} * config.headDim;
  weights.tokenEmbedding = checkpoint.take("model.embed_tokens.weight", {config.vocabulary, hidden});
  for (std::uint32_t index = 0; index < config.layers; ++index) {
    const std::string layer = "model.layers." + std::to_string(index) + ".";
    const std::string attention = layer + "self_attn.", mlp = layer + "mlp.";
    DecoderLayerWeights w;
    w.attentionNorm = checkpoint.take(layer + "input_layernorm.weight", {hidden});
    w.query = checkpoint.take(attention + "q_proj.weight", {queries, hidden});
    w.key = checkpoint.take(attention + "k_proj.weight", {keys, hidden});
    w.value = checkpoint.take(attention + "v_proj.weight", {keys, hidden});
    w.output = checkpoint.take(attention + "o_proj.weight", {hidden, queries});
    w.queryBias = checkpoint.takeIf(config.attentionBias, attention + "q_proj.bias", {queries});
    w.keyBias = checkpoint.takeIf(config.attentionBias, attention + "k_proj.bias", {keys});
    w.valueBias = checkpoint.takeIf(config.attentionBias, attention + "v_proj.bias", {keys});
    w.outputBias = checkpoint.takeIf(config.attentionOutputBias, attention + "o_proj.bias", {hidden});
    w.mlpNorm = checkpoint.take(layer + "post_attention_layernorm.weight", {hidden});
    w.gate = checkpoint.take(mlp + "gate_proj.weight", {inner, hidden});
    w.up = checkpoint.take(mlp + "up_proj.weight", {inner, hidden});
    w.down = checkpoint.take(mlp + "down_proj.weight", {hidden, inner});
    w.gateBias = checkpoint.takeIf(config.mlpBias, mlp + "gate_proj.bias", {inner});
    w.upBias = checkpoint.takeIf(config.mlpBias, mlp + "up_proj.bias", {inner});
    w.downBias = checkpoint.takeIf(config.mlpBias, mlp + "down_proj.bias", {hidden});
    // Older transformers saved the rotary embedding's frequencies; glnet computes them from the config.
    checkpoint.drop(attention + "rotary_emb.inv_freq");
    weights.layers.push_back(std::move(w));
  }
  weights.finalNorm = checkpoint.take("model.norm.weight", {hidden});
}

}  // namespace

DecoderWeights readDecoderWeights(const std::string& folder, const DecoderConfig& config) {
  const std::filesystem::path single = std::filesystem::path(folder) / "model.safetensors";
  const std::filesystem::path index = std::filesystem::path(folder) / "model.safetensors.index.json";
  // As transformers looks: the single file first, then the index of shards.
  TensorFile file;
  if (std::filesystem::exists(single)) {
    file = readSafetensors(single.string());
  } else if (std::filesystem::exists(index)) {
    file = readShardedSafetensors(index.string());
  } else {
    throw Error(folder + ": has neither model.safetensors nor model.safetensors.index.json (glnet reads safetensors weights only)");
  }
  Checkpoint checkpoint(std::move(file), folder);
  DecoderWeights weights;
  if (config.family == DecoderFamily::gpt2) {
    readGpt2(checkpoint, config, weights);
  } else {
    readLlama(checkpoint, config, weights);
  }
  if (config.tiedEmbeddings) {
    checkpoint.drop("lm_head.weight");  // some files store the tied copy too; transformers ties it to the embedding
  } else {
    weights.lmHead = checkpoint.take("lm_head.weight", {config.vocabulary, config.hidden});
  }
  checkpoint.checkNothingLeft(config.architecture);
  weights.storedDtype = checkpoint.dtypes();
  return weights;
}

}  // namespace glnet
