// UTF-8 as tokenizers need it: text handed to encode must be valid (checked, the first bad byte's offset named),
// and bytes coming back from tokens need not be (a character split across tokens, a model emitting a torn
// sequence), so they are decoded lossily as Hugging Face does (Rust's String::from_utf8_lossy: each maximal
// invalid subsequence becomes one U+FFFD).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace glnet {

// The offset of the first byte that is not part of a valid UTF-8 sequence (overlong forms, surrogates and code
// points past U+10FFFF included), or std::string_view::npos when all of `bytes` is valid.
std::size_t firstInvalidUtf8(std::string_view bytes);

// Appends `bytes` to `out` with every maximal invalid subsequence replaced by U+FFFD (EF BF BD).
void appendLossyUtf8(std::string& out, std::string_view bytes);

// The length of `bytes` without a trailing sequence that is valid so far but incomplete (a character whose
// remaining bytes may still come): what a stream can emit now without changing the lossy result later.
std::size_t completeUtf8Prefix(std::string_view bytes);

// `text` (valid UTF-8) in Unicode Normalization Form C, through ICU: what a tokenizer.json normalizer NFC (Qwen2's) does.
std::string normalizeNfc(std::string_view text);

}  // namespace glnet
