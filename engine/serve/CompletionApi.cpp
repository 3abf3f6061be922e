#include "serve/CompletionApi.h"

#include "formats/UntrustedJson.h"

#include <cmath>
#include <limits>
#include <random>

namespace glnet {
namespace {

constexpr std::size_t mostStops = 4;  // as OpenAI
constexpr std::int64_t mostTokens = std::int64_t{1} << 24;

// The field's number, refused unless it is a finite number in [minimum, maximum] (integral when `integer`).
double number(const nlohmann::json& value, const std::string& field, double minimum, double maximum, bool integer, const std::string& range) {
  const double x = value.is_number() ? value.get<double>() : NAN;
  if (!(x >= minimum && x <= maximum) || (integer && x != std::floor(x))) {
    throw InvalidRequest(field, field + " is " + describeJsonValue(value) + "; it must be " + range);
  }
  return x;
}

std::string text(const nlohmann::json& value, const std::string& field) {
  if (!value.is_string()) throw InvalidRequest(field, field + " is " + describeJsonValue(value) + ", not a string");
  return value.get<std::string>();
}

// Refuses an OpenAI field that glnet does not implement unless it holds its default (null always is).
void unsupported(const nlohmann::json& document, const std::string& field, const nlohmann::json& byDefault, const std::string& why) {
  const auto found = document.find(field);
  if (found == document.end() || found->is_null() || *found == byDefault) return;
  throw InvalidRequest(field, field + " is not supported: " + why);
}

}  // namespace

CompletionCall parseCompletionCall(std::string_view body) {
  if (body.empty()) throw InvalidRequest("", emptyCompletionBody);
  nlohmann::json document;
  try {
    document = parseUntrustedJson(body, "the body");
  } catch (const Error& error) {
    throw InvalidRequest("", error.what());
  }
  if (!document.is_object()) throw InvalidRequest("", "the body is " + describeJsonValue(document) + ", not a JSON object with a \"prompt\"");
  // A field given as null takes its default, as OpenAI's clients send unset fields.
  const auto given = [&](const char* field) -> const nlohmann::json* {
    const auto found = document.find(field);
    return found == document.end() || found->is_null() ? nullptr : &*found;
  };

  CompletionCall call;
  GenerationSettings& settings = call.request.settings;
  const nlohmann::json* prompt = given("prompt");
  if (!prompt) throw InvalidRequest("prompt", "prompt is required: the text to complete");
  if (prompt->is_array()) {
    if (prompt->size() != 1 || !(*prompt)[0].is_string()) {
      throw InvalidRequest("prompt", "prompt is an array of " + std::to_string(prompt->size()) +
                                         " values; glnet completes one text: a string, or an array of one string");
    }
    prompt = &(*prompt)[0];
  }
  call.request.prompt = text(*prompt, "prompt");
  if (const nlohmann::json* value = given("model")) text(*value, "model");

  settings.maxNewTokens = 16;
  if (const nlohmann::json* value = given("max_tokens")) {
    settings.maxNewTokens = static_cast<std::uint32_t>(number(*value, "max_tokens", 1, mostTokens, true, "an integer from 1 to " + std::to_string(mostTokens)));
  }
  settings.sampling.temperature = 1;
  if (const nlohmann::json* value = given("temperature")) {
    const double temperature = number(*value, "temperature", 0, 1e30, false, "a number >= 0 (0: greedy)");
    settings.sampling.temperature = static_cast<float>(temperature);
    // One below a float's normal range is 0 where a GPU flushes denormals, and (z - M) / 0 is NaN.
    if (temperature > 0 && settings.sampling.temperature < std::numeric_limits<float>::min()) {
      throw InvalidRequest("temperature", "temperature is too small to divide by on a GPU: give 0 for greedy");
    }
  }
  if (const nlohmann::json* value = given("top_p")) {
    settings.sampling.topP = static_cast<float>(number(*value, "top_p", 0, 1, false, "a number in (0, 1] (1: off)"));
    if (settings.sampling.topP == 0) throw InvalidRequest("top_p", "top_p is 0; it must be in (0, 1] (1: off; temperature 0 for greedy)");
  }
  if (const nlohmann::json* value = given("top_k")) {
    const double k = number(*value, "top_k", -1, 2147483647, true, "an integer >= -1 (0 or -1: off)");
    settings.sampling.topK = k < 0 ? 0 : static_cast<std::uint32_t>(k);
  }
  // Without a seed every request draws afresh, as OpenAI's do; with one, the same request gives the same text.
  settings.sampling.seed = std::random_device()() | std::uint64_t{std::random_device()()} << 32;
  if (const nlohmann::json* value = given("seed")) {
    if (!value->is_number_integer()) throw InvalidRequest("seed", "seed is " + describeJsonValue(*value) + ", not an integer");
    // Negative seeds (OpenAI takes any 64-bit integer) are their two's complement.
    settings.sampling.seed = value->is_number_unsigned() ? value->get<std::uint64_t>() : static_cast<std::uint64_t>(value->get<std::int64_t>());
  }
  if (const nlohmann::json* value = given("stop")) {
    if (value->is_string()) {
      settings.stops = {value->get<std::string>()};
    } else if (value->is_array() && value->size() <= mostStops) {
      for (std::size_t i = 0; i < value->size(); ++i) settings.stops.push_back(text((*value)[i], "stop[" + std::to_string(i) + "]"));
    } else {
      throw InvalidRequest("stop", "stop is " + describeJsonValue(*value) + "; it must be a string or an array of up to " +
                                       std::to_string(mostStops) + " strings");
    }
    for (const std::string& stop : settings.stops) {
      if (stop.empty()) throw InvalidRequest("stop", "stop texts must not be empty");
    }
  }
  if (const nlohmann::json* value = given("stream")) {
    if (!value->is_boolean()) throw InvalidRequest("stream", "stream is " + describeJsonValue(*value) + ", not true or false");
    call.stream = value->get<bool>();
  }
  if (const nlohmann::json* value = given("stream_options")) {
    if (!value->is_object()) throw InvalidRequest("stream_options", "stream_options is " + describeJsonValue(*value) + ", not an object");
    const auto usage = value->find("include_usage");
    if (usage != value->end() && !usage->is_null()) {
      if (!usage->is_boolean()) {
        throw InvalidRequest("stream_options.include_usage", "stream_options.include_usage is " + describeJsonValue(*usage) + ", not true or false");
      }
      call.includeUsage = usage->get<bool>();
    }
  }
  unsupported(document, "n", 1, "glnet gives one choice per request (send several requests)");
  unsupported(document, "best_of", 1, "glnet gives one choice per request");
  unsupported(document, "echo", false, "the answer holds the completion only");
  unsupported(document, "logprobs", nlohmann::json(), "glnet returns no log probabilities");
  unsupported(document, "suffix", nlohmann::json(), "glnet completes after the prompt only");
  unsupported(document, "presence_penalty", 0, "glnet applies no penalties");
  unsupported(document, "frequency_penalty", 0, "glnet applies no penalties");
  unsupported(document, "logit_bias", nlohmann::json::object(), "glnet applies no logit bias");
  return call;
}

std::string finishReason(const GenerationStats& stats) {
  return stats.stopReason == "length" || stats.stopReason == "context full" ? "length" : "stop";
}

nlohmann::json completionUsage(const GenerationStats& stats) {
  return {{"prompt_tokens", stats.promptTokens},
          {"completion_tokens", stats.generatedIds.size()},
          {"total_tokens", stats.promptTokens + stats.generatedIds.size()}};
}

nlohmann::json completionAnswer(const std::string& id, std::int64_t created, const std::string& model, const std::string& text,
                                const GenerationStats& stats) {
  return {{"id", id},
          {"object", "text_completion"},
          {"created", created},
          {"model", model},
          {"choices", {{{"text", text}, {"index", 0}, {"finish_reason", finishReason(stats)}, {"logprobs", nullptr}}}},
          {"usage", completionUsage(stats)}};
}

namespace {

std::string event(const nlohmann::json& chunk) {
  // Generated text is valid UTF-8 (TextStream holds torn characters back), so nothing is replaced here.
  return "data: " + chunk.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n";
}

}  // namespace

std::string completionEvent(const std::string& id, std::int64_t created, const std::string& model, const std::string& text,
                            const GenerationStats* stats) {
  return event({
      {"id", id},
      {"object", "text_completion"},
      {"created", created},
      {"model", model},
      {"choices", {{{"text", text}, {"index", 0}, {"finish_reason", stats ? nlohmann::json(finishReason(*stats)) : nullptr}, {"logprobs", nullptr}}}}});
}

std::string completionUsageEvent(const std::string& id, std::int64_t created, const std::string& model, const GenerationStats& stats) {
  return event({{"id", id},
                {"object", "text_completion"},
                {"created", created},
                {"model", model},
                {"choices", nlohmann::json::array()},
                {"usage", completionUsage(stats)}});
}

nlohmann::json apiError(const std::string& message, const std::string& type, const std::string& param) {
  return {{"error", {{"message", message}, {"type", type}, {"param", param.empty() ? nlohmann::json() : nlohmann::json(param)}, {"code", nullptr}}}};
}

}  // namespace glnet
