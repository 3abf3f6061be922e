#!/usr/bin/env python3
"""Writes the small byte-level BPE tokenizers that tests/text/ByteLevelBpeTest.cpp reads, and the ids they must give.

How they are made (pure Python, standard library only; rerunning gives the same bytes):
- The training text is PARAGRAPHS below: English with contractions, numbers, code, French and German accents,
  Greek, Russian, Chinese, Japanese, emoji and runs of spaces, tabs and newlines.
- Pre-tokenization is written out by hand here from the two patterns' definitions (not run through any regex
  engine, so that it checks PCRE2 independently): GPT-2's ByteLevel pattern and Llama 3's Split pattern, with
  Hugging Face's (Oniguruma's) \\s, the Unicode White_Space characters.
- Training is classic byte-level BPE: every one of the 256 bytes is a token (ids 0-255 in byte order, written as
  GPT-2's bytes_to_unicode characters), then MERGES times the most frequent adjacent pair over the words (ties to
  the smallest pair) is merged and its token appended.
- The files follow Hugging Face's tokenizer.json layout:
    tokenizer.json         GPT-2 style: ByteLevel pre-tokenizer (use_regex), merges as "a b" strings, specials
                           <|endoftext|> and <|user|>, one non-special added token [[note]] (normalized: true), a
                           ByteLevel post-processor.
    tokenizer-prefix.json  the same with add_prefix_space true.
    nfc-tokenizer.json     the same with normalizer NFC (as Qwen2) and one more non-special added token written
                           decomposed, "cafe\u0301", which Hugging Face matches by its normalized form.
    llama3-tokenizer.json  Llama 3 style: Sequence[Split(Llama 3's regex, Isolated), ByteLevel(use_regex false)],
                           merges as [a, b] pairs, ignore_merges true (with one extra whole word, "Ġquokka", that no
                           merge makes), <|begin_of_text|> prepended by a TemplateProcessing in a Sequence, as
                           Llama 3.1 ships it.
    expected.json          for each file, texts with the ids of encode(text) and encode(text, addSpecialTokens
                           false), computed by the reference encoder below (HF's rules: added tokens first,
                           leftmost-longest, those with normalized false before the others; then pre-tokenization;
                           then BPE merging the lowest-ranked pair, leftmost first).
The tests compare the C++ encoder with these stored ids (the script is run here, not by ctest).
Usage: tests/reference/make_tokenizer.py [OUTPUT_DIR]   (default tests/data/tokenizer)
"""
import json
import os
import sys
import unicodedata

MERGES = 300

PARAGRAPHS = [
    "The quick brown fox jumps over the lazy dog. It's 2024, and we've got 3 dogs, 12 cats and 1,234,567 fish.\n"
    "I'm sure they'll say we'd better go; you're right, THEY'RE NOT.\n\n",
    "def encode(self, text):\n    ids = []\n    for word in text.split():\n        ids.append(self.vocab[word])  # look up\n"
    "    return ids\n\nif x == 0x1F and y != 42:\n\tprint(f\"{x:>8} -> {y}\")\n",
    "Le cœur a ses raisons que la raison ne connaît point. Über den Wolken muss die Freiheit wohl grenzenlos sein. "
    "Ελληνικά γράμματα και αριθμοί 3,14. Съешь же ещё этих мягких французских булок, да выпей чаю.\n",
    "机器学习是人工智能的一个分支。東京は日本の首都です。ひらがなとカタカナ。한국어 문장도 있습니다.\n",
    "Emoji: 😀 👍🏽 🎉🎉 👨‍👩‍👧 ❤️ — and “quotes”, ‘single’, dashes – and … ellipses. Prices: $9.99, €5, £3.50, 100%.\n",
    "   leading spaces, trailing spaces   \n\t\ttabs\tbetween\twords\n\n\n  \n   blank lines above   \r\nwindows line\r\n",
    "the the the there these those then than that this thin thing things thinking thought through though\n",
]

# Oniguruma's \s under Unicode (what Hugging Face's regexes run on): the White_Space property.
WHITESPACE = set("\t\n\x0b\x0c\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000") | {chr(c) for c in range(0x2000, 0x200B)}
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d"]
GPT2_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                  r"\s*[\r\n]+|\s+(?!\S)|\s+")


def is_space(c):
    return c in WHITESPACE


def is_letter(c):
    return unicodedata.category(c)[0] == "L"


def is_number(c):
    return unicodedata.category(c)[0] == "N"


def is_other(c):
    return not (is_space(c) or is_letter(c) or is_number(c))


def run(text, i, accept):
    while i < len(text) and accept(text[i]):
        i += 1
    return i


def spaces_at(text, i):
    """\\s+(?!\\S)|\\s+ at i: a whitespace run, less its last character when a non-space follows (if it has two)."""
    end = run(text, i, is_space)
    if end == i:
        return None
    if end < len(text) and end - 1 > i:
        return end - 1
    return end


def gpt2_match(text, i):
    for c in CONTRACTIONS:
        if text.startswith(c, i):
            return i + len(c)
    for accept in (is_letter, is_number, is_other):  # ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`
        start = i + 1 if text[i] == " " and i + 1 < len(text) and accept(text[i + 1]) else i
        end = run(text, start, accept)
        if end > start:
            return end
    return spaces_at(text, i)


def llama3_match(text, i):
    for c in CONTRACTIONS:  # case-insensitive
        if len(text) - i >= len(c) and all(text[i + k].casefold() == c[k] for k in range(len(c))):
            return i + len(c)
    c0 = text[i]
    if c0 not in "\r\n" and not is_letter(c0) and not is_number(c0) and i + 1 < len(text) and is_letter(text[i + 1]):
        return run(text, i + 1, is_letter)
    if is_letter(c0):
        return run(text, i, is_letter)
    if is_number(c0):
        end = i
        while end < len(text) and end - i < 3 and is_number(text[end]):
            end += 1
        return end
    start = i + 1 if c0 == " " and i + 1 < len(text) and is_other(text[i + 1]) else i
    end = run(text, start, is_other)
    if end > start:
        return run(text, end, lambda c: c in "\r\n")
    spaces = run(text, i, is_space)  # \s*[\r\n]+ ends after the run's last newline
    newlines = [k for k in range(i, spaces) if text[k] in "\r\n"]
    if newlines:
        return newlines[-1] + 1
    return spaces_at(text, i)


def split_with(match, text):
    """Isolated split: each match a piece, and each unmatched stretch between matches."""
    pieces, i, gap = [], 0, 0
    while i < len(text):
        end = match(text, i)
        if end is None:
            i += 1
            continue
        if i > gap:
            pieces.append(text[gap:i])
        pieces.append(text[i:end])
        i = gap = end
    if gap < len(text):
        pieces.append(text[gap:])
    return pieces


def bytes_to_unicode():
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


BYTE_CHAR = bytes_to_unicode()


def byte_level(word):
    return "".join(BYTE_CHAR[b] for b in word.encode("utf-8"))


def train(words, merges):
    """words: {byte-level word: count}. Returns the merges, most frequent pair first (ties: the smallest pair)."""
    split = {word: list(word) for word in words}
    result = []
    for _ in range(merges):
        counts = {}
        for word, symbols in split.items():
            for pair in zip(symbols, symbols[1:]):
                counts[pair] = counts.get(pair, 0) + words[word]
        if not counts:
            break
        best = min(counts, key=lambda pair: (-counts[pair], pair))
        result.append(best)
        for word, symbols in split.items():
            merged, k = [], 0
            while k < len(symbols):
                if k + 1 < len(symbols) and (symbols[k], symbols[k + 1]) == best:
                    merged.append(symbols[k] + symbols[k + 1])
                    k += 2
                else:
                    merged.append(symbols[k])
                    k += 1
            split[word] = merged
    return result


def bpe(word, ranks):
    """GPT-2's algorithm: merge the lowest-ranked adjacent pair, the leftmost of equals, until none is left."""
    symbols = list(word)
    while len(symbols) > 1:
        rank, at = min((ranks.get((symbols[k], symbols[k + 1]), float("inf")), k) for k in range(len(symbols) - 1))
        if rank == float("inf"):
            break
        symbols[at:at + 2] = [symbols[at] + symbols[at + 1]]
    return symbols


class Tokenizer:
    def __init__(self, style, merges, vocab, added, prefix_space=False, template=None, ignore_merges=False, nfc=False):
        self.style, self.merges, self.vocab, self.added, self.nfc = style, merges, vocab, added, nfc
        self.prefix_space, self.template, self.ignore_merges = prefix_space, template, ignore_merges
        self.ranks = {pair: rank for rank, pair in enumerate(merges)}

    def normalize(self, text):
        return unicodedata.normalize("NFC", text) if self.nfc else text

    def pre_tokenize(self, text):
        if self.style == "gpt2":
            if self.prefix_space and not text.startswith(" "):
                text = " " + text
            return split_with(gpt2_match, text)
        return split_with(llama3_match, text)

    def encode(self, text, add_special=True):
        pieces = [text]
        for normalized in (False, True):  # tokens matched on the raw text first, as Hugging Face does
            tokens = {self.normalize(t["content"]): t["id"] for t in self.added if t["normalized"] == normalized}
            pieces = split_added(pieces, tokens)
            pieces = [self.normalize(p) if isinstance(p, str) else p for p in pieces]
        ids = list(self.template) if add_special and self.template else []
        for piece in pieces:
            if isinstance(piece, int):
                ids.append(piece)
                continue
            for word in self.pre_tokenize(piece):
                chars = byte_level(word)
                if self.ignore_merges and chars in self.vocab:
                    ids.append(self.vocab[chars])
                else:
                    ids.extend(self.vocab[s] for s in bpe(chars, self.ranks))
        return ids

    def json(self):
        added = [{"id": t["id"], "content": t["content"], "single_word": False, "lstrip": False, "rstrip": False,
                  "normalized": t["normalized"], "special": t["special"]} for t in self.added]
        byte_level_step = {"type": "ByteLevel", "add_prefix_space": self.prefix_space, "trim_offsets": True, "use_regex": self.style == "gpt2"}
        model = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None if self.style == "llama3" else "",
                 "end_of_word_suffix": None if self.style == "llama3" else "", "fuse_unk": False, "byte_fallback": False,
                 "ignore_merges": self.ignore_merges, "vocab": self.vocab}
        if self.style == "gpt2":
            model["merges"] = [f"{a} {b}" for a, b in self.merges]
            pre = byte_level_step
            post = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True}
        else:
            model["merges"] = [[a, b] for a, b in self.merges]
            pre = {"type": "Sequence", "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": LLAMA3_PATTERN}, "behavior": "Isolated", "invert": False}, byte_level_step]}
            bos = next(t for t in self.added if t["content"] == "<|begin_of_text|>")
            post = {"type": "Sequence", "processors": [
                {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
                {"type": "TemplateProcessing",
                 "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                 "pair": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                          {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
                 "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [bos["id"]], "tokens": ["<|begin_of_text|>"]}}}]}
        return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
                "normalizer": {"type": "NFC"} if self.nfc else None,
                "pre_tokenizer": pre, "post_processor": post,
                "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}, "model": model}


def split_added(pieces, tokens):
    """Leftmost-longest matches of `tokens` ({content: id}) in the text pieces; found tokens become their ids."""
    out = []
    for piece in pieces:
        if isinstance(piece, int):
            out.append(piece)
            continue
        i = start = 0
        while i < len(piece):
            found = max((t for t in tokens if piece.startswith(t, i)), key=len, default=None)
            if found is None:
                i += 1
                continue
            if i > start:
                out.append(piece[start:i])
            out.append(tokens[found])
            i = start = i + len(found)
        if start < len(piece):
            out.append(piece[start:])
    return out


def build(style, specials, extra_words=()):
    match = gpt2_match if style == "gpt2" else llama3_match
    words = {}
    for paragraph in PARAGRAPHS:
        for word in split_with(match, paragraph):
            words[byte_level(word)] = words.get(byte_level(word), 0) + 1
    merges = train(words, MERGES)
    vocab = {BYTE_CHAR[b]: b for b in range(256)}
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    for word in extra_words:
        vocab.setdefault(byte_level(word), len(vocab))
    added = []
    for content, special, normalized in specials:
        added.append({"id": len(vocab) + len(added), "content": content, "special": special, "normalized": normalized})
    return merges, vocab, added


TEXTS = [
    "",
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "It's I'm we'll they'd you've she's THEY'RE can't",
    "numbers 0 12 123 1234 12345 3.14159 1,000,000 ٣٤٥ ½",
    "   spaces   \t\ttabs\t \n\nnewlines\n \r\n\r\ncrlf  \n  ",
    " ",
    "\n",
    "trailing   ",
    "emoji 😀👍🏽 family 👨‍👩‍👧 flag 🇫🇷 heart ❤️",
    "combining e\u0301 a\u0308 n\u0303 Z\u0351\u0352\u0353 and precomposed é ä ñ",
    "中文分词测试。日本語のテキスト、カタカナ。한국어 텍스트",
    "mixed中文English123日本語!!?",
    "special <|endoftext|> inside<|endoftext|>text<|user|><|endoftext|>",
    "<|endoftext|>",
    "<|endoftext <|endoftext|>| partial",
    "a [[note]] b [[note]][[note]]",
    "code: for (int i = 0; i < n; ++i) { x[i] += y[i] * 2; }  // done",
    "URLs https://example.com/path?q=1&r=2#frag and emails a.b@c.de",
    "the quokka quokkas Quokka",
    "symbols ~!@#$%^&*()_+`-={}|[]\\:\";'<>?,./ ¡¿ «» § ¶ • ° ± × ÷",
    "control\x01\x02\x7f chars and \u00a0nbsp\u2003em\u3000ideographic",
    "nel\u0085line",
    "café, cafe\u0301, CAFE\u0301 and e\u0301\u0323 q\u0307\u0323 \u212b \u1e9b\u0323 [[note]]",
]


def long_text():
    return "".join(PARAGRAPHS) * 2


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "tokenizer")
    os.makedirs(out, exist_ok=True)
    gpt2_specials = [("<|endoftext|>", True, False), ("<|user|>", True, False), ("[[note]]", False, True)]
    merges, vocab, added = build("gpt2", gpt2_specials)
    tokenizers = {
        "tokenizer.json": Tokenizer("gpt2", merges, vocab, added),
        "tokenizer-prefix.json": Tokenizer("gpt2", merges, vocab, added, prefix_space=True),
    }
    merges, vocab, added = build("gpt2", gpt2_specials + [("cafe\u0301", False, True)])
    tokenizers["nfc-tokenizer.json"] = Tokenizer("gpt2", merges, vocab, added, nfc=True)
    llama_specials = [("<|begin_of_text|>", True, False), ("<|end_of_text|>", True, False), ("<|eot_id|>", True, False)]
    merges, vocab, added = build("llama3", llama_specials, extra_words=[" quokka"])
    bos = added[0]["id"]
    tokenizers["llama3-tokenizer.json"] = Tokenizer("llama3", merges, vocab, added, template=[bos], ignore_merges=True)
    expected = {}
    for name, tokenizer in tokenizers.items():
        with open(os.path.join(out, name), "w", encoding="utf-8") as f:
            json.dump(tokenizer.json(), f, ensure_ascii=False, indent=1)
            f.write("\n")
        cases = []
        for text in TEXTS + [long_text()]:
            text = text.replace("<|endoftext|>", "<|end_of_text|>") if tokenizer.style == "llama3" else text
            cases.append({"text": text, "ids": tokenizer.encode(text), "ids_plain": tokenizer.encode(text, add_special=False)})
        expected[name] = cases
    with open(os.path.join(out, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(expected, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
