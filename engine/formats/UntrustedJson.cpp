#include "formats/UntrustedJson.h"

#include "base/check.h"

#include <algorithm>
#include <set>
#include <vector>

namespace glnet {
namespace {

// Thrown from the parser callback, which nlohmann lets through; carries what the callback refused.
struct Refusal {
  std::string reason;
};

// A key as it can be shown: printable ASCII of modest length only.
std::string quoteKey(const std::string& key) {
  const bool printable = key.size() <= 64 && std::all_of(key.begin(), key.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
  return printable ? "\"" + key + "\"" : "a key of " + std::to_string(key.size()) + " bytes";
}

}  // namespace

nlohmann::json parseUntrustedJson(std::string_view text, const std::string& what, int maxDepth) {
  std::vector<std::set<std::string>> keys;  // of every object being parsed, innermost last
  const auto check = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start || event == Event::array_start) {
      if (depth >= maxDepth) throw Refusal{"nested deeper than " + std::to_string(maxDepth) + " levels"};
      if (event == Event::object_start) keys.emplace_back();
    } else if (event == Event::object_end) {
      keys.pop_back();
    } else if (event == Event::key) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!keys.back().insert(key).second) throw Refusal{quoteKey(key) + " appears twice in one object"};
    }
    return true;
  };
  // nlohmann's lexer takes a NUL byte for the end of the input, so that JSON, a NUL and anything at all would parse;
  // a raw NUL is nowhere valid JSON (strings escape it).
  if (const std::size_t nul = text.find('\0'); nul != std::string_view::npos) {
    throw Error(what + " is not valid JSON (a NUL byte at byte " + std::to_string(nul) + ")");
  }
  try {
    return nlohmann::json::parse(text.begin(), text.end(), check);
  } catch (const Refusal& refusal) {
    throw Error(what + " is not accepted: " + refusal.reason);
  } catch (const nlohmann::json::parse_error& error) {
    throw Error(what + " is not valid JSON (syntax error at byte " + std::to_string(error.byte) + ")");
  } catch (const nlohmann::json::exception&) {
    throw Error(what + " is not valid JSON");
  }
}

std::string describeJsonValue(const nlohmann::json& value) {
  if (value.is_number()) return value.dump();
  return std::string("a JSON ") + value.type_name();
}

}  // namespace glnet
