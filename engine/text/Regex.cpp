#include "text/Regex.h"

#include "base/check.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace glnet {

namespace {

// Oniguruma's \s (what Hugging Face's library runs) is PCRE2's Unicode \s plus U+0085 (NEL): the one difference
// between the two engines that tokenizers' patterns meet, made up by adding NEL wherever \s or \S stands.
std::string withOnigurumaSpace(const std::string& pattern) {
  std::string out;
  bool inClass = false;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[++i];
      if (next == 's') {
        out += inClass ? "\\s\\x{85}" : "[\\s\\x{85}]";
      } else if (next == 'S' && !inClass) {
        out += "[^\\s\\x{85}]";
      } else {
        out += c;
        out += next;
      }
      continue;
    }
    if (!inClass && c == '[') {
      inClass = true;
      out += c;
      // A ']' first in a class (after an optional '^') is a literal, not its end.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (inClass && c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {
      const std::size_t end = pattern.find(":]", i + 2);
      if (end != std::string::npos) {
        out.append(pattern, i, end + 2 - i);
        i = end + 1;
        continue;
      }
    }
    if (inClass && c == ']') inClass = false;
    out += c;
  }
  return out;
}

std::string pcre2Message(int code) {
  PCRE2_UCHAR buffer[256];
  return pcre2_get_error_message(code, buffer, sizeof buffer) < 0 ? "error " + std::to_string(code)
                                                                   : std::string(reinterpret_cast<const char*>(buffer));
}

}  // namespace

struct Regex::Compiled {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Compiled() { pcre2_code_free(code); }
};

Regex::Regex(const std::string& pattern, const std::string& what) : compiled_(std::make_unique<Compiled>()) {
  const std::string translated = withOnigurumaSpace(pattern);
  int error = 0;
  PCRE2_SIZE offset = 0;
  compiled_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                                  PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (!compiled_->code) {
    throw Error(what + ": the regular expression does not compile (" + pcre2Message(error) + ")");
  }
  // No JIT (a platform without it, or one that forbids executable memory) only costs speed.
  compiled_->jit = pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() = default;
Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;

std::vector<std::pair<std::size_t, std::size_t>> Regex::findAll(std::string_view text) const {
  struct State {
    pcre2_match_data* data = nullptr;
    pcre2_match_context* context = nullptr;
    pcre2_jit_stack* stack = nullptr;
    ~State() {
      pcre2_match_data_free(data);
      pcre2_match_context_free(context);
      pcre2_jit_stack_free(stack);
    }
  } state;
  state.data = pcre2_match_data_create_from_pattern(compiled_->code, nullptr);
  state.context = pcre2_match_context_create(nullptr);
  if (!state.data || !state.context) throw Error("out of memory for a regular expression match");
  if (compiled_->jit) {
    // The default 32 KiB JIT stack runs out on long runs of one class (a 10 000-space prompt); 8 MiB does not.
    state.stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
    if (state.stack) pcre2_jit_stack_assign(state.context, nullptr, state.stack);
  }
  std::vector<std::pair<std::size_t, std::size_t>> matches;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::size_t start = 0;
  while (start < text.size()) {
    const int rc = pcre2_match(compiled_->code, subject, text.size(), start, PCRE2_NO_UTF_CHECK | PCRE2_NOTEMPTY,
                               state.data, state.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) throw Error("the pre-tokenizer's regular expression failed on this text (" + pcre2Message(rc) + ")");
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.data);
    matches.emplace_back(ovector[0], ovector[1]);
    start = ovector[1];
  }
  return matches;
}

}  // namespace glnet
