// The byte-level BPE tokenizer against the ids that tests/reference/make_tokenizer.py computed with its own
// pure-Python encoder (stored in tests/data/tokenizer/expected.json when the files were made), and on what a
// tokenizer.json or a text can do wrong.
#include "text/ByteLevelBpe.h"
#include "base/check.h"
#include "base/Stopwatch.h"
#include "support/TempDir.h"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

using namespace glnet;

namespace {

const std::string dataDir = GLNET_TOKENIZER_DATA;

nlohmann::json readJson(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in);
  return nlohmann::json::parse(in);
}

// The error fromJson gives for the GPT-2-style file changed by `edit`.
std::string refusal(const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json file = readJson(dataDir + "/tokenizer.json");
  edit(file);
  try {
    ByteLevelBpe::fromJson(file.dump(), "t.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::vector<std::uint32_t> ids(std::initializer_list<std::uint32_t> list) { return list; }

}  // namespace

TEST_CASE("byte-level BPE: GPT-2 and Llama 3 style files give the reference encoder's ids, and decode gives the text back") {
  const nlohmann::json expected = readJson(dataDir + "/expected.json");
  REQUIRE(expected.size() == 4);
  for (const auto& [file, cases] : expected.items()) {
    const ByteLevelBpe tokenizer = ByteLevelBpe::fromFile(dataDir + "/" + file);
    for (const auto& item : cases) {
      const std::string text = item["text"];
      CAPTURE(file);
      CAPTURE(text);
      const auto plain = item["ids_plain"].get<std::vector<std::uint32_t>>();
      CHECK(tokenizer.encode(text) == item["ids"].get<std::vector<std::uint32_t>>());
      CHECK(tokenizer.encode(text, false) == plain);
      // Byte-level BPE loses nothing: special tokens written in the text decode to their content. (With
      // add_prefix_space, each stretch between added tokens gains a space, as in Hugging Face; NFC composes.)
      if (file != "tokenizer-prefix.json" && file != "nfc-tokenizer.json") CHECK(tokenizer.decode(plain) == text);
    }
  }
}

TEST_CASE("byte-level BPE: Llama 3 style template, ignore_merges, specials and the vocabulary's queries") {
  const ByteLevelBpe llama = ByteLevelBpe::fromFile(dataDir + "/llama3-tokenizer.json");
  const std::uint32_t bos = llama.tokenId("<|begin_of_text|>").value();
  const std::uint32_t eot = llama.tokenId("<|eot_id|>").value();
  CHECK(llama.isSpecial(bos));
  CHECK(!llama.isSpecial(llama.tokenId("Ġthe").value()));
  CHECK(llama.vocabularySize() == eot + 1);
  CHECK(llama.encode("").size() == 1);
  CHECK(llama.encode("")[0] == bos);
  CHECK(llama.encode("", false).empty());
  // " quokka" is a whole word of the vocabulary that no merge makes: ignore_merges gives it as one token.
  CHECK(llama.encode(" quokka", false) == ids({llama.tokenId("Ġquokka").value()}));
  CHECK(llama.tokenText(llama.tokenId("Ġquokka").value()) == " quokka");
  CHECK(llama.tokenText(bos) == "<|begin_of_text|>");
  CHECK(llama.decode(llama.encode("Hi<|eot_id|> there")) == "<|begin_of_text|>Hi<|eot_id|> there");
  CHECK(llama.decode(llama.encode("Hi<|eot_id|> there"), true) == "Hi there");
  CHECK(!llama.tokenId("<|no such token|>"));
  CHECK_THROWS_WITH_AS(llama.decode({llama.vocabularySize()}), doctest::Contains("is not in the vocabulary"), Error);
  CHECK_THROWS_AS(llama.tokenText(llama.vocabularySize() + 5), Error);

  const ByteLevelBpe prefixed = ByteLevelBpe::fromFile(dataDir + "/tokenizer-prefix.json");
  CHECK(prefixed.decode(prefixed.encode("Hello<|endoftext|>world")) == " Hello<|endoftext|> world");
  CHECK(prefixed.decode(prefixed.encode(" Hello")) == " Hello");
  const ByteLevelBpe nfc = ByteLevelBpe::fromFile(dataDir + "/nfc-tokenizer.json");
  CHECK(nfc.decode(nfc.encode("e\u0301 \u212b")) == "\u00e9 \u00c5");
  CHECK(nfc.encode("x cafe\u0301") == nfc.encode("x caf\u00e9"));
  const ByteLevelBpe gpt2 = ByteLevelBpe::fromFile(dataDir + "/tokenizer.json");
  CHECK(gpt2.decode(gpt2.encode("e\u0301")) == "e\u0301");
  CHECK(gpt2.encode("x<|endoftext|>", true) == gpt2.encode("x<|endoftext|>", false));  // ByteLevel post-processor adds nothing
  CHECK(!gpt2.isSpecial(gpt2.tokenId("[[note]]").value()));
  CHECK(gpt2.decode(gpt2.encode("a<|user|>[[note]]b"), true) == "a[[note]]b");
}

TEST_CASE("byte-level BPE: invalid UTF-8 is refused in one line; torn bytes from tokens decode to U+FFFD as Hugging Face") {
  const ByteLevelBpe tokenizer = ByteLevelBpe::fromFile(dataDir + "/tokenizer.json");
  for (const std::string& bad : {std::string("\xC3\x28"), std::string("ok \xC0\xAF"), std::string("\xED\xA0\x80"),
                                std::string("abc\xE4\xB8"), std::string("\xF4\x90\x80\x80"), std::string("\xFF")}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(tokenizer.encode(bad), doctest::Contains("is not valid UTF-8 (at byte"), Error);
  }
  CHECK_THROWS_WITH_AS(tokenizer.encode("ok \xC0\xAF"), "the text to encode is not valid UTF-8 (at byte 3)", Error);
  CHECK(tokenizer.encode(std::string("a\0b", 3), false).size() == 3);
  // Ids 0..255 are the single bytes in this file (make_tokenizer.py).
  REQUIRE(tokenizer.tokenText(0xE4) == "\xE4");
  CHECK(tokenizer.decode({0xE4, 'a'}) == "\xEF\xBF\xBD" "a");
  CHECK(tokenizer.decode({0xF0, 0x9F, 'a'}) == "\xEF\xBF\xBD" "a");  // one maximal invalid subsequence, one U+FFFD
  CHECK(tokenizer.decode({0xFF, 0xC0, 0x80}) == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  CHECK(tokenizer.decode({0xED, 0xA0, 0x80}) == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate is three
}

TEST_CASE("byte-level BPE: TextStream holds a character split across tokens until its last byte, and flushes a torn tail") {
  const ByteLevelBpe tokenizer = ByteLevelBpe::fromFile(dataDir + "/tokenizer.json");
  TextStream stream(tokenizer);
  CHECK(stream.push('a') == "a");
  CHECK(stream.push(0xF0) == "");
  CHECK(stream.push(0x9F) == "");
  CHECK(stream.push(0x98) == "");
  CHECK(stream.push(0x80) == "\xF0\x9F\x98\x80");  // 😀
  CHECK(stream.push(0xFF) == "\xEF\xBF\xBD");      // never valid: replaced at once
  CHECK(stream.push(0xE4) == "");
  CHECK(stream.finish() == "\xEF\xBF\xBD");
  CHECK(stream.finish() == "");

  // Token by token, the pieces join to decode() of the whole, specials skipped or not.
  const std::string text = "emoji 😀👍🏽 family 👨‍👩‍👧 中文 e\u0301<|endoftext|>end";
  const std::vector<std::uint32_t> all = tokenizer.encode(text);
  for (const bool skip : {false, true}) {
    TextStream pieces(tokenizer, skip);
    std::string joined;
    bool held = false;
    for (const std::uint32_t id : all) {
      const std::string piece = pieces.push(id);
      held = held || (piece.empty() && !tokenizer.tokenText(id).empty());
      joined += piece;
    }
    joined += pieces.finish();
    CHECK(joined == tokenizer.decode(all, skip));
    CHECK(held);  // some character did span tokens
  }
  CHECK_THROWS_AS(stream.push(tokenizer.vocabularySize()), Error);
}

TEST_CASE("byte-level BPE: long prompts, whitespace runs and long words encode in milliseconds") {
  const ByteLevelBpe tokenizer = ByteLevelBpe::fromFile(dataDir + "/llama3-tokenizer.json");
  std::string prompt;
  while (prompt.size() < 10000) prompt += "The quick brown fox, 1234 jumps; 中文 😀\n\t  ";
  const std::string spaces(100000, ' ');
  const std::string word(20000, 'q');
  Stopwatch clock;
  const auto promptIds = tokenizer.encode(prompt, false);
  const auto spaceIds = tokenizer.encode(spaces, false);
  const auto wordIds = tokenizer.encode(word, false);
  const double seconds = clock.seconds();
  CHECK(tokenizer.decode(promptIds) == prompt);
  CHECK(tokenizer.decode(spaceIds) == spaces);
  CHECK(tokenizer.decode(wordIds) == word);
  CHECK(seconds < 1.0);
}

TEST_CASE("byte-level BPE: a tokenizer.json outside what is implemented is refused in one line naming the field") {
  CHECK_THROWS_AS(ByteLevelBpe::fromFile(dataDir + "/no-such-tokenizer.json"), FileNotFound);
  CHECK_THROWS_WITH_AS(ByteLevelBpe::fromJson("{\"model\": ", "t.json"), doctest::Contains("t.json is not valid JSON"), Error);
  CHECK(refusal([](auto& f) { f.erase("model"); }) == "t.json: model is missing");
  CHECK(refusal([](auto& f) { f["model"]["type"] = "WordPiece"; }) == "t.json: model.type 'WordPiece' is not supported (only BPE)");
  CHECK(refusal([](auto& f) { f["normalizer"] = {{"type", "NFKC"}}; }) == "t.json: normalizer of type 'NFKC' is not supported (only null or NFC)");
  CHECK(refusal([](auto& f) { f["truncation"] = {{"max_length", 8}}; }).find("t.json: truncation") == 0);
  CHECK(refusal([](auto& f) { f["pre_tokenizer"] = {{"type", "Metaspace"}}; }) ==
        "t.json: pre_tokenizer.type 'Metaspace' is not supported (byte-level BPE: ByteLevel, or a Sequence of Split and ByteLevel)");
  CHECK(refusal([](auto& f) { f["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {{{"type", "Split"}, {"pattern", {{"Regex", "\\s+"}}}, {"behavior", "Isolated"}}}}}; })
            .find("must be ByteLevel") != std::string::npos);
  CHECK(refusal([](auto& f) { f["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {{{"type", "Split"}, {"pattern", {{"Regex", "(["}}}, {"behavior", "Isolated"}}, f["pre_tokenizer"]}}}; })
            .find("t.json: pre_tokenizer.pretokenizers[0].pattern.Regex: the regular expression does not compile") == 0);
  CHECK(refusal([](auto& f) { f["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {{{"type", "Split"}, {"pattern", {{"Regex", " "}}}, {"behavior", "Removed"}}, f["pre_tokenizer"]}}}; }) ==
        "t.json: pre_tokenizer.pretokenizers[0].behavior 'Removed' is not supported (only Isolated)");
  CHECK(refusal([](auto& f) { f["model"]["vocab"]["Ġ"] = "3"; }) == "t.json: model.vocab['\\xc4\\xa0'] is a JSON string, not a token id from 0 to 4194303");
  CHECK(refusal([](auto& f) { f["model"]["vocab"]["Ġ"] = 1u << 30; }).find("not a token id from 0 to 4194303") != std::string::npos);
  CHECK(refusal([](auto& f) { f["model"]["vocab"]["zz"] = 0; }) == "t.json: model.vocab gives id 0 to two tokens");
  CHECK(refusal([](auto& f) { f["model"]["merges"].push_back("Ġ nosuchtoken"); }).find("names a token that is not in model.vocab") != std::string::npos);
  CHECK(refusal([](auto& f) { f["model"]["merges"].push_back("a  b"); }).find("is not two tokens separated by one space") != std::string::npos);
  CHECK(refusal([](auto& f) { f["model"]["merges"].push_back("Ġ Ġ"); f["model"]["merges"].push_back("q q"); }).find("makes a token that is not in model.vocab") != std::string::npos);
  CHECK(refusal([](auto& f) { f["model"]["merges"][0] = 7; }).find("t.json: model.merges[0] is 7, not \"a b\"") == 0);
  CHECK(refusal([](auto& f) { f["model"]["byte_fallback"] = true; }).find("t.json: model.byte_fallback true is not supported") == 0);
  CHECK(refusal([](auto& f) { f["model"]["dropout"] = 0.1; }).find("t.json: model.dropout 0.1 is not supported") == 0);
  CHECK(refusal([](auto& f) { f["added_tokens"][0]["lstrip"] = true; }) == "t.json: added_tokens[0].lstrip true is not supported (only false)");
  CHECK(refusal([](auto& f) { f["added_tokens"][0].erase("id"); }) == "t.json: added_tokens[0].id is a JSON null, not a token id from 0 to 4194303");
  CHECK(refusal([](auto& f) { f["added_tokens"][1]["id"] = 3; }) ==
        "t.json: added_tokens[1].id is 3, but Hugging Face gives this token id 557 (an added token keeps its id in model.vocab, or continues the ids after the vocabulary)");
  CHECK(refusal([](auto& f) { f["added_tokens"][0]["content"] = "Ġ"; }).find("t.json: added_tokens[0].id is 556, but Hugging Face gives this token id 32 ") == 0);
  CHECK(refusal([](auto& f) { f["decoder"] = nullptr; }) == "t.json: decoder is a JSON null, not an object");
  CHECK(refusal([](auto& f) { f["decoder"]["type"] = "WordPiece"; }) == "t.json: decoder.type 'WordPiece' is not supported (only ByteLevel)");
  CHECK(refusal([](auto& f) { f["post_processor"] = {{"type", "BertProcessing"}}; }).find("t.json: post_processor.type 'BertProcessing' is not supported") == 0);
  CHECK(refusal([](auto& f) {
          f["post_processor"] = {{"type", "TemplateProcessing"}, {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}}}, {"special_tokens", nlohmann::json::object()}};
        }) == "t.json: post_processor.single[0].SpecialToken.id '<s>' is not in post_processor.special_tokens");
  // Only the bytes of an untrusted name reach the message, escaped.
  CHECK(refusal([](auto& f) { f["model"]["type"] = "\x1b[31mred"; }) == "t.json: model.type '\\x1b[31mred' is not supported (only BPE)");
  // A vocabulary without a byte's token cannot encode that byte: refused at encode time, not dropped.
  nlohmann::json file = readJson(dataDir + "/tokenizer.json");
  file["model"]["vocab"]["<unused>"] = file["model"]["vocab"]["Ã"];  // byte 0xC3's id, which é needs, for another token
  file["model"]["vocab"].erase("Ã");
  file["model"]["merges"] = nlohmann::json::array();
  const ByteLevelBpe partial = ByteLevelBpe::fromJson(file.dump(), "t.json");
  CHECK_THROWS_WITH_AS(partial.encode("café"), "t.json: the text has byte 0xC3, which no token of model.vocab stands for, and model.unk_token is null", Error);
}
