// JSON from outside the process (request bodies, file headers), parsed so that no input can crash the
// parser's users or leak into a message: nesting depth is bounded while parsing, duplicate keys are refused
// (a later value silently replacing an earlier one hides a broken writer), and every error names a byte
// offset instead of quoting input bytes, which need not even be UTF-8.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace glnet {

constexpr int defaultJsonDepth = 32;

// Throws glnet::Error "`what` is not valid JSON (...)" naming the problem and its byte offset.
nlohmann::json parseUntrustedJson(std::string_view text, const std::string& what, int maxDepth = defaultJsonDepth);

// A short description of a value for an error message: numbers as written, everything else by its type, so
// that no untrusted string, however long or malformed, is echoed.
std::string describeJsonValue(const nlohmann::json& value);

}  // namespace glnet
