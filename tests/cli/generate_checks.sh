#!/usr/bin/env bash
# glnet_generate on the tiny Hugging Face folders (tests/reference/tiny_decoders.py, with the project's test tokenizer):
# streamed text equals the JSON answer's (the continuations against the model's float64 ones are tests/decoder's), stop
# texts cut the text, --logits writes the prompt's logits, sampling repeats with its seed; every bad input is one line.
# Usage: generate_checks.sh APPS_DIR TINY_DECODERS_DIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh"
apps=$1 models=$2
generate=$apps/glnet_generate
python=/usr/bin/python3

expect 0 "Generates text" -- "$generate" --help
expect 2 "--model is required" -- "$generate" --prompt hi
expect 2 "give the prompt with --prompt TEXT or --prompt-file FILE" -- "$generate" --model "$models/gpt2"
expect 2 "give the prompt" -- "$generate" --model "$models/gpt2" --prompt hi --prompt-file /dev/null
expect 2 "--temperature" -- "$generate" --model "$models/gpt2" --prompt hi --temperature -1
expect 2 "--top-p" -- "$generate" --model "$models/gpt2" --prompt hi --temperature 1 --top-p 1.5
expect 2 "--max-new-tokens" -- "$generate" --model "$models/gpt2" --prompt hi --max-new-tokens 0
expect 1 "config.json" -- "$generate" --model "$work" --prompt hi
expect 1 "not valid UTF-8|UTF-8" -- "$generate" --model "$models/gpt2" --prompt $'\xff\xfe'
expect 1 "leave no room in a context of 4 positions" -- "$generate" --model "$models/gpt2" --prompt "one two three four five six" --max-context 4
mkdir -p "$work/no-tokenizer" && cp "$models/gpt2/config.json" "$models/gpt2/model.safetensors" "$work/no-tokenizer/"
expect 1 "tokenizer.json" -- "$generate" --model "$work/no-tokenizer" --prompt hi

for model in gpt2 llama qwen2; do
  # The streamed text is the JSON answer's text (the stats line goes to stderr).
  "$generate" --model "$models/$model" --prompt "The quick brown fox" --max-new-tokens 12 >"$work/$model.txt" 2>"$work/$model.err" || fail "$model: glnet_generate failed: $(tail -1 "$work/$model.err")"
  "$generate" --model "$models/$model" --prompt "The quick brown fox" --max-new-tokens 12 --json --logits "$work/$model-logits.npy" >"$work/$model.json" 2>/dev/null || fail "$model: --json failed"
  grep -q "tokens/s" "$work/$model.err" || fail "$model: no speed line on stderr"
  "$python" - "$work/$model.txt" "$work/$model.json" "$work/$model-logits.npy" "$models/$model" <<'PY' || fail "$model: streamed text, JSON or logits disagree"
import json, sys
import numpy as np
streamed = open(sys.argv[1], encoding="utf-8", errors="surrogateescape").read()
answer = json.load(open(sys.argv[2]))
assert streamed == answer["text"] + "\n", (streamed, answer["text"])
assert answer["generated_tokens"] == len(answer["generated_ids"]) and 1 <= len(answer["generated_ids"]) <= 12, answer
assert answer["stop_reason"] in ("length", "end of text"), answer["stop_reason"]
config = json.load(open(sys.argv[4] + "/config.json"))
logits = np.load(sys.argv[3])
assert logits.shape == (answer["prompt_tokens"], config["vocab_size"]) and np.isfinite(logits).all(), logits.shape
PY
done

# --profile: one more step timed after the text, every dispatch of it in the report.
"$generate" --model "$models/llama" --prompt "The quick brown fox" --max-new-tokens 6 --profile --json >"$work/profile.json" 2>"$work/profile.err" \
  || fail "--profile failed: $(tail -1 "$work/profile.err")"
"$python" - "$work/profile.json" <<'PY' || fail "--profile's report does not hold the step's dispatches"
import json, sys
answer = json.load(open(sys.argv[1]))
assert answer["decode_step_dispatches"] > 0 and answer["profile"], answer
assert sum(p["count"] for p in answer["profile"]) == answer["decode_step_dispatches"], answer["profile"]
assert all(p["milliseconds"] >= 0 for p in answer["profile"]), answer["profile"]
PY

# Stop texts: the text ends before the first stop text, and none of it is printed.
full=$("$generate" --model "$models/llama" --prompt "The quick brown fox" --max-new-tokens 24 --json 2>/dev/null | "$python" -c "import json,sys; print(json.load(sys.stdin)['text'], end='')")
if [ ${#full} -ge 6 ]; then
  stop=${full:3:2}
  cut=$("$generate" --model "$models/llama" --prompt "The quick brown fox" --max-new-tokens 24 --stop "$stop" --json 2>/dev/null | "$python" -c "import json,sys; a=json.load(sys.stdin); print(a['stop_reason'] + '|' + a['text'], end='')")
  expected_text=${full%%"$stop"*}
  [ "$cut" = "stop text|$expected_text" ] || fail "--stop '$stop': got '$cut', expected 'stop text|$expected_text'"
else
  fail "the llama folder generated too little text to test --stop: '$full'"
fi

# Sampling: the same seed gives the same ids, another seed other ids.
ids() { "$generate" --model "$models/llama" --prompt "The quick brown fox" --max-new-tokens 16 --temperature 1.5 --top-p 0.95 --seed "$1" --json 2>/dev/null | "$python" -c "import json,sys; print(json.load(sys.stdin)['generated_ids'])"; }
first=$(ids 3)
[ -n "$first" ] && [ "$first" = "$(ids 3)" ] || fail "--seed 3 twice gave different ids"
[ "$first" != "$(ids 4)" ] || fail "--seed 3 and --seed 4 gave the same ids"
finish glnet_generate
