#!/bin/sh
# tokenizer_checks.sh APPS_DIR TOKENIZER_DATA_DIR: `glnet_info --tokenizer FILE --encode TEXTFILE` (left out of --help;
# bench/tokenizer_check.py compares it with Hugging Face's `tokenizers`) gives the ids that
# tests/reference/make_tokenizer.py's own encoder stored in expected.json, with the text back as their decoding; and
# refuses a missing file, a tokenizer.json it does not implement and text that is not UTF-8 in one line.
set -u
apps=$1
data=$2
here=$(dirname "$0")
. "$here/common.sh"

# Each case of each file: its text written out, the command's JSON compared with the stored ids.
/usr/bin/python3 - "$apps/glnet_info" "$data" "$work" <<'PY' || fail "ids or decoding differ from expected.json"
import json, os, subprocess, sys
info, data, work = sys.argv[1:]
expected = json.load(open(os.path.join(data, "expected.json"), encoding="utf-8"))
bad = 0
for name, cases in expected.items():
    for k, case in enumerate(cases):
        path = os.path.join(work, f"text-{k}.txt")
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(case["text"])
        got = json.loads(subprocess.run([info, "--tokenizer", os.path.join(data, name), "--encode", path],
                                        check=True, capture_output=True).stdout)
        start = "<|begin_of_text|>" if name.startswith("llama3") else ""
        if got["ids"] != case["ids"] or (name == "tokenizer.json" and got["decoded"] != start + case["text"]):
            print(f"{name} case {k}: ids {got['ids'][:20]}..., expected {case['ids'][:20]}...")
            bad += 1
print(f"{sum(len(c) for c in expected.values())} texts compared, {bad} differ")
sys.exit(1 if bad else 0)
PY

printf 'abc \377 def' >"$work/not-utf8.txt"
expect 1 "^glnet_info: error: $work/not-utf8.txt: the text to encode is not valid UTF-8 \(at byte 4\)$" -- \
  "$apps/glnet_info" --tokenizer "$data/tokenizer.json" --encode "$work/not-utf8.txt"
expect 1 "^glnet_info: error: $work/none.json: no such file" -- "$apps/glnet_info" --tokenizer "$work/none.json" --encode "$work/not-utf8.txt"
sed 's/"type": "BPE"/"type": "WordPiece"/' "$data/tokenizer.json" >"$work/wordpiece.json"
expect 1 "^glnet_info: error: $work/wordpiece.json: model.type 'WordPiece' is not supported \(only BPE\)$" -- \
  "$apps/glnet_info" --tokenizer "$work/wordpiece.json" --encode "$work/not-utf8.txt"
expect 2 "^glnet_info: error: --tokenizer and --encode go together" -- "$apps/glnet_info" --encode "$work/not-utf8.txt"
"$apps/glnet_info" --help | grep -q -- "--tokenizer" && fail "--help lists --tokenizer, which is for the project's checks"
finish tokenizer
