// The GPU decoder against the tiny models' float64 outputs (tests/reference/tiny_decoders.py: GPT-2, a sharded Llama
// with grouped-query attention and llama3 rope scaling, a BF16 Qwen2 with q/k/v biases): the logits at every prompt
// position from one batched pass, and the greedy continuation of 32 tokens through the replayed decode plan (every step
// reading the KV cache the prompt and the earlier steps wrote).
#include "base/check.h"
#include "decoder/Decoder.h"
#include "formats/Npy.h"
#include "support/GlContext.h"
#include "support/TinyDecoders.h"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>

using namespace glnet;

namespace {

struct Expected {
  std::vector<std::uint32_t> prompt, greedy;
  NpyArray logits;
};

Expected expected(const std::string& folder) {
  std::ifstream file(folder + "/expected.json");
  const nlohmann::json json = nlohmann::json::parse(file);
  return {json.at("prompt").get<std::vector<std::uint32_t>>(), json.at("greedy").get<std::vector<std::uint32_t>>(),
          readNpy(folder + "/expected-logits.npy")};
}

Decoder load(const std::string& folder, std::uint32_t context = 0, WeightStorage storage = WeightStorage::fp32, std::uint32_t sequences = 1) {
  const DecoderConfig config = readDecoderConfig(folder);
  return Decoder(test::glContext(), config, readDecoderWeights(folder, config), context, storage, sequences);
}

}  // namespace

TEST_SUITE("gl") {
  TEST_CASE("a decoder's prompt logits and greedy continuation match the model in float64 (GPT-2, Llama, Qwen2)") {
    for (const char* model : {"gpt2", "llama", "qwen2"}) {
      CAPTURE(model);
      const std::string folder = test::tinyDecoder(model);
      const Expected want = expected(folder);
      Decoder decoder = load(folder);
      const std::vector<float> logits = decoder.logits(want.prompt);
      REQUIRE(logits.size() == want.logits.values.size());
      double largest = 0, worst = 0;
      for (std::size_t i = 0; i < logits.size(); ++i) {
        largest = std::max(largest, std::abs(double{want.logits.values[i]}));
        worst = std::max(worst, std::abs(double{logits[i]} - want.logits.values[i]));
      }
      CAPTURE(largest);
      CHECK(worst <= 1e-4 * largest);
      CHECK(decoder.position() == want.prompt.size());

      std::vector<std::uint32_t> greedy{decoder.start(want.prompt, SamplingSettings{})};
      while (greedy.size() < want.greedy.size()) greedy.push_back(decoder.next());
      CHECK(greedy == want.greedy);
      CHECK(decoder.position() == want.prompt.size() + want.greedy.size() - 1);
      // A second generation from the same prompt refills the cache from position 0 and gives the same tokens.
      CHECK(decoder.start(want.prompt, SamplingSettings{}) == want.greedy[0]);
      CHECK(decoder.next() == want.greedy[1]);
    }
  }

  // Past DecodeAttention::chunk keys the step's attention switches to chunks and their combination: every greedy
  // token of a long continuation is the argmax of the prompt pass's logits over the same tokens (the cache written
  // step by step against one batched pass).
  TEST_CASE("a long greedy continuation agrees with one pass over it, across the attention's change to chunks") {
    const std::string folder = test::tinyDecoder("llama");
    const Expected want = expected(folder);
    Decoder decoder = load(folder, 300);
    std::vector<std::uint32_t> ids = want.prompt;
    ids.push_back(decoder.start(want.prompt, SamplingSettings{}));
    while (ids.size() < 300) ids.push_back(decoder.next());
    const std::uint32_t vocabulary = decoder.config().vocabulary;
    const std::vector<float> logits = decoder.logits(std::vector<std::uint32_t>(ids.begin(), ids.end() - 1));
    std::size_t agree = 0, clear = 0;
    for (std::size_t row = want.prompt.size() - 1; row + 1 < ids.size(); ++row) {
      const float* line = logits.data() + row * vocabulary;
      std::vector<float> sorted(line, line + vocabulary);
      std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
      if (sorted[0] - sorted[1] < 1e-4f) continue;  // a near tie may go either way in fp32
      ++clear;
      agree += static_cast<std::size_t>(std::max_element(line, line + vocabulary) - line) == ids[row + 1] ? 1 : 0;
    }
    CHECK(clear > 250);
    CHECK(agree == clear);
  }

  // Qwen2's folder stores bfloat16: held as bf16 or fp16 (which holds every bfloat16 of its range), the decode step reads
  // the same values and continues as in float32.
  TEST_CASE("a decode step reading 16-bit weights continues as float32 where the files store bfloat16") {
    const std::string folder = test::tinyDecoder("qwen2");
    const Expected want = expected(folder);
    for (const WeightStorage storage : {WeightStorage::bf16, WeightStorage::fp16}) {
      CAPTURE(kindName(storage));
      Decoder decoder = load(folder, 0, storage);
      CHECK(decoder.weightStorage() == storage);
      std::vector<std::uint32_t> greedy{decoder.start(want.prompt, SamplingSettings{})};
      while (greedy.size() < want.greedy.size()) greedy.push_back(decoder.next());
      CHECK(greedy == want.greedy);
      CHECK(decoder.weightBytes() < load(folder).weightBytes() * 6 / 10);
    }
  }

  // Continuous batching: three sequences of different prompts, lengths and sampling join a running decode between steps
  // and leave at their own lengths; each continues as a decoder running it alone does (GPT-2: the q/k/v layer appends to
  // every row's cache; Llama: rotary positions per row, and the attention's change to chunks while others stay short).
  TEST_CASE("sequences decoded together continue each as it would alone, joining and leaving between steps") {
    for (const char* model : {"gpt2", "llama"}) {
      CAPTURE(model);
      const std::string folder = test::tinyDecoder(model);
      const Expected want = expected(folder);
      const bool llama = std::string(model) == "llama";
      const std::uint32_t context = llama ? 160 : 64;
      SamplingSettings sampled;
      sampled.temperature = 1.2f;
      sampled.topP = 0.9f;
      sampled.seed = 5;
      struct Run {
        std::vector<std::uint32_t> prompt;
        SamplingSettings sampling;
        std::size_t length, joinsAtStep;
      };
      const std::vector<std::uint32_t> reversed(want.prompt.rbegin(), want.prompt.rend());
      const std::vector<Run> runs{{want.prompt, SamplingSettings{}, llama ? 80u : 40u, 0},
                                  {reversed, sampled, 30, 25},
                                  {std::vector<std::uint32_t>(want.prompt.begin(), want.prompt.begin() + 5), SamplingSettings{}, 40, 8}};
      std::vector<std::vector<std::uint32_t>> alone;
      {
        Decoder decoder = load(folder, context);
        for (const Run& run : runs) {
          std::vector<std::uint32_t> ids{decoder.start(run.prompt, run.sampling)};
          while (ids.size() < run.length) ids.push_back(decoder.next());
          alone.push_back(ids);
        }
      }
      // Run i in sequence order[i]: the middle one of three stays free until the second run joins.
      const std::vector<std::uint32_t> order{0, 2, 1};
      Decoder decoder = load(folder, context, WeightStorage::fp32, 3);
      CHECK(decoder.sequences() == 3);
      std::vector<std::vector<std::uint32_t>> together(runs.size());
      for (std::size_t stepCount = 0;; ++stepCount) {
        for (std::size_t i = 0; i < runs.size(); ++i) {
          if (runs[i].joinsAtStep == stepCount) together[i].push_back(decoder.start(runs[i].prompt, runs[i].sampling, order[i]));
        }
        bool any = false;
        for (std::size_t i = 0; i < runs.size(); ++i) {
          if (!together[i].empty() && together[i].size() == runs[i].length) decoder.end(order[i]);
          any = any || together[i].empty() || together[i].size() < runs[i].length;
        }
        if (!any) break;
        const std::vector<std::uint32_t> ids = decoder.step();
        REQUIRE(ids.size() == 3);
        for (std::size_t i = 0; i < runs.size(); ++i) {
          const bool running = !together[i].empty() && together[i].size() < runs[i].length;
          if (running) {
            together[i].push_back(ids[order[i]]);
          } else {
            CHECK(ids[order[i]] == Decoder::noToken);
          }
        }
      }
      for (std::size_t i = 0; i < runs.size(); ++i) {
        CAPTURE(i);
        CHECK(together[i] == alone[i]);
        CHECK(decoder.position(order[i]) == runs[i].prompt.size() + runs[i].length - 1);
      }
      CHECK_THROWS_WITH(decoder.step(), doctest::Contains("start() one first"));
      CHECK_THROWS_WITH(decoder.start(want.prompt, SamplingSettings{}, 3), doctest::Contains("not one of the decoder's 3"));
      decoder.start(want.prompt, SamplingSettings{}, 0);
      decoder.start(want.prompt, SamplingSettings{}, 1);
      CHECK_THROWS_WITH(decoder.next(), doctest::Contains("use step()"));
    }
  }

  // The caches of a step's sequences are bound at once: a device's storage block limit caps how many decode together.
  TEST_CASE("a decoder refuses more sequences than the device binds caches of, naming --max-batch and --max-context") {
    const std::string folder = test::tinyDecoder("llama");
    const DecoderConfig config = readDecoderConfig(folder);
    const std::uint64_t perPosition = std::uint64_t{2} * config.kvHeads * config.headDim * sizeof(float);
    Limits small = test::glContext().limits();
    small.maxStorageBlockBytes = std::int64_t{1} << 20;
    // 2048 positions: 512 KiB per layer, two in a 1 MiB binding; 8192: 2 MiB, none.
    CHECK(Decoder::sequencesThatFit(small, config, 2048) == std::min<std::uint32_t>(2, gemvRowLimit()));
    CHECK(Decoder::sequencesThatFit(small, config, 8192) == 0);
    // On this device: a context of a quarter binding per cache (or the largest context, where a binding holds more) takes
    // as many sequences as its binding holds caches, and a decoder of one more is refused before it allocates anything.
    const Limits& limits = test::glContext().limits();
    const auto block = static_cast<std::uint64_t>(limits.maxStorageBlockBytes);
    const std::uint64_t positions = std::min<std::uint64_t>(Decoder::largestContext, block / 4 / perPosition / 64 * 64);
    REQUIRE(positions >= 64);
    const auto fitting = static_cast<std::uint32_t>(
        std::min<std::uint64_t>({Decoder::largestBatch, gemvRowLimit(), block / (positions * perPosition)}));
    CAPTURE(positions);
    CHECK(Decoder::sequencesThatFit(limits, config, static_cast<std::uint32_t>(positions)) == fitting);
    CHECK(fitting >= 4);
    if (fitting < Decoder::largestBatch) {
      CHECK_THROWS_WITH_AS(Decoder(test::glContext(), config, readDecoderWeights(folder, config), static_cast<std::uint32_t>(positions),
                                   WeightStorage::fp32, fitting + 1),
                           doctest::Contains(("decodes at most " + std::to_string(fitting) + " sequences").c_str()), DeviceLimitError);
    }
  }

  TEST_CASE("sampled continuations repeat with their seed and differ between seeds") {
    const std::string folder = test::tinyDecoder("llama");
    const Expected want = expected(folder);
    Decoder decoder = load(folder);
    const auto sample = [&](std::uint64_t seed) {
      SamplingSettings sampling;
      sampling.temperature = 1.5f;
      sampling.topP = 0.95f;
      sampling.seed = seed;
      std::vector<std::uint32_t> ids{decoder.start(want.prompt, sampling)};
      while (ids.size() < 16) ids.push_back(decoder.next());
      return ids;
    };
    const std::vector<std::uint32_t> first = sample(7);
    CHECK(sample(7) == first);
    CHECK(sample(8) != first);
    CHECK(std::all_of(first.begin(), first.end(), [&](std::uint32_t id) { return id < decoder.config().vocabulary; }));
  }

  TEST_CASE("a decoder refuses ids outside its vocabulary, prompts longer than its context, and steps past it") {
    const std::string folder = test::tinyDecoder("gpt2");
    Decoder decoder = load(folder, 12);
    CHECK(decoder.context() == 12);
    CHECK_THROWS_WITH(decoder.logits({1, 2, decoder.config().vocabulary}), doctest::Contains("outside the model's vocabulary"));
    CHECK_THROWS_WITH(decoder.logits(std::vector<std::uint32_t>(13, 1)), doctest::Contains("do not fit the context of 12 positions"));
    CHECK_THROWS_WITH(decoder.logits({}), doctest::Contains("no token"));
    decoder.start(std::vector<std::uint32_t>(10, 1), SamplingSettings{});
    decoder.next();
    decoder.next();
    CHECK(decoder.position() == 12);
    CHECK_THROWS_WITH(decoder.next(), doctest::Contains("is full"));
    // GPT-2's learned positions end at the config's.
    const DecoderConfig config = readDecoderConfig(folder);
    CHECK_THROWS_WITH(Decoder(test::glContext(), config, readDecoderWeights(folder, config), config.maxPositions + 1),
                      doctest::Contains("learned positions"));
  }
}
