#include "base/check.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace glnet {
namespace {

std::atomic<OptionSpelling> spelling{OptionSpelling::flags};

}  // namespace

void setOptionSpelling(OptionSpelling chosen) { spelling = chosen; }

OptionSpelling optionSpelling() { return spelling; }

std::string optionName(const std::string& option) {
  if (spelling == OptionSpelling::flags) return "--" + option;
  std::string keyword = option;
  std::replace(keyword.begin(), keyword.end(), '-', '_');
  return keyword;
}

std::string optionSetting(const std::string& option, const std::string& value) {
  if (spelling == OptionSpelling::flags) return optionName(option) + " " + value;
  // A number as Python writes it, anything else as a string literal.
  char* end = nullptr;
  const bool number = !value.empty() && (std::strtod(value.c_str(), &end), *end == '\0');
  return optionName(option) + "=" + (number ? value : "\"" + value + "\"");
}

void assertFailed(const char* condition, const std::string& message, const char* file, int line) {
  std::fprintf(stderr, "%s:%d: internal error: %s (%s)\n", file, line, message.c_str(), condition);
  std::abort();
}

std::string printable(const std::string& bytes) {
  std::string text;
  for (const char c : bytes) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      text += c;
    } else {
      char escaped[5];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", static_cast<unsigned char>(c));
      text += escaped;
    }
  }
  return text;
}

}  // namespace glnet
