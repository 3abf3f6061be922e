#!/usr/bin/env python3
"""glnet's byte-level BPE (engine/text/ByteLevelBpe) against Hugging Face's `tokenizers`, id for id.

Trains byte-level BPE tokenizers with `tokenizers` itself on a varied text made here (over 10 000 characters:
Latin, Greek, Cyrillic, Arabic, Hebrew, Devanagari, Chinese, Japanese, Korean, emoji with skin tones and ZWJ
sequences, combining marks, numbers, code, contractions in mixed case, runs of spaces, tabs, CR LF and the odd
Unicode spaces), in four styles, saves each as tokenizer.json and compares, on the whole text, on each of its
lines and on hostile snippets, the ids of `glnet_info --tokenizer FILE --encode TEXTFILE` (the command's hidden
inspection option) with `Tokenizer.encode(text).ids`, and its decoding with `Tokenizer.decode(ids)`:
  gpt2         ByteLevel pre-tokenizer (GPT-2's regex), specials <|endoftext|> and <|user|>, ByteLevel post-processor
  gpt2-prefix  the same with add_prefix_space
  llama3       Sequence[Split(Llama 3's regex, Isolated), ByteLevel(use_regex false)], ignore_merges true,
               TemplateProcessing prepending <|begin_of_text|>
  qwen2        normalizer NFC, Sequence[Split(Qwen2's regex, Isolated), ByteLevel(use_regex false)]
Any tokenizer.json given with --extra (a real model's, say) is compared on the same texts.
Usage: bench/tokenizer_check.py GLNET_INFO [--work DIR] [--extra tokenizer.json ...]
Needs Python's `tokenizers` (pip install tokenizers; not in Debian). Exit 0 when every id and decoding agrees.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

try:
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
except ImportError:
    sys.exit("tokenizer_check.py: error: needs Python's `tokenizers` package (pip install tokenizers)")

QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                 r"\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                  r"\s*[\r\n]+|\s+(?!\S)|\s+")

WORDS = {
    "english": "the quick brown fox jumps over lazy dog while tokenizers split words into pieces and merges".split(),
    "contractions": "it's I'm we'll they'd you've she's THEY'RE can't DON'T We'Ll".split(),
    "french": "le cœur a ses raisons que la raison ne connaît point élève à côté garçon".split(),
    "german": "Über den Wolken muss die Freiheit wohl grenzenlos sein Straße Größe".split(),
    "greek": "Ελληνικά γράμματα και αριθμοί φιλοσοφία".split(),
    "russian": "Съешь же ещё этих мягких французских булок да выпей чаю".split(),
    "arabic": "مرحبا بالعالم اللغة العربية جميلة".split(),
    "hebrew": "שלום עולם עברית".split(),
    "hindi": "नमस्ते दुनिया हिन्दी भाषा".split(),
    "chinese": ["机器学习是人工智能的一个分支", "东京", "中文分词", "你好世界"],
    "japanese": ["東京は日本の首都です", "ひらがな", "カタカナ", "日本語のテキスト"],
    "korean": "한국어 문장도 있습니다 안녕하세요".split(),
    "emoji": ["😀", "👍🏽", "🎉🎉", "👨‍👩‍👧", "❤️", "🇫🇷", "🧑🏿‍🚀", "✨"],
    "combining": ["e\u0301", "a\u0308", "n\u0303", "Z\u0351\u0352\u0353", "\u0915\u094d\u0937"],
    "numbers": ["0", "12", "123", "1234", "12345678", "3.14159", "1,000,000", "٣٤٥", "½", "2024-01-31", "0x1F"],
    "symbols": ["$9.99", "€5", "£3.50", "100%", "«»", "—", "…", "“quotes”", "~!@#$%^&*()", "<tag>", "a.b@c.de"],
}
CODE = ["def encode(self, text):\n    ids = []\n    for word in text.split():\n        ids.append(self.vocab[word])\n    return ids\n",
        "for (int i = 0; i < n; ++i) {\n\tx[i] += y[i] * 2;  // done\n}\n",
        "if x == 0x1F and y != 42:\n\tprint(f\"{x:>8} -> {y}\")\r\n"]
SPACES = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", " \n ", "    \n\n\t", "\u00a0", "\u3000", "\u2003", "\u0085"]
SNIPPETS = ["", " ", "\n", "   trailing   ", "a<|endoftext|>b<|user|>", "<|endoftext|>", "<|endoftext <|endoftext|>|",
            "x<|begin_of_text|>y", "😀" * 40, " " * 500, "q" * 3000, "\t\n\r\n \u0085\u00a0x", "I'M We'LL THEY'RE", "cafe\u0301 \u212b q\u0307\u0323"]


def varied_text(seed=7, characters=12000):
    rng = random.Random(seed)
    parts, size = [], 0
    kinds = list(WORDS)
    while size < characters:
        roll = rng.random()
        if roll < 0.06:
            piece = rng.choice(CODE)
        elif roll < 0.25:
            piece = rng.choice(SPACES)
        else:
            piece = rng.choice(WORDS[rng.choice(kinds)]) + rng.choice([" ", " ", " ", ", ", ". ", "", "\n"])
        parts.append(piece)
        size += len(piece)
    return "".join(parts)


def train(style, text):
    specials = ["<|begin_of_text|>", "<|end_of_text|>"] if style == "llama3" else ["<|endoftext|>", "<|user|>"]
    tokenizer = Tokenizer(models.BPE())
    if style in ("llama3", "qwen2"):
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3_PATTERN if style == "llama3" else QWEN2_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        if style == "qwen2":
            tokenizer.normalizer = normalizers.NFC()
    else:
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=style == "gpt2-prefix", use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1500, min_frequency=1, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(text.splitlines(keepends=True), trainer)
    if style == "llama3":
        bos = tokenizer.token_to_id("<|begin_of_text|>")
        tokenizer.post_processor = processors.TemplateProcessing(
            single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B",
            special_tokens=[("<|begin_of_text|>", bos)])
    else:
        tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    return tokenizer


def glnet_encode(info, tokenizer_path, text, work):
    path = os.path.join(work, "text.txt")
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    result = subprocess.run([info, "--tokenizer", tokenizer_path, "--encode", path], capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(result.stderr.strip())
    return json.loads(result.stdout)


def compare(info, name, path, texts, work):
    reference = Tokenizer.from_file(path)
    differences = ids = 0
    for k, text in enumerate(texts):
        expected = reference.encode(text).ids
        try:
            got = glnet_encode(info, path, text, work)
        except RuntimeError as error:
            print(f"  {name} text {k}: glnet refused it: {error}")
            differences += 1
            continue
        ids += len(expected)
        decoded = reference.decode(expected, skip_special_tokens=False)
        if got["ids"] != expected or got["decoded"] != decoded:
            differences += 1
            if differences <= 5:
                at = next((i for i, (a, b) in enumerate(zip(got["ids"], expected)) if a != b), min(len(got["ids"]), len(expected)))
                print(f"  {name} text {k} ({len(text)} characters): first difference at id {at}: glnet "
                      f"{got['ids'][max(0, at - 3):at + 4]} ({[reference.id_to_token(i) for i in got['ids'][max(0, at - 3):at + 4]]}), "
                      f"tokenizers {expected[max(0, at - 3):at + 4]} ({[reference.id_to_token(i) for i in expected[max(0, at - 3):at + 4]]})"
                      + ("" if got["decoded"] == decoded else "; decodings differ too"))
    print(f"{name}: {len(texts)} texts, {ids} ids, {'all equal' if not differences else f'{differences} differ'}")
    return differences


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("glnet_info", help="path of the glnet_info binary")
    parser.add_argument("--work", help="where to keep the trained tokenizer.json files (default: a temporary folder)")
    parser.add_argument("--extra", nargs="*", default=[], help="more tokenizer.json files to compare on the same texts")
    args = parser.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="tokenizer-check-")
    os.makedirs(work, exist_ok=True)
    text = varied_text()
    texts = [text] + [line for line in text.splitlines(keepends=True) if line.strip()][:150] + SNIPPETS
    print(f"{len(text)} characters of training text; {len(texts)} texts compared per tokenizer; files in {work}")
    failures = 0
    for style in ("gpt2", "gpt2-prefix", "llama3", "qwen2"):
        path = os.path.join(work, f"{style}.json")
        train(style, text).save(path)
        if style == "llama3":  # as Llama 3 ships it: whole words of the vocabulary taken before any merge
            with open(path, encoding="utf-8") as f:
                saved = json.load(f)
            saved["model"]["ignore_merges"] = True
            with open(path, "w", encoding="utf-8") as f:
                json.dump(saved, f, ensure_ascii=False)
        failures += compare(args.glnet_info, style, path, texts, work)
    for path in args.extra:
        failures += compare(args.glnet_info, os.path.basename(path), path, texts, work)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
