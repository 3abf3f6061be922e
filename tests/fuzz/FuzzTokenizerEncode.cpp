// Arbitrary bytes encoded by the GPT-2 and Llama 3 style tokenizers of tests/data/tokenizer: text that is not UTF-8
// must be refused with glnet::Error; any other text must decode back to itself exactly, whole and streamed token by
// token (a difference is thrown as std::logic_error, which the harness reports as a finding).
#include "text/ByteLevelBpe.h"
#include "base/check.h"

#include <stdexcept>
#include <string>

namespace {

void roundTrip(const glnet::ByteLevelBpe& tokenizer, const std::string& text) {
  std::vector<std::uint32_t> ids;
  try {
    ids = tokenizer.encode(text, false);
  } catch (const glnet::Error&) {
    return;  // not UTF-8: refused, as it must be
  }
  if (tokenizer.decode(ids) != text) throw std::logic_error("decode(encode(text)) differs from the text");
  glnet::TextStream stream(tokenizer);
  std::string streamed;
  for (const std::uint32_t id : ids) streamed += stream.push(id);
  streamed += stream.finish();
  if (streamed != text) throw std::logic_error("the streamed decoding differs from the text");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const glnet::ByteLevelBpe gpt2 = glnet::ByteLevelBpe::fromFile(GLNET_TOKENIZER_DATA "/tokenizer.json");
  static const glnet::ByteLevelBpe llama = glnet::ByteLevelBpe::fromFile(GLNET_TOKENIZER_DATA "/llama3-tokenizer.json");
  const std::string text(reinterpret_cast<const char*>(data), size);
  roundTrip(gpt2, text);
  roundTrip(llama, text);
  return 0;
}
