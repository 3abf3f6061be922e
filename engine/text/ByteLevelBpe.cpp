#include "text/ByteLevelBpe.h"

#include "base/FileInput.h"
#include "base/check.h"
#include "formats/UntrustedJson.h"
#include "text/Regex.h"
#include "text/Utf8.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <deque>
#include <mutex>
#include <queue>
#include <unordered_map>

namespace glnet {

namespace {

using Json = nlohmann::json;

// Llama 3's tokenizer.json is 9 MB, Gemma's 34 MB: room for larger vocabularies, not for a runaway file.
constexpr std::uint64_t largestFileBytes = std::uint64_t{256} << 20;
// Ids index a table; a hostile id must not make it gigabytes. Real vocabularies stay under 300 000.
constexpr std::uint64_t largestId = (std::uint64_t{1} << 22) - 1;
// Hugging Face's ByteLevel pre-tokenizer pattern (GPT-2's), used when its use_regex is true.
const char* const gpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// Words longer than this are encoded each time rather than cached (a run of 10 000 spaces is not worth keeping).
constexpr std::size_t longestCachedWord = 256;
constexpr std::size_t cacheEntries = 65536;

// GPT-2's bytes_to_unicode: each byte as one printable character, the printable Latin-1 ones as themselves and the
// rest (controls, space, the 0x7F..0xA0 range, the soft hyphen) as U+0100 upwards in byte order.
std::array<char32_t, 256> byteCharacters() {
  std::array<char32_t, 256> characters{};
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    characters[static_cast<std::size_t>(b)] = printable ? static_cast<char32_t>(b) : next++;
  }
  return characters;
}

// A vocabulary key in byte-level characters as the bytes it stands for. Like Hugging Face's ByteLevel decoder, a
// key with any character outside the 256 (an added word written plainly) stands for its own UTF-8 bytes; `mapped`
// says which it was.
std::string keyBytes(const std::string& key, bool* mapped) {
  static const std::unordered_map<char32_t, unsigned char> byteOf = [] {
    std::unordered_map<char32_t, unsigned char> table;
    const auto characters = byteCharacters();
    for (int b = 0; b < 256; ++b) table[characters[static_cast<std::size_t>(b)]] = static_cast<unsigned char>(b);
    return table;
  }();
  std::string bytes;
  for (std::size_t i = 0; i < key.size();) {
    // Keys come from a JSON string and so are valid UTF-8: decode one character.
    const auto lead = static_cast<unsigned char>(key[i]);
    const std::size_t length = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    char32_t c = length == 1 ? lead : lead & (0x7F >> length);
    for (std::size_t k = 1; k < length && i + k < key.size(); ++k) c = (c << 6) | (static_cast<unsigned char>(key[i + k]) & 0x3F);
    const auto found = byteOf.find(c);
    if (found == byteOf.end()) {
      *mapped = false;
      return key;
    }
    bytes += static_cast<char>(found->second);
    i += length;
  }
  *mapped = true;
  return bytes;
}

// A value from the file named in a message: short, with unprintable bytes escaped.
std::string shown(const Json& value) {
  if (value.is_boolean()) return value.get<bool>() ? "true" : "false";
  if (value.is_object() && value.contains("type") && value["type"].is_string()) return "of type " + shown(value["type"]);
  if (!value.is_string()) return describeJsonValue(value);
  const std::string& text = value.get_ref<const std::string&>();
  return "'" + printable(text.size() > 60 ? text.substr(0, 60) + "..." : text) + "'";
}

// Reading one file's fields, each failure naming the file and the field's path.
class Reader {
 public:
  explicit Reader(std::string name) : name_(std::move(name)) {}

  [[noreturn]] void fail(const std::string& path, const std::string& problem) const {
    throw Error(name_ + ": " + path + " " + problem);
  }
  [[noreturn]] void unsupported(const std::string& path, const Json& value, const std::string& supported) const {
    fail(path, shown(value) + " is not supported (" + supported + ")");
  }
  const Json& object(const Json& parent, const std::string& key, const std::string& path) const {
    const Json& value = member(parent, key, path);
    if (!value.is_object()) fail(path, "is " + describeJsonValue(value) + ", not an object");
    return value;
  }
  const Json& array(const Json& parent, const std::string& key, const std::string& path) const {
    const Json& value = member(parent, key, path);
    if (!value.is_array()) fail(path, "is " + describeJsonValue(value) + ", not an array");
    return value;
  }
  std::string string(const Json& value, const std::string& path) const {
    if (!value.is_string()) fail(path, "is " + describeJsonValue(value) + ", not a string");
    return value.get<std::string>();
  }
  std::string string(const Json& parent, const std::string& key, const std::string& path) const {
    return string(member(parent, key, path), path);
  }
  // A flag that may be missing (then `otherwise`) but not of another type.
  bool flag(const Json& parent, const std::string& key, const std::string& path, bool otherwise) const {
    const auto found = parent.find(key);
    if (found == parent.end() || found->is_null()) return otherwise;
    if (!found->is_boolean()) fail(path, "is " + describeJsonValue(*found) + ", not true or false");
    return found->get<bool>();
  }
  std::uint32_t id(const Json& value, const std::string& path) const {
    if (!value.is_number_unsigned() || value.get<std::uint64_t>() > largestId) {
      fail(path, "is " + describeJsonValue(value) + ", not a token id from 0 to " + std::to_string(largestId));
    }
    return static_cast<std::uint32_t>(value.get<std::uint64_t>());
  }
  // Fields that must be absent, null, or the one value this reader implements.
  void expect(const Json& parent, const std::string& key, const std::string& path, const Json& allowed,
              const std::string& why) const {
    const auto found = parent.find(key);
    if (found != parent.end() && !found->is_null() && *found != allowed) unsupported(path, *found, why);
  }

 private:
  const Json& member(const Json& parent, const std::string& key, const std::string& path) const {
    const auto found = parent.find(key);
    if (found == parent.end()) fail(path, "is missing");
    return *found;
  }
  std::string name_;
};

struct Merge {
  std::uint32_t rank;
  std::uint32_t id;
};

std::uint64_t pairKey(std::uint32_t left, std::uint32_t right) { return (std::uint64_t{left} << 32) | right; }

// One step of the pre-tokenizer: a split on a pattern (Split, or ByteLevel's own regex) and, for ByteLevel, the
// prefix space.
struct PreStep {
  std::unique_ptr<Regex> regex;  // null: no split
  std::string literal;           // Split with a String pattern
  bool addPrefixSpace = false;
};

struct AddedToken {
  std::string content;
  std::uint32_t id;
};

// A piece of the input: text still to pre-tokenize, or an added token found in it.
struct Segment {
  std::string_view text;
  std::optional<std::uint32_t> id;
};

// Splits each text segment on the tokens of `tokens`, leftmost-longest as Hugging Face's Aho-Corasick does.
std::vector<Segment> splitOnAdded(const std::vector<Segment>& segments, const std::vector<AddedToken>& tokens) {
  if (tokens.empty()) return segments;
  std::array<bool, 256> starts{};  // the bytes a token begins with: most positions are passed over at once
  for (const AddedToken& token : tokens) starts[static_cast<unsigned char>(token.content[0])] = true;
  std::vector<Segment> out;
  for (const Segment& segment : segments) {
    if (segment.id) {
      out.push_back(segment);
      continue;
    }
    const std::string_view text = segment.text;
    std::size_t pieceStart = 0;
    for (std::size_t i = 0; i < text.size();) {
      // `tokens` is sorted longest first: the first that fits here is the longest.
      const AddedToken* match = nullptr;
      if (!starts[static_cast<unsigned char>(text[i])]) {
        ++i;
        continue;
      }
      for (const AddedToken& token : tokens) {
        if (text.compare(i, token.content.size(), token.content) == 0) {
          match = &token;
          break;
        }
      }
      if (!match) {
        ++i;
        continue;
      }
      if (i > pieceStart) out.push_back({text.substr(pieceStart, i - pieceStart), std::nullopt});
      out.push_back({text.substr(i, match->content.size()), match->id});
      i += match->content.size();
      pieceStart = i;
    }
    if (pieceStart < text.size()) out.push_back({text.substr(pieceStart), std::nullopt});
  }
  return out;
}

// The pieces of `text` that `step` isolates: each match and each stretch between matches, none empty.
void splitIsolated(const PreStep& step, const std::string& text, std::vector<std::string>& out) {
  std::vector<std::pair<std::size_t, std::size_t>> matches;
  if (step.regex) {
    matches = step.regex->findAll(text);
  } else {
    for (std::size_t at = text.find(step.literal); at != std::string::npos; at = text.find(step.literal, at + step.literal.size())) {
      matches.emplace_back(at, at + step.literal.size());
    }
  }
  std::size_t done = 0;
  for (const auto& [begin, end] : matches) {
    if (begin > done) out.push_back(text.substr(done, begin - done));
    out.push_back(text.substr(begin, end - begin));
    done = end;
  }
  if (done < text.size()) out.push_back(text.substr(done));
}

}  // namespace

struct ByteLevelBpe::State {
  std::string name;
  // Indexed by id: what decode gives for each token, what tokenText gives, and whether the id is a token at all.
  std::vector<std::string> decoded;
  std::vector<std::string> text;
  std::vector<bool> present;
  std::vector<bool> special;
  std::unordered_map<std::string, std::uint32_t> idOfKey;    // vocabulary keys and added contents as written
  std::unordered_map<std::string, std::uint32_t> idOfBytes;  // vocabulary tokens by their bytes (ignore_merges)
  std::array<std::int64_t, 256> byteId{};                    // each single byte's token, -1 for none
  std::unordered_map<std::uint64_t, Merge> merges;
  bool ignoreMerges = false;
  bool nfc = false;  // the normalizer: NFC, or none
  std::optional<std::uint32_t> unknownId;
  std::vector<PreStep> preSteps;
  std::vector<AddedToken> addedRaw;         // matched on the input as given (normalized false)
  std::vector<AddedToken> addedNormalized;  // matched after normalization
  std::vector<std::uint32_t> prefix, suffix;  // the post-processor's template around the text
  std::uint32_t size = 0;

  mutable std::mutex cacheMutex;
  mutable std::unordered_map<std::string, std::vector<std::uint32_t>> cache;

  void encodeWord(const std::string& word, std::vector<std::uint32_t>& ids) const;
  const std::string& decodedOf(std::uint32_t id) const {
    if (id >= present.size() || !present[id]) {
      throw Error(name + ": token id " + std::to_string(id) + " is not in the vocabulary (ids below " + std::to_string(size) + " that it holds)");
    }
    return decoded[id];
  }
};

// Hugging Face's BPE::merge_word and Word::merge_all: each byte's token, then merges by rank, the lowest first and the
// leftmost among equals, through a heap whose stale entries (a symbol since merged away) are skipped.
void ByteLevelBpe::State::encodeWord(const std::string& word, std::vector<std::uint32_t>& ids) const {
  if (ignoreMerges) {
    const auto whole = idOfBytes.find(word);
    if (whole != idOfBytes.end()) {
      ids.push_back(whole->second);
      return;
    }
  }
  if (word.size() <= longestCachedWord) {
    std::lock_guard<std::mutex> lock(cacheMutex);
    const auto cached = cache.find(word);
    if (cached != cache.end()) {
      ids.insert(ids.end(), cached->second.begin(), cached->second.end());
      return;
    }
  }
  struct Symbol {
    std::uint32_t id;
    std::int64_t previous, next;
    bool alive;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  for (const char c : word) {
    const std::int64_t id = byteId[static_cast<unsigned char>(c)];
    if (id < 0 && !unknownId) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", static_cast<unsigned char>(c));
      throw Error(name + ": the text has byte " + hex + ", which no token of model.vocab stands for, and model.unk_token is null");
    }
    const auto index = static_cast<std::int64_t>(symbols.size());
    symbols.push_back({id < 0 ? *unknownId : static_cast<std::uint32_t>(id), index - 1, index + 1, true});
  }
  struct Candidate {
    std::uint32_t rank;
    std::size_t position;
    std::uint32_t id;
    bool operator>(const Candidate& other) const {
      return rank != other.rank ? rank > other.rank : position > other.position;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  const auto offer = [&](std::size_t position) {
    const std::int64_t next = symbols[position].next;
    if (next >= static_cast<std::int64_t>(symbols.size())) return;
    const auto merge = merges.find(pairKey(symbols[position].id, symbols[static_cast<std::size_t>(next)].id));
    if (merge != merges.end()) queue.push({merge->second.rank, position, merge->second.id});
  };
  for (std::size_t i = 0; i + 1 < symbols.size(); ++i) offer(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.position];
    if (!left.alive || left.next >= static_cast<std::int64_t>(symbols.size())) continue;
    Symbol& right = symbols[static_cast<std::size_t>(left.next)];
    const auto merge = merges.find(pairKey(left.id, right.id));
    if (merge == merges.end() || merge->second.id != top.id) continue;  // stale: a neighbour changed since
    left.id = top.id;
    left.next = right.next;
    right.alive = false;
    if (right.next < static_cast<std::int64_t>(symbols.size())) symbols[static_cast<std::size_t>(right.next)].previous = static_cast<std::int64_t>(top.position);
    if (left.previous >= 0) offer(static_cast<std::size_t>(left.previous));
    offer(top.position);
  }
  const std::size_t first = ids.size();
  for (const Symbol& symbol : symbols) {
    if (symbol.alive) ids.push_back(symbol.id);
  }
  if (word.size() <= longestCachedWord) {
    std::lock_guard<std::mutex> lock(cacheMutex);
    if (cache.size() >= cacheEntries) cache.clear();
    cache.emplace(word, std::vector<std::uint32_t>(ids.begin() + static_cast<std::ptrdiff_t>(first), ids.end()));
  }
}

ByteLevelBpe::ByteLevelBpe(std::unique_ptr<State> state) : state_(std::move(state)) {}
ByteLevelBpe::ByteLevelBpe(ByteLevelBpe&&) noexcept = default;
ByteLevelBpe& ByteLevelBpe::operator=(ByteLevelBpe&&) noexcept = default;
ByteLevelBpe::~ByteLevelBpe() = default;

ByteLevelBpe ByteLevelBpe::fromFile(const std::string& path) {
  return fromJson(readRegularFile(path, largestFileBytes), path);
}

ByteLevelBpe ByteLevelBpe::fromJson(std::string_view json, const std::string& name) {
  const Json root = parseUntrustedJson(json, name);
  const Reader read(name);
  if (!root.is_object()) read.fail("the top level", "is " + describeJsonValue(root) + ", not an object");
  auto state = std::make_unique<State>();
  State& s = *state;
  s.name = name;

  read.expect(root, "truncation", "truncation", nullptr, "only null: encode gives every token");
  read.expect(root, "padding", "padding", nullptr, "only null: encode gives every token");
  const auto normalizer = root.find("normalizer");
  if (normalizer != root.end() && !normalizer->is_null()) {
    if (!normalizer->is_object() || normalizer->size() != 1 || !normalizer->contains("type") || (*normalizer)["type"] != "NFC") {
      read.unsupported("normalizer", *normalizer, "only null or NFC");
    }
    s.nfc = true;
  }

  // The model: vocabulary and merges.
  const Json& model = read.object(root, "model", "model");
  if (read.string(model, "type", "model.type") != "BPE") read.unsupported("model.type", model["type"], "only BPE");
  read.expect(model, "dropout", "model.dropout", nullptr, "only null");
  read.expect(model, "continuing_subword_prefix", "model.continuing_subword_prefix", "", "only null or \"\"");
  read.expect(model, "end_of_word_suffix", "model.end_of_word_suffix", "", "only null or \"\"");
  read.expect(model, "byte_fallback", "model.byte_fallback", false, "only false: byte-level BPE needs no fallback");
  read.expect(model, "fuse_unk", "model.fuse_unk", false, "only false");
  s.ignoreMerges = read.flag(model, "ignore_merges", "model.ignore_merges", false);
  const Json& vocab = read.object(model, "vocab", "model.vocab");
  std::vector<std::pair<std::uint32_t, const std::string*>> entries;
  entries.reserve(vocab.size());
  std::uint64_t largest = 0;
  for (auto item = vocab.begin(); item != vocab.end(); ++item) {
    const std::uint32_t id = read.id(item.value(), "model.vocab[" + shown(item.key()) + "]");
    entries.emplace_back(id, &item.key());
    largest = std::max<std::uint64_t>(largest, std::uint64_t{id} + 1);
  }
  const Json& addedList = root.contains("added_tokens") && !root["added_tokens"].is_null()
                              ? read.array(root, "added_tokens", "added_tokens") : Json::array();
  for (std::size_t i = 0; i < addedList.size(); ++i) {
    const std::string path = "added_tokens[" + std::to_string(i) + "]";
    if (!addedList[i].is_object()) read.fail(path, "is " + describeJsonValue(addedList[i]) + ", not an object");
    largest = std::max<std::uint64_t>(largest, std::uint64_t{read.id(addedList[i].contains("id") ? addedList[i]["id"] : Json(), path + ".id")} + 1);
  }
  s.size = static_cast<std::uint32_t>(largest);
  s.decoded.resize(largest);
  s.text.resize(largest);
  s.present.assign(largest, false);
  s.special.assign(largest, false);
  s.byteId.fill(-1);
  for (const auto& [id, key] : entries) {
    if (s.present[id]) read.fail("model.vocab", "gives id " + std::to_string(id) + " to two tokens");
    bool mapped = false;
    std::string bytes = keyBytes(*key, &mapped);
    if (mapped) {
      if (bytes.size() == 1) s.byteId[static_cast<unsigned char>(bytes[0])] = id;
      s.idOfBytes.emplace(bytes, id);
    }
    s.decoded[id] = bytes;
    s.text[id] = std::move(bytes);
    s.present[id] = true;
    s.idOfKey.emplace(*key, id);
  }
  const Json& mergeList = read.array(model, "merges", "model.merges");
  for (std::size_t rank = 0; rank < mergeList.size(); ++rank) {
    const std::string path = "model.merges[" + std::to_string(rank) + "]";
    const Json& merge = mergeList[rank];
    std::string left, right;
    if (merge.is_string()) {
      const std::string& pair = merge.get_ref<const std::string&>();
      const std::size_t space = pair.find(' ');
      if (space == std::string::npos || pair.find(' ', space + 1) != std::string::npos) read.fail(path, "is not two tokens separated by one space");
      left = pair.substr(0, space);
      right = pair.substr(space + 1);
    } else if (merge.is_array() && merge.size() == 2) {
      left = read.string(merge[0], path + "[0]");
      right = read.string(merge[1], path + "[1]");
    } else {
      read.fail(path, "is " + describeJsonValue(merge) + ", not \"a b\" or [\"a\", \"b\"]");
    }
    const auto leftId = s.idOfKey.find(left), rightId = s.idOfKey.find(right), joined = s.idOfKey.find(left + right);
    if (leftId == s.idOfKey.end() || rightId == s.idOfKey.end()) read.fail(path, "names a token that is not in model.vocab");
    if (joined == s.idOfKey.end()) read.fail(path, "makes a token that is not in model.vocab");
    // A pair listed twice keeps its later rank, as Hugging Face's map does.
    s.merges[pairKey(leftId->second, rightId->second)] = {static_cast<std::uint32_t>(rank), joined->second};
  }
  const auto unknown = model.find("unk_token");
  if (unknown != model.end() && !unknown->is_null()) {
    const auto found = s.idOfKey.find(read.string(*unknown, "model.unk_token"));
    if (found == s.idOfKey.end()) read.fail("model.unk_token", "is not in model.vocab");
    s.unknownId = found->second;
  }

  // Added tokens, found in the text before anything else. Hugging Face does not take their ids from the file: one
  // already in the vocabulary keeps its id there, a new one gets the next id after the vocabulary and the earlier
  // added tokens (it warns of a file that says otherwise). A file whose ids are not those is refused, not read
  // differently from Hugging Face.
  std::optional<std::uint32_t> largestAdded;
  for (std::size_t i = 0; i < addedList.size(); ++i) {
    const Json& token = addedList[i];
    const std::string path = "added_tokens[" + std::to_string(i) + "]";
    const std::uint32_t id = read.id(token["id"], path + ".id");
    const std::string content = read.string(token, "content", path + ".content");
    for (const char* option : {"single_word", "lstrip", "rstrip"}) {
      if (read.flag(token, option, path + "." + option, false)) read.fail(path + "." + option, "true is not supported (only false)");
    }
    const bool special = read.flag(token, "special", path + ".special", false);
    const bool normalized = read.flag(token, "normalized", path + ".normalized", !special);
    const auto known = s.idOfKey.find(content);
    const std::uint64_t vocabCount = vocab.size();
    const std::uint64_t expectedId = known != s.idOfKey.end() ? known->second
                                     : !largestAdded                                       ? vocabCount
                                     : (*largestAdded >= vocabCount || vocabCount == 0) ? *largestAdded + std::uint64_t{1}
                                                                                          : vocabCount;
    if (id != expectedId) {
      read.fail(path + ".id", "is " + std::to_string(id) + ", but Hugging Face gives this token id " + std::to_string(expectedId) +
                                  " (an added token keeps its id in model.vocab, or continues the ids after the vocabulary)");
    }
    largestAdded = std::max(largestAdded.value_or(0), id);
    // An added token that is also in the vocabulary keeps its id; decoding gives its content either way.
    bool mapped = false;
    s.decoded[id] = keyBytes(content, &mapped);
    s.text[id] = content;
    s.present[id] = true;
    s.special[id] = special;
    s.idOfKey[content] = id;
    if (!content.empty()) (normalized ? s.addedNormalized : s.addedRaw).push_back({content, id});
  }
  // Hugging Face matches the normalized tokens by their normalized content.
  if (s.nfc) {
    for (AddedToken& token : s.addedNormalized) token.content = normalizeNfc(token.content);
  }
  for (auto* list : {&s.addedRaw, &s.addedNormalized}) {
    std::stable_sort(list->begin(), list->end(), [](const AddedToken& a, const AddedToken& b) { return a.content.size() > b.content.size(); });
  }

  // The pre-tokenizer: ByteLevel alone, or Split steps ending in a ByteLevel without its regex.
  const Json& pre = read.object(root, "pre_tokenizer", "pre_tokenizer");
  std::vector<std::pair<const Json*, std::string>> steps;
  const std::string preType = read.string(pre, "type", "pre_tokenizer.type");
  if (preType == "Sequence") {
    const Json& list = read.array(pre, "pretokenizers", "pre_tokenizer.pretokenizers");
    for (std::size_t i = 0; i < list.size(); ++i) steps.emplace_back(&list[i], "pre_tokenizer.pretokenizers[" + std::to_string(i) + "]");
  } else {
    steps.emplace_back(&pre, "pre_tokenizer");
  }
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const Json& step = *steps[i].first;
    const std::string& path = steps[i].second;
    if (!step.is_object()) read.fail(path, "is " + describeJsonValue(step) + ", not an object");
    const std::string type = read.string(step, "type", path + ".type");
    PreStep made;
    if (type == "ByteLevel") {
      // Bytes become the vocabulary's characters here, so a split after it would see those, not the text.
      if (i + 1 != steps.size()) read.fail(path, "ByteLevel before another pre-tokenizer is not supported (it must come last)");
      made.addPrefixSpace = read.flag(step, "add_prefix_space", path + ".add_prefix_space", true);
      if (read.flag(step, "use_regex", path + ".use_regex", true)) made.regex = std::make_unique<Regex>(gpt2Pattern, name + ": GPT-2's pattern");
    } else if (type == "Split") {
      const Json& pattern = read.object(step, "pattern", path + ".pattern");
      if (pattern.size() != 1 || (!pattern.contains("Regex") && !pattern.contains("String"))) {
        read.fail(path + ".pattern", "is neither {\"Regex\": ...} nor {\"String\": ...}");
      }
      if (pattern.contains("Regex")) {
        made.regex = std::make_unique<Regex>(read.string(pattern, "Regex", path + ".pattern.Regex"), name + ": " + path + ".pattern.Regex");
      } else {
        made.literal = read.string(pattern, "String", path + ".pattern.String");
        if (made.literal.empty()) read.fail(path + ".pattern.String", "is empty");
      }
      const std::string behavior = read.string(step, "behavior", path + ".behavior");
      if (behavior != "Isolated") read.unsupported(path + ".behavior", step["behavior"], "only Isolated");
      if (read.flag(step, "invert", path + ".invert", false)) read.fail(path + ".invert", "true is not supported (only false)");
    } else {
      read.unsupported(path + ".type", step["type"], "byte-level BPE: ByteLevel, or a Sequence of Split and ByteLevel");
    }
    if (type == "ByteLevel" || i + 1 != steps.size()) {
      s.preSteps.push_back(std::move(made));
    } else {
      read.fail(path, "is the last pre-tokenizer, and it must be ByteLevel (bytes as the vocabulary's characters)");
    }
  }
  if (steps.empty()) read.fail("pre_tokenizer.pretokenizers", "is empty (it must end in ByteLevel)");

  // The post-processor: which ids go around the text when special tokens are added.
  const Json* post = root.contains("post_processor") && !root["post_processor"].is_null() ? &root["post_processor"] : nullptr;
  std::vector<std::pair<const Json*, std::string>> processors;
  if (post) {
    if (!post->is_object()) read.fail("post_processor", "is " + describeJsonValue(*post) + ", not an object");
    if (read.string(*post, "type", "post_processor.type") == "Sequence") {
      const Json& list = read.array(*post, "processors", "post_processor.processors");
      for (std::size_t i = 0; i < list.size(); ++i) processors.emplace_back(&list[i], "post_processor.processors[" + std::to_string(i) + "]");
    } else {
      processors.emplace_back(post, "post_processor");
    }
  }
  bool templated = false;
  for (const auto& [processor, path] : processors) {
    if (!processor->is_object()) read.fail(path, "is " + describeJsonValue(*processor) + ", not an object");
    const std::string type = read.string(*processor, "type", path + ".type");
    if (type == "ByteLevel") continue;  // it only trims offsets, which encode does not give
    if (type != "TemplateProcessing") read.unsupported(path + ".type", (*processor)["type"], "only ByteLevel, TemplateProcessing or a Sequence of them");
    if (templated) read.fail(path, "is a second TemplateProcessing (only one is supported)");
    templated = true;
    const Json& single = read.array(*processor, "single", path + ".single");
    const Json& specials = read.object(*processor, "special_tokens", path + ".special_tokens");
    bool sequenceSeen = false;
    for (std::size_t i = 0; i < single.size(); ++i) {
      const std::string itemPath = path + ".single[" + std::to_string(i) + "]";
      const Json& item = single[i];
      if (item.is_object() && item.size() == 1 && item.contains("Sequence")) {
        const std::string which = read.string(read.object(item, "Sequence", itemPath + ".Sequence"), "id", itemPath + ".Sequence.id");
        if (which != "A" || sequenceSeen) read.fail(itemPath + ".Sequence.id", "must be A, once, in the single template");
        sequenceSeen = true;
      } else if (item.is_object() && item.size() == 1 && item.contains("SpecialToken")) {
        const Json& named = read.object(item, "SpecialToken", itemPath + ".SpecialToken");
        const std::string key = read.string(named, "id", itemPath + ".SpecialToken.id");
        if (!specials.contains(key)) read.fail(itemPath + ".SpecialToken.id", shown(named["id"]) + " is not in " + path + ".special_tokens");
        const std::string specialPath = path + ".special_tokens[" + shown(named["id"]) + "]";
        const Json& ids = read.array(read.object(specials, key, specialPath), "ids", specialPath + ".ids");
        for (std::size_t k = 0; k < ids.size(); ++k) {
          const std::uint32_t id = read.id(ids[k], specialPath + ".ids[" + std::to_string(k) + "]");
          if (id >= s.size || !s.present[id]) read.fail(specialPath + ".ids[" + std::to_string(k) + "]", "is not a token of the vocabulary");
          (sequenceSeen ? s.suffix : s.prefix).push_back(id);
        }
      } else {
        read.fail(itemPath, "is neither {\"Sequence\": ...} nor {\"SpecialToken\": ...}");
      }
    }
    if (!sequenceSeen) read.fail(path + ".single", "has no {\"Sequence\": {\"id\": \"A\"}}");
  }

  const Json& decoder = read.object(root, "decoder", "decoder");
  if (read.string(decoder, "type", "decoder.type") != "ByteLevel") read.unsupported("decoder.type", decoder["type"], "only ByteLevel");
  return ByteLevelBpe(std::move(state));
}

std::vector<std::uint32_t> ByteLevelBpe::encode(std::string_view text, bool addSpecialTokens) const {
  const State& s = *state_;
  const std::size_t invalid = firstInvalidUtf8(text);
  if (invalid != std::string_view::npos) {
    throw Error("the text to encode is not valid UTF-8 (at byte " + std::to_string(invalid) + ")");
  }
  std::vector<std::uint32_t> ids;
  if (addSpecialTokens) ids = s.prefix;
  // As Hugging Face: tokens with normalized false are found in the text as given, the rest in the normalized text.
  std::vector<Segment> segments = splitOnAdded({{text, std::nullopt}}, s.addedRaw);
  std::deque<std::string> normalized;  // owns the normalized pieces the segments view (a deque never moves them)
  if (s.nfc) {
    for (Segment& segment : segments) {
      if (segment.id) continue;
      normalized.push_back(normalizeNfc(segment.text));
      segment.text = normalized.back();
    }
  }
  segments = splitOnAdded(segments, s.addedNormalized);
  std::vector<std::string> words, next;
  for (const Segment& segment : segments) {
    if (segment.id) {
      ids.push_back(*segment.id);
      continue;
    }
    if (segment.text.empty()) continue;
    words.assign(1, std::string(segment.text));
    for (const PreStep& step : s.preSteps) {
      next.clear();
      for (std::string& word : words) {
        if (step.addPrefixSpace && word.front() != ' ') word.insert(word.begin(), ' ');
        if (step.regex || !step.literal.empty()) {
          splitIsolated(step, word, next);
        } else {
          next.push_back(std::move(word));
        }
      }
      words.swap(next);
    }
    for (const std::string& word : words) s.encodeWord(word, ids);
  }
  if (addSpecialTokens) ids.insert(ids.end(), s.suffix.begin(), s.suffix.end());
  return ids;
}

std::string ByteLevelBpe::decode(const std::vector<std::uint32_t>& ids, bool skipSpecialTokens) const {
  std::string bytes;
  for (const std::uint32_t id : ids) {
    const std::string& token = state_->decodedOf(id);
    if (!(skipSpecialTokens && state_->special[id])) bytes += token;
  }
  std::string text;
  appendLossyUtf8(text, bytes);
  return text;
}

std::uint32_t ByteLevelBpe::vocabularySize() const { return state_->size; }

std::optional<std::uint32_t> ByteLevelBpe::tokenId(std::string_view token) const {
  const auto found = state_->idOfKey.find(std::string(token));
  if (found == state_->idOfKey.end()) return std::nullopt;
  return found->second;
}

std::string ByteLevelBpe::tokenText(std::uint32_t id) const {
  state_->decodedOf(id);
  return state_->text[id];
}

bool ByteLevelBpe::isSpecial(std::uint32_t id) const { return id < state_->size && state_->special[id]; }

TextStream::TextStream(const ByteLevelBpe& tokenizer, bool skipSpecialTokens)
    : tokenizer_(&tokenizer), skipSpecialTokens_(skipSpecialTokens) {}

std::string TextStream::push(std::uint32_t id) {
  const std::string& token = tokenizer_->state_->decodedOf(id);
  if (skipSpecialTokens_ && tokenizer_->isSpecial(id)) return {};
  pending_ += token;
  const std::size_t complete = completeUtf8Prefix(pending_);
  std::string text;
  appendLossyUtf8(text, std::string_view(pending_).substr(0, complete));
  pending_.erase(0, complete);
  return text;
}

std::string TextStream::finish() {
  std::string text;
  appendLossyUtf8(text, pending_);
  pending_.clear();
  return text;
}

}  // namespace glnet
