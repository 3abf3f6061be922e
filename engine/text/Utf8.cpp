#include "text/Utf8.h"

#include "base/check.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>

namespace glnet {

namespace {

// How the sequence at bytes[i] goes: `valid` of its bytes are a correct start (lead byte and the continuations that
// fit), out of `length` it needs. valid == length: one whole character; valid < length: an invalid (or, at the end of
// the input, unfinished) subsequence of `valid` bytes, at least 1. The ranges are Unicode's Table 3-7.
struct Sequence {
  std::size_t valid;
  std::size_t length;
};

Sequence sequenceAt(std::string_view bytes, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(bytes[k]); };
  const unsigned char lead = byte(i);
  if (lead < 0x80) return {1, 1};
  std::size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;  // the range of the second byte; later ones are always 80..BF
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return {1, 2};  // a continuation byte or C0, C1, F5..FF: never valid anywhere
  }
  std::size_t valid = 1;
  for (; valid < length && i + valid < bytes.size(); ++valid) {
    const unsigned char b = byte(i + valid);
    const bool fits = valid == 1 ? (b >= low && b <= high) : (b >= 0x80 && b <= 0xBF);
    if (!fits) break;
  }
  return {valid, length};
}

}  // namespace

std::size_t firstInvalidUtf8(std::string_view bytes) {
  for (std::size_t i = 0; i < bytes.size();) {
    const Sequence s = sequenceAt(bytes, i);
    if (s.valid < s.length) return i;
    i += s.length;
  }
  return std::string_view::npos;
}

void appendLossyUtf8(std::string& out, std::string_view bytes) {
  out.reserve(out.size() + bytes.size());
  for (std::size_t i = 0; i < bytes.size();) {
    const Sequence s = sequenceAt(bytes, i);
    if (s.valid == s.length) {
      out.append(bytes.substr(i, s.length));
    } else {
      out.append("\xEF\xBF\xBD");
    }
    i += s.valid;
  }
}

std::size_t completeUtf8Prefix(std::string_view bytes) {
  // A held tail is at most 3 bytes: look for the lead byte of an unfinished sequence among them.
  const std::size_t from = bytes.size() > 3 ? bytes.size() - 3 : 0;
  for (std::size_t i = from; i < bytes.size(); ++i) {
    const unsigned char b = static_cast<unsigned char>(bytes[i]);
    if (b < 0xC2 || b > 0xF4) continue;  // not a lead byte: nothing to wait for
    const Sequence s = sequenceAt(bytes, i);
    if (s.valid < s.length && i + s.valid == bytes.size()) return i;
  }
  return bytes.size();
}

std::string normalizeNfc(std::string_view text) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(status);
  if (U_FAILURE(status)) throw Error(std::string("Unicode normalization (ICU) is unavailable: ") + u_errorName(status));
  const icu::StringPiece piece(text.data(), static_cast<std::int32_t>(text.size()));
  if (nfc->isNormalizedUTF8(piece, status) && U_SUCCESS(status)) return std::string(text);
  status = U_ZERO_ERROR;
  std::string normalized;
  icu::StringByteSink<std::string> sink(&normalized, static_cast<std::int32_t>(text.size()));
  nfc->normalizeUTF8(0, piece, sink, nullptr, status);
  if (U_FAILURE(status)) throw Error(std::string("Unicode normalization (ICU) failed: ") + u_errorName(status));
  return normalized;
}

}  // namespace glnet
