// A pre-tokenizer's regular expression as tokenizer.json writes it (Oniguruma syntax in Hugging Face's library,
// \p{L}, \p{N}, (?i:...), lookahead), run by PCRE2 in UTF and Unicode-property mode, JIT-compiled where PCRE2 can.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace glnet {

class Regex {
 public:
  // Throws glnet::Error "`what`: ... at offset N" when PCRE2 refuses the pattern.
  Regex(const std::string& pattern, const std::string& what);
  ~Regex();
  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;

  // The [begin, end) byte ranges of the successive non-overlapping, non-empty matches in `text`, which must be
  // valid UTF-8 (the caller checked it). Thread-safe: each call has its own match state.
  std::vector<std::pair<std::size_t, std::size_t>> findAll(std::string_view text) const;

 private:
  struct Compiled;
  std::unique_ptr<Compiled> compiled_;
};

}  // namespace glnet
