// Byte-level BPE tokenizers read from Hugging Face's tokenizer.json, as GPT-2, Llama 3, Qwen2 and SmolLM ship
// them, giving the ids Hugging Face's `tokenizers` gives. What a file may hold (anything else is refused in one
// line naming the field and its value):
//   normalizer      null
//   pre_tokenizer   ByteLevel (add_prefix_space, use_regex: GPT-2's pattern), or a Sequence of Split (a Regex or
//                   String pattern, behavior Isolated, invert false; Llama 3, Qwen2) or Digits (SmolLM) steps ending
//                   in ByteLevel
//   model           BPE: vocab, merges ("a b" strings or [a, b] pairs), ignore_merges, unk_token; no dropout,
//                   no byte_fallback, no subword prefix or suffix
//   added_tokens    matched in the text before pre-tokenization, leftmost-longest (lstrip, rstrip and
//                   single_word false)
//   post_processor  null, ByteLevel, TemplateProcessing (its `single` template) or a Sequence of those
//   decoder         ByteLevel
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace glnet {

class ByteLevelBpe {
 public:
  // Throws glnet::FileNotFound when `path` does not exist, glnet::Error naming the file and field otherwise.
  static ByteLevelBpe fromFile(const std::string& path);
  // The same from the file's text; `name` is what messages call it.
  static ByteLevelBpe fromJson(std::string_view json, const std::string& name);

  ByteLevelBpe(ByteLevelBpe&&) noexcept;
  ByteLevelBpe& operator=(ByteLevelBpe&&) noexcept;
  ~ByteLevelBpe();

  // With addSpecialTokens the post-processor's template applies (Hugging Face's default). Special tokens written
  // in the text become their ids either way, as in Hugging Face. Throws glnet::Error when `text` is not UTF-8.
  std::vector<std::uint32_t> encode(std::string_view text, bool addSpecialTokens = true) const;
  // The tokens' bytes joined, invalid UTF-8 in them replaced by U+FFFD as Hugging Face does. An id that is no token
  // adds nothing, as in Hugging Face: a model's vocabulary may be larger than its tokenizer's (Llama 3's reserved ids,
  // a model padded to a multiple of 64), and a sampled one must not end a generation.
  std::string decode(const std::vector<std::uint32_t>& ids, bool skipSpecialTokens = false) const;
  // The largest id over the vocabulary and the added tokens, plus one.
  std::uint32_t vocabularySize() const;
  // The id of a token as tokenizer.json writes it: a vocabulary key (byte-level characters, "Ġthe") or an added
  // token's content ("<|endoftext|>").
  std::optional<std::uint32_t> tokenId(std::string_view token) const;
  // The bytes a token stands for (an added token: its content); throws glnet::Error on an id that is no token.
  std::string tokenText(std::uint32_t id) const;
  bool isSpecial(std::uint32_t id) const;

 private:
  friend class TextStream;
  struct State;
  explicit ByteLevelBpe(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// Incremental decoding for streaming: ids in one by one, out the text that is complete UTF-8 so far (a character
// split across tokens is held until its last byte comes); finish() gives the rest (U+FFFD for a torn tail). The
// pieces joined equal decode() of all the ids. The tokenizer must outlive the stream.
class TextStream {
 public:
  explicit TextStream(const ByteLevelBpe& tokenizer, bool skipSpecialTokens = false);
  std::string push(std::uint32_t id);
  std::string finish();

 private:
  const ByteLevelBpe* tokenizer_;
  bool skipSpecialTokens_;
  std::string pending_;
};

}  // namespace glnet
