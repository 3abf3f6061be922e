#include "decoder/LanguageModel.h"

#include "base/Stopwatch.h"
#include "base/check.h"

#include <algorithm>

namespace glnet {

WeightStorage weightStorageNamed(const std::string& name) {
  for (const WeightStorage storage : {WeightStorage::fp32, WeightStorage::fp16, WeightStorage::bf16}) {
    if (name == kindName(storage)) return storage;
  }
  throw UsageError(optionName("weights") + " takes fp32, fp16 or bf16, not " + name);
}

LanguageModel::LanguageModel(const Context& context, const std::string& folder, std::uint32_t contextPositions,
                             std::optional<WeightStorage> storage, std::uint32_t sequences)
    : LanguageModel(context, folder, readDecoderConfig(folder), contextPositions, storage, sequences) {}

LanguageModel::LanguageModel(const Context& context, const std::string& folder, DecoderConfig config, std::uint32_t contextPositions,
                             std::optional<WeightStorage> storage, std::uint32_t sequences)
    : tokenizer_(ByteLevelBpe::fromFile(folder + "/tokenizer.json")),
      decoder_([&] {
        if (tokenizer_.vocabularySize() > config.vocabulary) {
          throw Error(folder + "/tokenizer.json has ids up to " + std::to_string(tokenizer_.vocabularySize() - 1) +
                      ", beyond the model's vocabulary of " + std::to_string(config.vocabulary) + " (config.json's vocab_size)");
        }
        Stopwatch loading;
        const DecoderWeights weights = readDecoderWeights(folder, config);
        const WeightStorage chosen = storage ? *storage
                                     : weights.storedDtype == "BF16" ? WeightStorage::bf16
                                     : weights.storedDtype == "F16"  ? WeightStorage::fp16
                                                                     : WeightStorage::fp32;
        Decoder decoder(context, config, weights, contextPositions, chosen, sequences);
        loadSeconds_ = loading.seconds();
        return decoder;
      }()) {}

Generation::Generation(LanguageModel& model, const std::string& prompt, const GenerationSettings& settings, std::uint32_t sequence)
    : model_(model), sequence_(sequence), settings_(settings), stream_(model.tokenizer(), true) {
  if (settings.maxNewTokens == 0) throw UsageError("generation needs " + optionName("max-new-tokens") + " of at least 1");
  for (const std::string& stop : settings.stops) {
    if (stop.empty()) throw UsageError(optionName("stop") + " needs a non-empty text");
  }
  const std::vector<std::uint32_t> ids = model.tokenizer().encode(prompt);
  Decoder& decoder = model.decoder();
  if (ids.size() >= decoder.context()) {
    throw Error("the prompt's " + std::to_string(ids.size()) + " tokens leave no room in a context of " + std::to_string(decoder.context()) +
                " positions (" + optionName("max-context") + ")");
  }
  stats_.promptTokens = ids.size();
  Stopwatch prefill;
  token_ = decoder.start(ids, settings.sampling, sequence);
  stats_.prefillSeconds = prefill.seconds();
}

Generation::~Generation() { model_.decoder().end(sequence_); }

std::string Generation::filtered(const std::string& piece) {
  held_ += piece;
  std::size_t firstStop = std::string::npos;
  for (const std::string& stop : settings_.stops) firstStop = std::min(firstStop, held_.find(stop));
  if (firstStop != std::string::npos) {
    stats_.stopReason = "stop text";
    std::string out = held_.substr(0, firstStop);
    held_.clear();
    return out;
  }
  // The longest tail that begins some stop text stays back.
  std::size_t keep = 0;
  for (const std::string& stop : settings_.stops) {
    for (std::size_t length = std::min(stop.size() - 1, held_.size()); length > keep; --length) {
      if (held_.compare(held_.size() - length, length, stop, 0, length) == 0) {
        keep = length;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string Generation::finish() {
  ended_ = true;
  model_.decoder().end(sequence_);
  if (stats_.stopReason == "stop text") return "";
  std::string out = filtered(stream_.finish());
  if (stats_.stopReason == "stop text") return out;
  out += held_;
  held_.clear();
  return out;
}

bool Generation::endsBeforeStep() {
  if (stats_.generatedIds.size() == settings_.maxNewTokens) {
    stats_.stopReason = "length";
    return true;
  }
  if (model_.decoder().position(sequence_) == model_.decoder().context()) {
    stats_.stopReason = "context full";
    return true;
  }
  return false;
}

std::string Generation::taken() {
  GLNET_ASSERT(token_, "a token was chosen");
  const std::uint32_t token = *token_;
  token_.reset();
  const std::vector<std::uint32_t>& ends = model_.config().eosTokenIds;
  if (std::find(ends.begin(), ends.end(), token) != ends.end()) {
    stats_.stopReason = "end of text";
    return finish();
  }
  stats_.generatedIds.push_back(token);
  std::string piece = filtered(stream_.push(token));
  if (stats_.stopReason == "stop text") {
    ended_ = true;
    model_.decoder().end(sequence_);
  }
  return piece;
}

std::optional<std::string> Generation::next() {
  if (sequence_ != 0) throw Error("next() runs sequence 0 alone; a generation in sequence " + std::to_string(sequence_) + " takes Decoder::step()'s tokens with accept()");
  if (ended_) return std::nullopt;
  if (!token_) {
    if (endsBeforeStep()) return finish();
    Stopwatch step;
    token_ = model_.decoder().next();
    stats_.decodeSeconds += step.seconds();
  }
  return taken();
}

std::string Generation::advance() {
  GLNET_ASSERT(!ended_ && token_, "advance() follows the prompt or accept()");
  std::string piece = taken();
  if (!ended_ && endsBeforeStep()) piece += finish();
  return piece;
}

void Generation::accept(std::uint32_t id, double stepSeconds) {
  GLNET_ASSERT(!ended_ && !token_, "accept() follows advance()");
  stats_.decodeSeconds += stepSeconds;
  if (id >= model_.config().vocabulary) {
    ended_ = true;
    throw Error("the model's logits at position " + std::to_string(model_.decoder().position(sequence_) - 1) +
                " hold a NaN (or, sampling, an infinity): no token can be chosen");
  }
  token_ = id;
}

}  // namespace glnet
