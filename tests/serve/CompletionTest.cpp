// The language model's server side: OpenAI's completion requests read and answered (serve/CompletionApi), and the
// queue that runs completions on the GL context's thread (serve/CompletionQueue) against Generation run directly.
#include "base/check.h"
#include "decoder/LanguageModel.h"
#include "serve/CompletionApi.h"
#include "serve/CompletionQueue.h"
#include "serve/ServeMetrics.h"
#include "support/GlContext.h"
#include "support/TinyDecoders.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <future>

using namespace glnet;

TEST_CASE("completion requests: OpenAI's fields and defaults, null as unset, unknown fields ignored") {
  const CompletionCall plain = parseCompletionCall(R"({"prompt": "Hello", "model": "any", "user": "u", "metadata": {"x": 1}})");
  CHECK(plain.request.prompt == "Hello");
  CHECK(plain.request.settings.maxNewTokens == 16);
  CHECK(plain.request.settings.sampling.temperature == 1);
  CHECK(plain.request.settings.sampling.topP == 1);
  CHECK(plain.request.settings.sampling.topK == 0);
  CHECK(plain.request.settings.stops.empty());
  CHECK_FALSE(plain.stream);
  CHECK_FALSE(plain.includeUsage);
  // Unseeded requests draw afresh.
  CHECK(plain.request.settings.sampling.seed != parseCompletionCall(R"({"prompt": "Hello"})").request.settings.sampling.seed);

  const CompletionCall full = parseCompletionCall(R"({"prompt": ["Hi"], "max_tokens": 5, "temperature": 0, "top_p": 0.5, "top_k": 7,
      "stop": ["a", "bc"], "seed": -1, "stream": true, "stream_options": {"include_usage": true}, "n": 1, "echo": false,
      "logprobs": null, "suffix": null, "presence_penalty": 0, "frequency_penalty": 0.0, "logit_bias": {}})");
  CHECK(full.request.prompt == "Hi");
  CHECK(full.request.settings.maxNewTokens == 5);
  CHECK(full.request.settings.sampling.greedy());
  CHECK(full.request.settings.sampling.topP == 0.5f);
  CHECK(full.request.settings.sampling.topK == 7);
  CHECK(full.request.settings.stops == std::vector<std::string>{"a", "bc"});
  CHECK(full.request.settings.sampling.seed == ~std::uint64_t{0});
  CHECK(full.stream);
  CHECK(full.includeUsage);

  const CompletionCall nulls = parseCompletionCall(R"({"prompt": "x", "max_tokens": null, "temperature": null, "stop": null, "seed": 12,
      "top_k": -1, "stream": null})");
  CHECK(nulls.request.settings.maxNewTokens == 16);
  CHECK(nulls.request.settings.sampling.temperature == 1);
  CHECK(nulls.request.settings.sampling.seed == 12);
  CHECK(nulls.request.settings.sampling.topK == 0);
  CHECK(parseCompletionCall(R"({"prompt": "x", "stop": "\n\n"})").request.settings.stops == std::vector<std::string>{"\n\n"});
}

TEST_CASE("completion requests: each wrong field refused by name in one line that quotes no request bytes") {
  const auto refused = [](const std::string& body, const std::string& param, const std::string& reason) {
    CAPTURE(body);
    try {
      parseCompletionCall(body);
      FAIL("accepted");
    } catch (const InvalidRequest& error) {
      const std::string message = error.what();
      CHECK(error.param() == param);
      CHECK_MESSAGE(message.find(reason) != std::string::npos, message);
      CHECK(std::all_of(message.begin(), message.end(), [](char c) { return c >= 0x20 && c < 0x7f; }));
    }
  };
  refused("", "", "the request has no body");
  refused("{", "", "not valid JSON");
  refused("\"text\"", "", "the body is a JSON string, not a JSON object");
  refused(R"({"prompt": "a", "prompt": "b"})", "", "appears twice");
  refused(std::string("{\"prompt\": \"\xff\xfe\"}"), "", "not valid JSON (syntax error at byte");
  refused("{}", "prompt", "prompt is required");
  refused(R"({"prompt": null})", "prompt", "prompt is required");
  refused(R"({"prompt": [1, 2, 3]})", "prompt", "an array of 3 values");
  refused(R"({"prompt": []})", "prompt", "an array of 0 values");
  refused(R"({"prompt": {"text": "a"}})", "prompt", "prompt is a JSON object, not a string");
  refused(R"({"prompt": "a", "model": 1})", "model", "model is 1, not a string");
  refused(R"({"prompt": "a", "max_tokens": 0})", "max_tokens", "max_tokens is 0; it must be an integer from 1 to 16777216");
  refused(R"({"prompt": "a", "max_tokens": 16777217})", "max_tokens", "max_tokens is 16777217");
  refused(R"({"prompt": "a", "max_tokens": 1.5})", "max_tokens", "max_tokens is 1.5");
  refused(R"({"prompt": "a", "max_tokens": true})", "max_tokens", "max_tokens is a JSON boolean");
  refused(R"({"prompt": "a", "temperature": -0.5})", "temperature", "temperature is -0.5");
  refused(R"({"prompt": "a", "temperature": 1e300})", "temperature", "temperature is 1e+300");
  refused(R"({"prompt": "a", "temperature": 1e-39})", "temperature", "too small to divide by");
  refused(R"({"prompt": "a", "temperature": "hot"})", "temperature", "temperature is a JSON string");
  refused(R"({"prompt": "a", "top_p": 0})", "top_p", "top_p is 0");
  refused(R"({"prompt": "a", "top_p": 1.01})", "top_p", "top_p is 1.01");
  refused(R"({"prompt": "a", "top_k": 2.5})", "top_k", "top_k is 2.5");
  refused(R"({"prompt": "a", "seed": 1.5})", "seed", "seed is 1.5, not an integer");
  refused(R"({"prompt": "a", "stop": ["a", "b", "c", "d", "e"]})", "stop", "a string or an array of up to 4 strings");
  refused(R"({"prompt": "a", "stop": {"a": 1}})", "stop", "stop is a JSON object");
  refused(R"({"prompt": "a", "stop": ["a", null]})", "stop[1]", "stop[1] is a JSON null, not a string");
  refused(R"({"prompt": "a", "stop": ""})", "stop", "stop texts must not be empty");
  refused(R"({"prompt": "a", "stream": 1})", "stream", "stream is 1, not true or false");
  refused(R"({"prompt": "a", "stream_options": true})", "stream_options", "not an object");
  refused(R"({"prompt": "a", "stream_options": {"include_usage": "yes"}})", "stream_options.include_usage", "not true or false");
  refused(R"({"prompt": "a", "n": 3})", "n", "n is not supported: glnet gives one choice per request");
  refused(R"({"prompt": "a", "best_of": 2})", "best_of", "not supported");
  refused(R"({"prompt": "a", "echo": true})", "echo", "not supported");
  refused(R"({"prompt": "a", "logprobs": 0})", "logprobs", "not supported");
  refused(R"({"prompt": "a", "suffix": "end"})", "suffix", "not supported");
  refused(R"({"prompt": "a", "frequency_penalty": 1})", "frequency_penalty", "not supported");
  refused(R"({"prompt": "a", "logit_bias": {"50256": -100}})", "logit_bias", "not supported");
}

TEST_CASE("completion answers: OpenAI's text_completion object, its stream events and errors") {
  GenerationStats stats;
  stats.promptTokens = 3;
  stats.generatedIds = {5, 6};
  stats.stopReason = "end of text";
  const nlohmann::json answer = completionAnswer("cmpl-1", 42, "gpt2", "héllo", stats);
  CHECK(answer == nlohmann::json::parse(R"({"id": "cmpl-1", "object": "text_completion", "created": 42, "model": "gpt2",
      "choices": [{"text": "héllo", "index": 0, "finish_reason": "stop", "logprobs": null}],
      "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}})"));
  for (const auto& [reason, finish] : {std::pair<const char*, const char*>{"length", "length"}, {"context full", "length"}, {"stop text", "stop"}, {"end of text", "stop"}}) {
    stats.stopReason = reason;
    CHECK(finishReason(stats) == finish);
  }
  const std::string piece = completionEvent("cmpl-1", 42, "gpt2", "a\n");
  REQUIRE(piece.rfind("data: ", 0) == 0);
  REQUIRE(piece.size() > 8);
  CHECK(piece.substr(piece.size() - 2) == "\n\n");
  CHECK(piece.find('\n') == piece.size() - 2);  // the text's newline escaped: one event, one line
  const nlohmann::json chunk = nlohmann::json::parse(piece.substr(6));
  CHECK(chunk["choices"][0]["text"] == "a\n");
  CHECK(chunk["choices"][0]["finish_reason"].is_null());
  CHECK(nlohmann::json::parse(completionEvent("cmpl-1", 42, "gpt2", "", &stats).substr(6))["choices"][0]["finish_reason"] == "stop");
  const nlohmann::json usage = nlohmann::json::parse(completionUsageEvent("cmpl-1", 42, "gpt2", stats).substr(6));
  CHECK(usage["choices"].empty());
  CHECK(usage["usage"]["total_tokens"] == 5);
  CHECK(apiError("bad", "invalid_request_error") ==
        nlohmann::json::parse(R"({"error": {"message": "bad", "type": "invalid_request_error", "param": null, "code": null}})"));
  CHECK(apiError("bad", "invalid_request_error", "top_p")["error"]["param"] == "top_p");
}

TEST_CASE("serve metrics of a language model: requests, completions by outcome, tokens, the queue") {
  ServeMetrics metrics;
  metrics.count("/v1/completions", 200);
  metrics.count("/v1/completions", 400);
  CompletionStats stats;
  stats.waiting = 3;
  stats.running = 1;
  stats.completed = 5;
  stats.cancelled = 2;
  stats.refused = 4;
  stats.promptTokens = 70;
  stats.generatedTokens = 123;
  stats.decodeSteps = 61;
  const std::string text = metrics.prometheus(stats);
  for (const char* line : {"glnet_requests_total{path=\"/v1/completions\",code=\"200\"} 1\n", "glnet_request_errors_total 1\n",
                           "glnet_completions_total{outcome=\"completed\"} 5\n", "glnet_completions_total{outcome=\"failed\"} 0\n",
                           "glnet_completions_total{outcome=\"cancelled\"} 2\n", "glnet_completions_total{outcome=\"refused\"} 4\n",
                           "glnet_prompt_tokens_total 70\n", "glnet_generated_tokens_total 123\n", "glnet_queue_requests 3\n",
                           "glnet_running_completions 1\n", "glnet_decode_steps_total 61\n"}) {
    CHECK_MESSAGE(text.find(line) != std::string::npos, line);
  }
  CHECK(text.find("glnet_images_total") == std::string::npos);
}

namespace {

// What a completion sent to its callbacks.
struct Collected {
  std::string text;
  std::promise<CompletionOutcome> done;
};

CompletionQueue::Ticket submit(CompletionQueue& queue, const std::string& prompt, std::uint32_t tokens, Collected& into) {
  CompletionRequest request;
  request.prompt = prompt;
  request.settings.maxNewTokens = tokens;
  return queue.submit(request, [&into](const std::string& piece) { into.text += piece; },
                      [&into](const CompletionOutcome& outcome) { into.done.set_value(outcome); });
}

}  // namespace

TEST_SUITE("gl") {
  TEST_CASE("a completion queue runs completions in arrival order as Generation does, refuses past its limit, cancels") {
    const std::string folder = test::tinyDecoder("gpt2");
    const std::string prompt = "The quick brown fox";
    // The reference: Generation on the tests' own context.
    std::string expected;
    GenerationStats expectedStats;
    {
      LanguageModel model(test::glContext(), folder);
      GenerationSettings settings;
      settings.maxNewTokens = 20;
      Generation generation(model, prompt, settings);
      while (const std::optional<std::string> piece = generation.next()) expected += *piece;
      expectedStats = generation.stats();
    }
    REQUIRE(expected.size() > 4);

    CompletionOptions options;
    options.maxWaiting = 2;
    CompletionQueue queue(ContextOptions{}, folder, options);
    CHECK(queue.contextPositions() == 64);
    // The first completion's first piece holds the worker until released, so that the queue's state stays put.
    std::promise<void> holding, release;
    Collected first;
    CompletionRequest request;
    request.prompt = prompt;
    request.settings.maxNewTokens = 60;
    const CompletionQueue::Ticket running = queue.submit(
        request,
        [&, held = false](const std::string& piece) mutable {
          first.text += piece;
          if (!held) {
            held = true;
            holding.set_value();
            release.get_future().wait();
          }
        },
        [&](const CompletionOutcome& outcome) { first.done.set_value(outcome); });
    REQUIRE(holding.get_future().wait_for(std::chrono::minutes(2)) == std::future_status::ready);
    Collected second, third, fourth;
    const CompletionQueue::Ticket secondTicket = submit(queue, prompt, 20, second);
    submit(queue, prompt, 20, third);
    CHECK_THROWS_WITH_AS(submit(queue, prompt, 20, fourth), "2 completions are waiting, the most the queue takes", Unavailable);
    CompletionStats stats = queue.stats();
    CHECK(stats.waiting == 2);
    CHECK(stats.running == 1);
    CHECK(stats.refused == 1);

    // Cancelling a waiting completion ends it at once (on this thread); the running one ends at its next token.
    queue.cancel(secondTicket);
    REQUIRE(second.done.get_future().wait_for(std::chrono::seconds(0)) == std::future_status::ready);
    CHECK(queue.stats().waiting == 1);
    queue.cancel(running);
    queue.cancel(12345);  // never given: ignored
    release.set_value();
    const CompletionOutcome cancelled = first.done.get_future().get();
    CHECK(cancelled.cancelled);
    CHECK_FALSE(cancelled.error);
    CHECK(cancelled.stats.generatedIds.size() < 60);
    CHECK(expected.rfind(first.text, 0) == 0);  // what it sent is the start of the greedy text

    const CompletionOutcome done = third.done.get_future().get();
    CHECK_FALSE(done.cancelled);
    CHECK_FALSE(done.error);
    CHECK(third.text == expected);
    CHECK(done.stats.generatedIds == expectedStats.generatedIds);
    CHECK(done.stats.stopReason == expectedStats.stopReason);
    queue.drain();
    stats = queue.stats();
    CHECK(stats.completed == 1);
    CHECK(stats.cancelled == 2);
    CHECK(stats.waiting == 0);
    CHECK(stats.running == 0);
    CHECK(stats.promptTokens == 2 * expectedStats.promptTokens);
    CHECK(stats.generatedTokens == cancelled.stats.generatedIds.size() + done.stats.generatedIds.size());
    Collected late;
    CHECK_THROWS_WITH_AS(submit(queue, prompt, 4, late), "the server is shutting down", Unavailable);
  }

  // The worker is held in the first completion's first piece while two more queue; released, the second joins the
  // first's decode steps (batch 2) and the third waits for a free sequence: each text is the one Generation gives alone.
  TEST_CASE("a completion queue decodes completions together, each as Generation alone gives it, the rest queued past its batch") {
    const std::string folder = test::tinyDecoder("llama");
    struct Asked {
      std::string prompt;
      std::uint32_t tokens;
      SamplingSettings sampling;
    };
    SamplingSettings sampled;
    sampled.temperature = 1.3f;
    sampled.seed = 3;
    const std::vector<Asked> asked{{"The quick brown fox", 40, {}}, {"Once upon a time", 20, sampled}, {"A third one", 25, {}}};
    std::vector<std::string> alone;
    std::vector<GenerationStats> aloneStats;
    {
      LanguageModel model(test::glContext(), folder);
      for (const Asked& a : asked) {
        GenerationSettings settings;
        settings.maxNewTokens = a.tokens;
        settings.sampling = a.sampling;
        Generation generation(model, a.prompt, settings);
        std::string text;
        while (const std::optional<std::string> piece = generation.next()) text += *piece;
        alone.push_back(text);
        aloneStats.push_back(generation.stats());
      }
    }
    CompletionOptions options;
    options.batch = 2;
    CompletionQueue queue(ContextOptions{}, folder, options);
    std::promise<void> holding, release;
    std::vector<Collected> collected(asked.size());
    for (std::size_t i = 0; i < asked.size(); ++i) {
      CompletionRequest request;
      request.prompt = asked[i].prompt;
      request.settings.maxNewTokens = asked[i].tokens;
      request.settings.sampling = asked[i].sampling;
      Collected& into = collected[i];
      queue.submit(
          request,
          [&, i, held = false](const std::string& piece) mutable {
            into.text += piece;
            if (i == 0 && !held) {
              held = true;
              holding.set_value();
              release.get_future().wait();
            }
          },
          [&into](const CompletionOutcome& outcome) { into.done.set_value(outcome); });
      if (i == 0) REQUIRE(holding.get_future().wait_for(std::chrono::minutes(2)) == std::future_status::ready);
    }
    CHECK(queue.stats().waiting == 2);
    release.set_value();
    std::size_t generated = 0;
    for (std::size_t i = 0; i < asked.size(); ++i) {
      CAPTURE(i);
      const CompletionOutcome outcome = collected[i].done.get_future().get();
      CHECK_FALSE(outcome.error);
      CHECK(collected[i].text == alone[i]);
      CHECK(outcome.stats.generatedIds == aloneStats[i].generatedIds);
      generated += outcome.stats.generatedIds.size();
    }
    queue.drain();
    const CompletionStats stats = queue.stats();
    CHECK(stats.completed == 3);
    CHECK(stats.generatedTokens == generated);
    // Each completion's first token comes from its prompt; steps that advanced two completions make the steps fewer
    // than the other tokens.
    CHECK(stats.decodeSteps < generated - asked.size());
    CHECK(stats.decodeSteps >= aloneStats[0].generatedIds.size() - 1);
  }

  TEST_CASE("a completion queue refuses, before queuing, prompts that do not fit and settings out of range") {
    CompletionOptions options;
    options.contextPositions = 8;
    CompletionQueue queue(ContextOptions{}, test::tinyDecoder("llama"), options);
    CHECK(queue.contextPositions() == 8);
    Collected unused;
    CHECK_THROWS_WITH_AS(submit(queue, "", 4, unused), "the prompt holds no token", Error);
    CHECK_THROWS_WITH_AS(submit(queue, "one two three four five six seven eight", 4, unused),
                         doctest::Contains("leave no room for a completion in the context of 8 positions"), Error);
    CHECK_THROWS_AS(submit(queue, "hi", 0, unused), UsageError);
    // The context's end stops a completion: "length" to OpenAI's clients.
    Collected fits;
    submit(queue, "hi", 100, fits);
    const CompletionOutcome outcome = fits.done.get_future().get();
    CHECK(outcome.stats.stopReason == "context full");
    // Every position holds a token fed, and the last token chosen needs none.
    CHECK(outcome.stats.promptTokens + outcome.stats.generatedIds.size() == 9);
    CHECK(finishReason(outcome.stats) == "length");
    CHECK(queue.stats().refused == 0);
  }
}
