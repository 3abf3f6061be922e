// tokenizer.json files as glnet_info --tokenizer and the text commands read them: JSON structure, every field the
// byte-level BPE reader checks, regex patterns PCRE2 must compile; a file that loads then encodes and decodes a text
// with special tokens in it, and streams the ids back.
#include "FuzzInput.h"
#include "text/ByteLevelBpe.h"
#include "base/check.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const glnet::ByteLevelBpe tokenizer = glnet::ByteLevelBpe::fromFile(glnet::fuzz::inputFile(data, size, ".json"));
    const auto ids = tokenizer.encode("Hi <|endoftext|> there's 123 中文 😀\n\n  end");
    glnet::TextStream stream(tokenizer, true);
    for (const std::uint32_t id : ids) stream.push(id);
    stream.finish();
    tokenizer.decode(ids);
  } catch (const glnet::Error&) {
  }
  return 0;
}
