#include "data/TokenData.h"

#include "base/FileInput.h"
#include "base/check.h"
#include "formats/Npy.h"
#include "formats/UntrustedJson.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

namespace glnet {
namespace {

// A text file of this many bytes holds millions of examples; more is more likely a wrong path.
constexpr std::uint64_t largestTextFileBytes = std::uint64_t{4} << 30;
// Labels travel as bytes (Gather.glsl's LABELS).
constexpr std::uint32_t mostClasses = 256;

// A set of `count` sequences of `length` ids, zeros, and its labels.
LabelledImages emptySet(std::size_t count, std::uint32_t length) {
  LabelledImages set;
  set.images = emptySequences(count, length);
  set.labels.assign(count, 0);
  return set;
}

void putId(ImageSet& set, std::size_t at, std::uint32_t id) { std::memcpy(set.pixels.data() + at * 4, &id, 4); }

std::uint32_t idAt(const ImageSet& set, std::size_t at) {
  std::uint32_t id = 0;
  std::memcpy(&id, set.pixels.data() + at * 4, 4);
  return id;
}

void checkClasses(const TokenLimits& limits, const std::string& path) {
  if (limits.classes > mostClasses) {
    throw Error(path + ": labels travel as bytes, so at most " + std::to_string(mostClasses) + " classes; the network has " +
                std::to_string(limits.classes));
  }
}

// Refuses sequence i when it is padding alone: attention masked to no key gives NaN.
void checkNotAllPadding(const ImageSet& set, std::size_t i, const TokenLimits& limits, const std::string& where) {
  if (!limits.pad) return;
  if (limits.padFirstHidesAll && idAt(set, i * limits.length) == *limits.pad) {
    throw Error(where + " starts with padding (id " + std::to_string(*limits.pad) +
                "): a causal attention's first queries would see no position (pad at the end)");
  }
  for (std::uint32_t p = 0; p < limits.length; ++p) {
    if (idAt(set, i * limits.length + p) != *limits.pad) return;
  }
  throw Error(where + " is padding (id " + std::to_string(*limits.pad) + ") alone: its attention would see no position");
}

std::string splitName(Split split) { return split == Split::train ? "train" : "test"; }

}  // namespace

LabelledImages readTokenIdSplit(const std::string& directory, Split split, const TokenLimits& limits) {
  const std::string idPath = directory + "/" + splitName(split) + "-ids.npy", labelPath = directory + "/" + splitName(split) + "-labels.npy";
  checkClasses(limits, labelPath);
  const NpyArray ids = readNpy(idPath), labels = readNpy(labelPath);
  if (ids.shape.size() != 2 || ids.shape[1] != limits.length) {
    std::ostringstream shape;
    for (std::size_t k = 0; k < ids.shape.size(); ++k) shape << (k ? ", " : "") << ids.shape[k];
    throw Error(idPath + ": ids of shape [" + shape.str() + "]; the network reads sequences of " + std::to_string(limits.length) +
                " ids, [count, " + std::to_string(limits.length) + "]");
  }
  const auto count = static_cast<std::size_t>(ids.shape[0]);
  if (labels.shape.size() != 1 || static_cast<std::size_t>(labels.shape[0]) != count) {
    throw Error(labelPath + ": " + std::to_string(count) + " sequences need labels of shape [" + std::to_string(count) + "]");
  }
  LabelledImages set = emptySet(count, limits.length);
  for (std::size_t i = 0; i < ids.values.size(); ++i) {
    const float id = ids.values[i];
    if (!(id >= 0 && id < static_cast<float>(limits.vocabulary)) || id != std::floor(id)) {
      std::ostringstream value;
      value << id;
      throw Error(idPath + ": id " + value.str() + " (sequence " + std::to_string(i / limits.length) + ", position " +
                  std::to_string(i % limits.length) + ") is not a whole number below the embedding's " + std::to_string(limits.vocabulary) + " rows");
    }
    putId(set.images, i, static_cast<std::uint32_t>(id));
  }
  for (std::size_t i = 0; i < count; ++i) checkNotAllPadding(set.images, i, limits, idPath + ": sequence " + std::to_string(i));
  for (std::size_t i = 0; i < count; ++i) {
    const float label = labels.values[i];
    if (!(label >= 0 && label < static_cast<float>(limits.classes)) || label != std::floor(label)) {
      std::ostringstream value;
      value << label;
      throw Error(labelPath + ": label " + value.str() + " (sequence " + std::to_string(i) + ") is not a class below " +
                  std::to_string(limits.classes));
    }
    set.labels[i] = static_cast<std::uint8_t>(label);
  }
  return set;
}

ImageSet emptySequences(std::size_t count, std::uint32_t length) {
  ImageSet set;
  set.count = count;
  set.rows = 1;
  set.columns = length;
  set.valueBytes = 4;
  set.pixels.assign(count * length * 4, 0);
  return set;
}

bool putSequence(ImageSet& set, std::size_t i, const std::vector<std::uint32_t>& ids, std::uint32_t padId, const TokenLimits& limits,
                 const std::string& where) {
  for (std::uint32_t p = 0; p < limits.length; ++p) {
    const std::uint32_t id = p < ids.size() ? ids[p] : padId;
    if (id >= limits.vocabulary) {
      throw Error(where + " has token id " + std::to_string(id) + "; the network's embedding has " + std::to_string(limits.vocabulary) +
                  " rows (a tokenizer of a larger vocabulary?)");
    }
    putId(set, i * limits.length + p, id);
  }
  checkNotAllPadding(set, i, limits, where);
  return ids.size() > limits.length;
}

namespace {

struct TextLine {
  std::vector<std::uint32_t> ids;
  std::optional<std::uint32_t> number;  // the label, a number
  std::string name;                     // or a class name
};

std::vector<TextLine> readLines(const std::string& path, const ByteLevelBpe& tokenizer) {
  const std::string text = readRegularFile(path, largestTextFileBytes);
  std::vector<TextLine> lines;
  std::size_t lineNumber = 0;
  std::optional<bool> numbered;
  for (std::size_t start = 0; start < text.size();) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    const std::string_view line(text.data() + start, end - start);
    start = end + 1;
    ++lineNumber;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const std::string where = path + " line " + std::to_string(lineNumber);
    const nlohmann::json entry = parseUntrustedJson(line, where);
    const auto field = [&](const char* key) {
      const auto found = entry.is_object() ? entry.find(key) : entry.end();
      if (found == entry.end()) throw Error(where + ": a line is an object with \"text\" and \"label\"");
      return *found;
    };
    const nlohmann::json words = field("text"), label = field("label");
    if (!words.is_string()) throw Error(where + ": \"text\" must be a string, not " + describeJsonValue(words));
    TextLine parsed;
    if (label.is_number_integer() && label.get<std::int64_t>() >= 0 && label.get<std::int64_t>() < mostClasses) {
      parsed.number = static_cast<std::uint32_t>(label.get<std::int64_t>());
    } else if (label.is_string() && !label.get<std::string>().empty()) {
      parsed.name = label.get<std::string>();
    } else {
      throw Error(where + ": \"label\" must be a class number from 0 to " + std::to_string(mostClasses - 1) + " or a class name, not " +
                  describeJsonValue(label));
    }
    if (numbered && *numbered != parsed.number.has_value()) throw Error(where + ": labels are all numbers or all names, not both");
    numbered = parsed.number.has_value();
    parsed.ids = tokenizer.encode(words.get<std::string>());
    lines.push_back(std::move(parsed));
  }
  if (lines.empty()) throw Error(path + ": no examples");
  return lines;
}

// The lines as a set of token ids; returns how many were cut.
std::size_t fill(LabelledImages& set, const std::vector<TextLine>& lines, const std::map<std::string, std::uint32_t>& classOf,
                 std::uint32_t padId, const TokenLimits& limits, const std::string& path) {
  std::size_t cut = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const TextLine& line = lines[i];
    std::uint32_t label = 0;
    if (line.number) {
      label = *line.number;
    } else {
      const auto found = classOf.find(line.name);
      if (found == classOf.end()) throw Error(path + ": example " + std::to_string(i + 1) + "'s class '" + line.name + "' is not among the training file's");
      label = found->second;
    }
    if (label >= limits.classes) {
      throw Error(path + ": example " + std::to_string(i + 1) + " has label " + std::to_string(label) + "; the network has " +
                  std::to_string(limits.classes) + " classes");
    }
    set.labels[i] = static_cast<std::uint8_t>(label);
    cut += putSequence(set.images, i, line.ids, padId, limits, path + ": example " + std::to_string(i + 1)) ? 1 : 0;
  }
  return cut;
}

}  // namespace

TextData readTextData(const std::string& directory, const ByteLevelBpe& tokenizer, std::uint32_t padId, const TokenLimits& limits) {
  const std::string trainPath = directory + "/train.jsonl", testPath = directory + "/test.jsonl";
  checkClasses(limits, trainPath);
  const std::vector<TextLine> train = readLines(trainPath, tokenizer), test = readLines(testPath, tokenizer);
  TextData data;
  std::map<std::string, std::uint32_t> classOf;
  if (!train.front().number) {
    std::set<std::string> names;
    for (const TextLine& line : train) names.insert(line.name);
    data.classNames.assign(names.begin(), names.end());
    for (std::size_t k = 0; k < data.classNames.size(); ++k) classOf[data.classNames[k]] = static_cast<std::uint32_t>(k);
    if (data.classNames.size() != limits.classes) {
      throw Error(trainPath + ": " + std::to_string(data.classNames.size()) + " class names for a network of " + std::to_string(limits.classes) + " classes");
    }
  }
  if (test.front().number.has_value() != train.front().number.has_value()) throw Error(testPath + ": labels are numbers in one file and names in the other");
  data.train = emptySet(train.size(), limits.length);
  data.test = emptySet(test.size(), limits.length);
  data.trainCut = fill(data.train, train, classOf, padId, limits, trainPath);
  data.testCut = fill(data.test, test, classOf, padId, limits, testPath);
  return data;
}

}  // namespace glnet
