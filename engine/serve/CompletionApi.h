// OpenAI's text completions on the wire (POST /v1/completions): the request body read into a CompletionRequest, and
// the answers (a whole completion, streamed chunks, errors) as OpenAI's clients expect them.
//
// Fields read: prompt (a string, or an array of one string; required), max_tokens (default 16), temperature (default
// 1; 0 greedy), top_p, top_k (vLLM's; 0 or -1: off), stop (a string or an array of up to 4), seed (none: a random
// one, so that sampled completions differ as OpenAI's do), stream,
// stream_options.include_usage, model (must be a string; the server has one model). OpenAI fields that would change
// the answer and that glnet does not implement (n, best_of, echo, logprobs, suffix, penalties, logit_bias) are refused
// unless they hold their default; other fields are ignored, as OpenAI does.
#pragma once

#include "base/check.h"
#include "serve/CompletionQueue.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace glnet {

// A request the client must change: `param` names the field at fault (empty: the body as a whole).
class InvalidRequest : public Error {
 public:
  InvalidRequest(std::string param, const std::string& message) : Error(message), param_(std::move(param)) {}
  const std::string& param() const { return param_; }

 private:
  std::string param_;
};

struct CompletionCall {
  CompletionRequest request;
  bool stream = false;
  bool includeUsage = false;  // streamed: a last chunk with the usage and no choices
};

// What a request without a body is told (also when the HTTP layer refused it before parsing, lacking a Content-Length).
constexpr const char* emptyCompletionBody = "the request has no body: send a JSON object with a \"prompt\"";

// Throws InvalidRequest with a one-line message that quotes no bytes of the body.
CompletionCall parseCompletionCall(std::string_view body);

// "stop" (an end-of-text token or a stop text) or "length" (max_tokens, or the context's end).
std::string finishReason(const GenerationStats& stats);
nlohmann::json completionUsage(const GenerationStats& stats);
// The non-streamed answer: object "text_completion" with one choice and the usage.
nlohmann::json completionAnswer(const std::string& id, std::int64_t created, const std::string& model, const std::string& text,
                                const GenerationStats& stats);
// One server-sent event `data: {chunk}\n\n` of a stream: a piece of text, or the last one (`stats` given: empty
// text and the finish reason).
std::string completionEvent(const std::string& id, std::int64_t created, const std::string& model, const std::string& text,
                            const GenerationStats* stats = nullptr);
// The event after the last one of a stream asked for with stream_options.include_usage: no choices, the usage.
std::string completionUsageEvent(const std::string& id, std::int64_t created, const std::string& model, const GenerationStats& stats);
// `{"error": {"message", "type", "param", "code": null}}`; an empty param is written as null.
nlohmann::json apiError(const std::string& message, const std::string& type, const std::string& param = "");

}  // namespace glnet
