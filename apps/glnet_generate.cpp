// glnet_generate: text from a language model in a Hugging Face folder, streamed as it is generated.
#include "common/Cli.h"
#include "base/AtomicFile.h"
#include "base/FileInput.h"
#include "base/check.h"
#include "decoder/LanguageModel.h"
#include "formats/Npy.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <limits>

using namespace glnet;

int main(int argc, char** argv) {
  return cli::run("glnet_generate", [&] {
    cli::Parser parser("glnet_generate",
                       "Generates text with a language model from a Hugging Face folder (config.json, model.safetensors or its\n"
                       "shards with model.safetensors.index.json, tokenizer.json): GPT2LMHeadModel, LlamaForCausalLM and the\n"
                       "Llama-like Qwen2 and Mistral configs. The prompt runs as one pass; every further token is one replayed\n"
                       "GPU plan with the KV cache on the GPU and the token chosen there. The text is printed as it is generated;\n"
                       "prompt and generation speeds follow on stderr.",
                       "--model DIR --prompt TEXT [options]");
    parser.option("model", "DIR", "the model folder")
        .option("prompt", "TEXT", "the text to continue")
        .option("prompt-file", "FILE", "read the prompt from a UTF-8 file instead")
        .option("max-new-tokens", "N", "tokens to generate at most", "64")
        .option("temperature", "T", "sampling temperature; 0 chooses the most likely token (greedy)", "0")
        .option("top-k", "K", "sample among the K most likely tokens only (0: all)", "0")
        .option("top-p", "P", "sample among the most likely tokens whose probabilities reach P (1: all)", "1")
        .option("seed", "S", "seed of the sampling draws: the same seed, prompt and options give the same text", "0")
        .option("stop", "TEXT", "stop before this text (as many as wanted); the config's end-of-text tokens always stop")
        .option("logits", "FILE.npy", "also write the prompt's logits [prompt tokens, vocabulary] as float32 .npy (a check against another engine)")
        .flag("profile", "after generating, time one more decode step dispatch by dispatch on the GPU and list where its time goes (stderr; with --json, in the answer)")
        .option("weights", "fp32|fp16|bf16", "how the decode step holds its weights: fp16 and bf16 halve the bytes a token reads "
                                             "(the arithmetic stays fp32; default: as the files store them)")
        .option("max-context", "N", "positions of the KV cache (default: the config's, at most " + std::to_string(Decoder::defaultContextLimit) + ")")
        .common(true);
    parser.repeatable("stop");
    parser.parse(argc, argv);
    if (!parser.has("model")) throw UsageError("--model is required");
    if (parser.has("prompt") == parser.has("prompt-file")) throw UsageError("give the prompt with --prompt TEXT or --prompt-file FILE");
    GenerationSettings settings;
    settings.maxNewTokens = static_cast<std::uint32_t>(parser.integer("max-new-tokens", 1, 1 << 24));
    settings.sampling.temperature = static_cast<float>(parser.number("temperature"));
    settings.sampling.topK = static_cast<std::uint32_t>(parser.integer("top-k", 0, std::numeric_limits<std::int32_t>::max()));
    settings.sampling.topP = static_cast<float>(parser.number("top-p"));
    settings.sampling.seed = static_cast<std::uint64_t>(parser.integer("seed", 0, std::numeric_limits<long>::max()));
    settings.sampling.check();
    settings.stops = parser.texts("stop");
    const auto maxContext = parser.has("max-context") ? static_cast<std::uint32_t>(parser.integer("max-context", 2, 1 << 24)) : 0u;
    const bool json = parser.has("json");
    const std::string prompt = parser.has("prompt-file") ? readRegularFile(parser.text("prompt-file"), std::uint64_t{64} << 20) : parser.text("prompt");

    const Context context(parser.contextOptions());
    if (parser.has("logits")) checkWritable(parser.text("logits"));
    const std::optional<WeightStorage> storage = parser.has("weights") ? std::optional(weightStorageNamed(parser.text("weights"))) : std::nullopt;
    LanguageModel model(context, parser.text("model"), maxContext, storage);
    if (parser.has("logits")) {
      const std::vector<std::uint32_t> ids = model.tokenizer().encode(prompt);
      NpyArray logits;
      logits.shape = {static_cast<std::int64_t>(ids.size()), static_cast<std::int64_t>(model.config().vocabulary)};
      logits.values = model.decoder().logits(ids);
      writeNpy(parser.text("logits"), logits);
    }
    Generation generation(model, prompt, settings);
    std::string text;
    while (const std::optional<std::string> piece = generation.next()) {
      text += *piece;
      if (!json) {
        std::fputs(piece->c_str(), stdout);
        std::fflush(stdout);
      }
    }
    const GenerationStats& stats = generation.stats();
    Decoder& decoder = model.decoder();
    // One more step, timed: its dispatches' GPU times summed by label (the kernel and its shape). The generation has
    // ended its sequence, so the prompt and the generated text are run again to reach the same position.
    nlohmann::json profile = nlohmann::json::array();
    std::vector<std::uint32_t> ids = model.tokenizer().encode(prompt);
    ids.insert(ids.end(), stats.generatedIds.begin(), stats.generatedIds.end());
    if (ids.size() >= decoder.context()) ids.resize(decoder.context() - 1);  // a full context: its last step
    if (parser.has("profile")) {
      std::vector<std::pair<std::string, double>> dispatches;
      decoder.start(ids, settings.sampling);
      decoder.profiledNext(dispatches);
      std::vector<std::pair<std::string, std::pair<double, int>>> byLabel;
      double total = 0;
      for (const auto& [label, milliseconds] : dispatches) {
        total += milliseconds;
        auto found = std::find_if(byLabel.begin(), byLabel.end(), [&](const auto& entry) { return entry.first == label; });
        if (found == byLabel.end()) found = byLabel.insert(byLabel.end(), {label, {0.0, 0}});
        found->second.first += milliseconds;
        ++found->second.second;
      }
      std::sort(byLabel.begin(), byLabel.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
      for (const auto& [label, entry] : byLabel) {
        profile.push_back({{"dispatch", label}, {"count", entry.second}, {"milliseconds", entry.first}});
        if (!json) std::fprintf(stderr, "%9.3f ms %5.1f%% %4dx %s\n", entry.first, 100 * entry.first / total, entry.second, label.c_str());
      }
      if (!json) std::fprintf(stderr, "%9.3f ms in all: one decode step at position %u, %zu dispatches\n", total, decoder.position() - 1, dispatches.size());
    }
    if (json) {
      const nlohmann::json out{{"text", text},
                               {"prompt_tokens", stats.promptTokens},
                               {"generated_tokens", stats.generatedIds.size()},
                               {"generated_ids", stats.generatedIds},
                               {"stop_reason", stats.stopReason},
                               {"load_seconds", model.loadSeconds()},
                               {"prefill_tokens_per_second", stats.prefillTokensPerSecond()},
                               {"decode_tokens_per_second", stats.decodeTokensPerSecond()},
                               {"decode_step_dispatches", decoder.stepDispatches()},
                               {"decode_step_barriers", decoder.stepBarriers()},
                               {"weight_bytes", decoder.weightBytes()},
                               {"weights", kindName(decoder.weightStorage())},
                               {"device", context.device().renderer},
                               {"profile", profile}};
      std::cout << out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
      std::fputs("\n", stdout);
      std::fprintf(stderr, "prompt: %zu tokens, %.1f tokens/s; generated: %zu tokens, %.1f tokens/s (stopped: %s); %zu dispatches per step, %s weights, on %s\n",
                   stats.promptTokens, stats.prefillTokensPerSecond(), stats.generatedIds.size(), stats.decodeTokensPerSecond(),
                   stats.stopReason.c_str(), decoder.stepDispatches(), kindName(decoder.weightStorage()), context.device().renderer.c_str());
    }
    return 0;
  });
}
