// Text data sets for transformers, held as token ids (ImageSet::tokenIds: one row of `length` ids per sequence):
// pre-tokenized NumPy arrays, or JSON lines of text and label tokenized with a tokenizer.json (text/ByteLevelBpe.h),
// each cut or padded to the network's length.
#pragma once

#include "data/Idx.h"
#include "text/ByteLevelBpe.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace glnet {

// What the ids must fit: the network's sequence length, its embedding's rows, its classes.
struct TokenLimits {
  std::uint32_t length = 0;
  std::uint32_t vocabulary = 0;
  std::uint32_t classes = 0;
  // The id the network's mask layers hide: a sequence of nothing else leaves its attention no key to see.
  std::optional<std::uint32_t> pad;
  // A causal attention reads the mask: a sequence that starts with padding leaves its first queries no key either.
  bool padFirstHidesAll = false;
};

// DIR/train-ids.npy or DIR/test-ids.npy, [count, length] whole numbers below the vocabulary (any integer or float
// dtype), and the matching -labels.npy, [count] whole numbers below the classes (at most 256). Throws glnet::Error
// naming the file and the first value or shape that does not fit, or a sequence of padding alone.
LabelledImages readTokenIdSplit(const std::string& directory, Split split, const TokenLimits& limits);

// `count` sequences of `length` ids, zeros (ImageSet::tokenIds).
ImageSet emptySequences(std::size_t count, std::uint32_t length);
// Sequence i of `set` made `ids`, cut to the length or padded with `padId`; throws glnet::Error starting with `where`
// for an id past the vocabulary or a sequence the mask would hide whole (TokenLimits::pad). Returns whether it was cut.
bool putSequence(ImageSet& set, std::size_t i, const std::vector<std::uint32_t>& ids, std::uint32_t padId, const TokenLimits& limits,
                 const std::string& where);

struct TextData {
  LabelledImages train, test;
  // The classes' names when the labels are strings (sorted, as the training file has them); empty for numbers.
  std::vector<std::string> classNames;
  std::size_t trainCut = 0, testCut = 0;  // texts longer than the length, cut to it
};

// DIR/train.jsonl and DIR/test.jsonl: one JSON object a line, {"text": "...", "label": L}, L a whole number below the
// classes or (in every line alike) a class name; blank lines are skipped. Each text becomes the tokenizer's ids (its
// special tokens included), cut to the length or padded with `padId`. Throws glnet::Error naming the file and line.
TextData readTextData(const std::string& directory, const ByteLevelBpe& tokenizer, std::uint32_t padId, const TokenLimits& limits);

}  // namespace glnet
