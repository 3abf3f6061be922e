// Text data sets (data/TokenData.h): ids from .npy arrays and JSON lines tokenized with a tokenizer.json, every bad
// value refused in one line naming its file and place.
#include "data/TokenData.h"

#include "base/check.h"
#include "formats/Npy.h"
#include "support/TempDir.h"

#include <doctest/doctest.h>

#include <cstring>

using namespace glnet;

namespace {

const std::string tokenizerPath = std::string(GLNET_TOKENIZER_DATA) + "/tokenizer.json";

std::uint32_t idAt(const LabelledImages& set, std::size_t at) {
  std::uint32_t id = 0;
  std::memcpy(&id, set.images.pixels.data() + at * 4, 4);
  return id;
}

void writeIds(const test::TempDir& directory, const std::string& split, const std::vector<std::int64_t>& shape, const std::vector<float>& ids,
              const std::vector<float>& labels) {
  writeNpy(directory.file(split + "-ids.npy"), {shape, ids});
  writeNpy(directory.file(split + "-labels.npy"), {{static_cast<std::int64_t>(labels.size())}, labels});
}

}  // namespace

TEST_CASE("an ids data set is read as 4-byte token ids with its labels, and every value that does not fit is refused") {
  test::TempDir directory;
  const TokenLimits limits{3, 10, 2, std::nullopt, false};
  writeIds(directory, "train", {2, 3}, {1, 2, 0, 9, 4, 0}, {1, 0});
  const LabelledImages set = readTokenIdSplit(directory.path().string(), Split::train, limits);
  CHECK(set.images.tokenIds());
  CHECK(set.images.count == 2);
  CHECK(set.images.pixelsPerImage() == 3);
  CHECK(set.images.pixels.size() == 24);
  CHECK(idAt(set, 3) == 9);
  CHECK(set.labels == std::vector<std::uint8_t>{1, 0});

  writeIds(directory, "test", {2, 4}, {1, 2, 0, 0, 9, 4, 0, 0}, {1, 0});
  CHECK_THROWS_WITH(readTokenIdSplit(directory.path().string(), Split::test, limits),
                    doctest::Contains("test-ids.npy: ids of shape [2, 4]; the network reads sequences of 3 ids, [count, 3]"));
  writeIds(directory, "test", {2, 3}, {1, 2, 0, 10, 4, 0}, {1, 0});
  CHECK_THROWS_WITH(readTokenIdSplit(directory.path().string(), Split::test, limits),
                    doctest::Contains("test-ids.npy: id 10 (sequence 1, position 0) is not a whole number below the embedding's 10 rows"));
  writeIds(directory, "test", {2, 3}, {1, 2.5f, 0, 1, 4, 0}, {1, 0});
  CHECK_THROWS_WITH(readTokenIdSplit(directory.path().string(), Split::test, limits), doctest::Contains("id 2.5 (sequence 0, position 1)"));
  writeIds(directory, "test", {2, 3}, {1, 2, 0, 1, 4, 0}, {1, 2});
  CHECK_THROWS_WITH(readTokenIdSplit(directory.path().string(), Split::test, limits),
                    doctest::Contains("test-labels.npy: label 2 (sequence 1) is not a class below 2"));
  writeIds(directory, "test", {2, 3}, {1, 2, 0, 1, 4, 0}, {1, 0, 1});
  CHECK_THROWS_WITH(readTokenIdSplit(directory.path().string(), Split::test, limits), doctest::Contains("test-labels.npy: 2 sequences need labels of shape [2]"));
  // With a mask layer's padding id, a sequence of nothing else is refused (its attention would see no key).
  writeIds(directory, "test", {2, 3}, {1, 2, 0, 0, 0, 0}, {1, 0});
  CHECK_NOTHROW(readTokenIdSplit(directory.path().string(), Split::test, limits));
  CHECK_THROWS_WITH(readTokenIdSplit(directory.path().string(), Split::test, {3, 10, 2, 0, false}),
                    doctest::Contains("test-ids.npy: sequence 1 is padding (id 0) alone: its attention would see no position"));
  // A causal attention reading the mask: a sequence may not start with padding either.
  writeIds(directory, "test", {2, 3}, {1, 2, 0, 0, 4, 5}, {1, 0});
  CHECK_NOTHROW(readTokenIdSplit(directory.path().string(), Split::test, {3, 10, 2, 0, false}));
  CHECK_THROWS_WITH(readTokenIdSplit(directory.path().string(), Split::test, {3, 10, 2, 0, true}),
                    doctest::Contains("test-ids.npy: sequence 1 starts with padding (id 0): a causal attention's first queries would see no position"));
  CHECK_THROWS_WITH(readTokenIdSplit(directory.path().string(), Split::test, {3, 10, 300, std::nullopt, false}),
                    doctest::Contains("test-labels.npy: labels travel as bytes, so at most 256 classes; the network has 300"));
}

TEST_CASE("JSON lines are tokenized, cut or padded to the length, with numbered or named classes; bad lines are refused by file and line") {
  test::TempDir directory;
  const ByteLevelBpe tokenizer = ByteLevelBpe::fromFile(tokenizerPath);
  const TokenLimits limits{6, tokenizer.vocabularySize(), 2, tokenizer.tokenId("<|endoftext|>"), false};
  const std::uint32_t pad = *tokenizer.tokenId("<|endoftext|>");
  const std::string longText = "the quick brown fox jumps over the lazy dog and then some";
  directory.write("train.jsonl", R"({"text": "the fox", "label": "b"})" "\n\n" R"({"text": ")" + longText + R"(", "label": "a"})" "\n");
  directory.write("test.jsonl", R"({"text": "dog", "label": "a"})" "\n");
  const TextData data = readTextData(directory.path().string(), tokenizer, pad, limits);
  CHECK(data.classNames == std::vector<std::string>{"a", "b"});
  CHECK(data.train.labels == std::vector<std::uint8_t>{1, 0});
  CHECK(data.trainCut == 1);
  CHECK(data.testCut == 0);
  const std::vector<std::uint32_t> fox = tokenizer.encode("the fox"), cut = tokenizer.encode(longText);
  REQUIRE(fox.size() < 6);
  for (std::size_t p = 0; p < 6; ++p) {
    CHECK(idAt(data.train, p) == (p < fox.size() ? fox[p] : pad));
    CHECK(idAt(data.train, 6 + p) == cut[p]);
  }

  const auto refused = [&](const std::string& train, const std::string& test, const std::string& message) {
    directory.write("train.jsonl", train);
    directory.write("test.jsonl", test);
    CHECK_THROWS_WITH(readTextData(directory.path().string(), tokenizer, pad, limits), doctest::Contains(message.c_str()));
  };
  const std::string good = R"({"text": "x", "label": 1})" "\n";
  refused(R"({"text": "x", "label": 1})" "\n" R"({"text": "y"})", good, "train.jsonl line 2: a line is an object with \"text\" and \"label\"");
  refused(R"({"text": 5, "label": 1})", good, "train.jsonl line 1: \"text\" must be a string, not 5");
  refused(R"({"text": "x", "label": -1})", good, "line 1: \"label\" must be a class number from 0 to 255 or a class name, not -1");
  refused(good + R"({"text": "x", "label": "a"})", good, "train.jsonl line 2: labels are all numbers or all names, not both");
  refused(good, R"({"text": "x", "label": 2})", "test.jsonl: example 1 has label 2; the network has 2 classes");
  refused(R"({"text": "x", "label": "a"})" "\n" R"({"text": "x", "label": "b"})", R"({"text": "x", "label": "c"})",
          "test.jsonl: example 1's class 'c' is not among the training file's");
  refused(R"({"text": "x", "label": "a"})", good, "train.jsonl: 1 class names for a network of 2 classes");
  refused("\n \n", good, "train.jsonl: no examples");
  refused("{\"text\": \"x\", ", good, "train.jsonl line 1");
  refused(good + R"({"text": "", "label": 0})", good, "train.jsonl: example 2 is padding (id " + std::to_string(pad) + ") alone");
  const TokenLimits small{6, 100, 2, std::nullopt, false};
  directory.write("train.jsonl", R"({"text": "the fox", "label": 0})");
  directory.write("test.jsonl", good);
  std::uint32_t firstTooLarge = pad;  // the first id of "the fox" and its padding past 100 rows
  for (auto id = fox.rbegin(); id != fox.rend(); ++id) firstTooLarge = *id >= 100 ? *id : firstTooLarge;
  const std::string message = "has token id " + std::to_string(firstTooLarge) + "; the network's embedding has 100 rows";
  CHECK_THROWS_WITH(readTextData(directory.path().string(), tokenizer, pad, small), doctest::Contains(message.c_str()));
}
