#!/bin/sh
# net_checks.sh APPS_DIR MNIST_DIR EXAMPLES_DIR: described networks (glnet_train --net, --arch lenet5/resnet8) train on
# small MNIST subsets (llvmpipe-sized), evaluate to the accuracy training reported, repeat bit for bit, resume, and
# refuse broken descriptions in one line.
set -u
apps=$1 mnist=$2 examples=$3
here=$(dirname "$0")
. "$here/common.sh"
json_field() { /usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$1" "$2"; }
at_least() { /usr/bin/python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) >= float(sys.argv[2]) else 1)" "$1" "$2"; }
train() { "$apps/glnet_train" --data "$mnist" --test-limit 300 --optimizer momentum --lr 0.05 --batch 32 --log-every 1000 "$@"; }

# Each network learns (chance is 0.10), and its model file evaluates to the accuracy training reported. Under desktop
# GL only: these five trainings were 4-5 minutes of CI per API, and under OpenGL ES the gl.gles suite checks every op's
# forward and backward pass and a described network's training steps against float64 (what differs between the APIs
# is the shader text); the rest of this script runs under both.
learns() {
  floor=$1
  shift
  train "$@" --out "$work/m.safetensors" --json >"$work/m.json" || { fail "training $*"; return; }
  accuracy=$(json_field "$work/m.json" "d['epochs'][-1]['test_accuracy']")
  echo "$*: test accuracy $accuracy"
  at_least "$accuracy" "$floor" || fail "$*: test accuracy $accuracy below $floor"
  "$apps/glnet_eval" --model "$work/m.safetensors" --data "$mnist" --limit 300 --json >"$work/eval.json" || fail "evaluating $*"
  [ "$(json_field "$work/eval.json" "d['accuracy']")" = "$accuracy" ] || fail "$*: glnet_eval disagrees with training"
}
if [ "${GLNET_API:-gl}" = gl ]; then
  learns 0.6 --arch lenet5 --train-limit 2000 --epochs 2
  learns 0.35 --arch resnet8 --train-limit 512 --batch 16 --lr 0.02 --epochs 2
  learns 0.5 --net "$examples/nets/small-resnet.json" --train-limit 1000 --epochs 2
  learns 0.35 --net "$examples/nets/mobilenet-block.json" --train-limit 1000 --epochs 2 --optimizer adam --lr 0.01
  learns 0.5 --net "$examples/nets/inception-block.json" --train-limit 1000 --epochs 2
  learns 0.6 --net "$examples/nets/row-transformer.json" --train-limit 1000 --epochs 2 --optimizer adamw --lr 0.003
fi

# A transformer on text: JSON lines tokenized with a tokenizer.json (the tests' byte-level BPE, 559 ids, padding with
# <|endoftext|> = 556), whether a text names the number seven; it learns, evaluates to the accuracy training reported
# (names as classes), and the data's errors are one line.
/usr/bin/python3 - "$work" <<'PY'
import json, random, sys
r = random.Random(4)
words = ["one", "two", "three", "four", "five", "six", "eight", "nine", "ten"]
for name, count in (("train", 1200), ("test", 300)):
    with open(f"{sys.argv[1]}/{name}.jsonl", "w") as f:
        for _ in range(count):
            text = [r.choice(words) for _ in range(r.randint(2, 5))]
            seven = r.random() < 0.5
            if seven:
                text[r.randrange(len(text))] = "seven"
            f.write(json.dumps({"text": " ".join(text), "label": "seven" if seven else "other"}) + "\n")
layers = [{"name": "embed", "kind": "embedding", "vocabulary": 559, "outputs": 16}, {"name": "position", "kind": "position"},
          {"name": "mask", "kind": "mask", "pad": 556, "inputs": ["input"]},
          {"name": "ln", "kind": "layernorm", "inputs": ["position"]},
          {"name": "attn", "kind": "attention", "heads": 2, "inputs": ["ln", "mask"]},
          {"name": "res", "kind": "add", "inputs": ["attn", "position"]}, {"name": "norm", "kind": "layernorm"},
          {"name": "summary", "kind": "first"}, {"name": "fc", "kind": "dense", "outputs": 2}]
json.dump({"name": "seven", "input": [24], "layers": layers}, open(f"{sys.argv[1]}/seven.json", "w"))
PY
tokenizer="$here/../data/tokenizer/tokenizer.json"
text() { "$apps/glnet_train" --net "$work/seven.json" --dataset text --data "$work" --tokenizer "$tokenizer" --batch 32 --log-every 1000 "$@"; }
text --epochs 3 --optimizer adamw --lr 0.01 --out "$work/seven.safetensors" --json >"$work/seven-run.json" || fail "training on text"
accuracy=$(json_field "$work/seven-run.json" "d['epochs'][-1]['test_accuracy']")
echo "text (seven or not): test accuracy $accuracy"
at_least "$accuracy" 0.9 || fail "the text classifier's test accuracy $accuracy is below 0.9"
"$apps/glnet_eval" --model "$work/seven.safetensors" --dataset text --data "$work" --tokenizer "$tokenizer" --json >"$work/seven-eval.json" ||
  fail "evaluating the text classifier"
[ "$(json_field "$work/seven-eval.json" "d['accuracy']")" = "$accuracy" ] || fail "glnet_eval disagrees with training on text"
# glnet_predict classifies texts given as arguments, with the same tokenization.
"$apps/glnet_predict" --model "$work/seven.safetensors" --tokenizer "$tokenizer" "one seven two" "four five six" >"$work/texts.txt" ||
  fail "predicting texts"
grep -q "^text 1: 1 seven" "$work/texts.txt" && grep -q "^text 2: 0 other" "$work/texts.txt" || fail "glnet_predict misreads texts: $(cat "$work/texts.txt")"
expect 2 "error: the model reads token ids: give --tokenizer tokenizer.json and texts" -- "$apps/glnet_predict" --model "$work/seven.safetensors" "seven"
expect 2 "error: --dataset text needs --data DIR" -- "$apps/glnet_train" --net "$work/seven.json" --dataset text --out "$work/x.safetensors"
textFlags="--net $work/seven.json --dataset text --data $work --tokenizer $tokenizer --out $work/x.safetensors"
# shellcheck disable=SC2086
expect 2 "error: --pad-id 3 differs from the padding id 556 that the network's mask layers hide" -- "$apps/glnet_train" $textFlags --pad-id 3
expect 2 "error: the network 'seven' reads token ids \(an embedding layer on its input\), not the images of --dataset mnist" -- \
  "$apps/glnet_train" --net "$work/seven.json" --data "$mnist" --out "$work/x.safetensors"
expect 2 "error: --tokenizer is for --dataset text" -- "$apps/glnet_train" --data "$mnist" --tokenizer "$tokenizer" --out "$work/x.safetensors"
printf '{"text": "one", "label": "seven"}\n{"text": "two"}\n' >"$work/train.jsonl"
# shellcheck disable=SC2086
expect 1 "error: .*train.jsonl line 2: a line is an object with \"text\" and \"label\"$" -- "$apps/glnet_train" $textFlags

# --export-onnx: ONNX's checker accepts the file (shapes inferred), glnet's importer evaluates it to the model file's
# accuracy, and its float64 reference agrees with the GPU (glnet_run --check).
train --net "$examples/nets/small-resnet.json" --train-limit 256 --epochs 1 --out "$work/x.safetensors" --export-onnx "$work/x.onnx" \
  >"$work/export.txt" || fail "training with --export-onnx"
grep -Eq "^wrote .*/x.safetensors \(checkpoint .*/x.checkpoint.safetensors\) and .*/x.onnx$" "$work/export.txt" ||
  fail "glnet_train does not say it wrote the ONNX file: $(tail -1 "$work/export.txt")"
"$apps/glnet_predict" --model "$work/x.safetensors" --data "$mnist" --mnist-index 0,1 >"$work/predict.txt" || fail "predicting with a described model"
/usr/bin/python3 -c "import onnx, sys; onnx.checker.check_model(onnx.load(sys.argv[1]), full_check=True)" "$work/x.onnx" || fail "ONNX's checker refuses the export"
"$apps/glnet_eval" --model "$work/x.safetensors" --data "$mnist" --limit 300 --json >"$work/x-eval.json" || fail "evaluating the model file"
"$apps/glnet_eval" --model "$work/x.onnx" --data "$mnist" --limit 300 --json >"$work/x-onnx-eval.json" || fail "evaluating the ONNX export"
[ "$(json_field "$work/x-eval.json" "d['accuracy']")" = "$(json_field "$work/x-onnx-eval.json" "d['accuracy']")" ] ||
  fail "the ONNX export evaluates to another accuracy than the model file"
/usr/bin/python3 -c "import numpy, sys; numpy.save(sys.argv[1], numpy.random.default_rng(1).normal(size=(5, 1, 28, 28)).astype(numpy.float32))" "$work/x.npy"
"$apps/glnet_run" --model "$work/x.onnx" --input "$work/x.npy" --output "$work/y.npy" --check --json >"$work/run.json" || fail "glnet_run on the export"
/usr/bin/python3 -c "
import json, sys; c = json.load(open(sys.argv[1]))['check']
sys.exit(0 if c['max_abs_difference'] <= 1e-4 * max(c['max_abs_reference'], 1) else 1)" "$work/run.json" || fail "the export's GPU run differs from float64"

# SiLU, HardSwish (after a depthwise convolution) and Gelu train, and export as ONNX that evaluates alike.
printf '{"input": [1, 28, 28], "layers": [
  {"name": "c1", "kind": "conv", "outputs": 8, "kernel": 3, "stride": 2}, {"name": "a1", "kind": "silu"},
  {"name": "c2", "kind": "conv", "outputs": 8, "kernel": 3, "stride": 2, "groups": 8}, {"name": "a2", "kind": "hardswish"},
  {"name": "fc1", "kind": "dense", "outputs": 32}, {"name": "a3", "kind": "gelu"}, {"name": "fc2", "kind": "dense", "outputs": 10}]}' >"$work/act.json"
train --net "$work/act.json" --train-limit 1000 --epochs 2 --optimizer adam --lr 0.01 --out "$work/act.safetensors" \
  --export-onnx "$work/act.onnx" --json >"$work/act-run.json" || fail "training SiLU, HardSwish and Gelu"
at_least "$(json_field "$work/act-run.json" "d['epochs'][-1]['test_accuracy']")" 0.6 || fail "SiLU, HardSwish and Gelu do not learn"
/usr/bin/python3 -c "import onnx, sys; onnx.checker.check_model(onnx.load(sys.argv[1]), full_check=True)" "$work/act.onnx" || fail "ONNX's checker refuses the activations' export"
for file in "$work/act.safetensors" "$work/act.onnx"; do "$apps/glnet_eval" --model "$file" --data "$mnist" --limit 300 --json >"$file.json"; done
[ "$(json_field "$work/act.safetensors.json" "d['accuracy']")" = "$(json_field "$work/act.onnx.json" "d['accuracy']")" ] ||
  fail "the activations' ONNX export evaluates to another accuracy than its model file"

# Concatenation and dropout export too (Concat, and Dropout that runs as the identity).
train --net "$examples/nets/inception-block.json" --train-limit 300 --epochs 1 --out "$work/inception.safetensors" \
  --export-onnx "$work/inception.onnx" >/dev/null || fail "exporting the inception block"
/usr/bin/python3 -c "import onnx, sys; onnx.checker.check_model(onnx.load(sys.argv[1]), full_check=True)" "$work/inception.onnx" ||
  fail "ONNX's checker refuses the inception block's export"
for file in "$work/inception.safetensors" "$work/inception.onnx"; do "$apps/glnet_eval" --model "$file" --data "$mnist" --limit 300 --json >"$file.json"; done
[ "$(json_field "$work/inception.safetensors.json" "d['accuracy']")" = "$(json_field "$work/inception.onnx.json" "d['accuracy']")" ] ||
  fail "the inception block's ONNX export evaluates to another accuracy than its model file"

for arch in 784-32-10 cnn; do
  train --arch "$arch" --train-limit 300 --epochs 1 --out "$work/$arch.safetensors" --export-onnx "$work/$arch.onnx" >/dev/null || fail "exporting $arch"
  for file in "$work/$arch.safetensors" "$work/$arch.onnx"; do "$apps/glnet_eval" --model "$file" --data "$mnist" --limit 300 --json >"$file.json"; done
  [ "$(json_field "$work/$arch.safetensors.json" "d['accuracy']")" = "$(json_field "$work/$arch.onnx.json" "d['accuracy']")" ] ||
    fail "the ONNX export of $arch evaluates to another accuracy than its model file"
done

# The same seed gives the same model bit for bit; one epoch and a resume give what two epochs give.
small="--net $examples/nets/small-resnet.json --train-limit 256"
# shellcheck disable=SC2086
train $small --epochs 2 --out "$work/a.safetensors" >/dev/null || fail "run a"
# shellcheck disable=SC2086
train $small --epochs 2 --out "$work/b.safetensors" >/dev/null || fail "run b"
cmp -s "$work/a.safetensors" "$work/b.safetensors" || fail "two runs of a described network with the same seed differ"
# shellcheck disable=SC2086
train $small --epochs 1 --out "$work/c.safetensors" >/dev/null || fail "one epoch"
# shellcheck disable=SC2086
train $small --epochs 2 --out "$work/c.safetensors" --resume "$work/c.checkpoint.safetensors" >/dev/null || fail "resume"
cmp -s "$work/a.safetensors" "$work/c.safetensors" || fail "1 epoch + resume differs from 2 epochs"

# Broken descriptions: one line, naming the file, the layer and what is wrong.
printf '{"input": [1, 28, 28], "layers": [{"name": "c", "kind": "conv", "outputs": 4, "kernel": 3},
  {"name": "sum", "kind": "add", "inputs": ["c", "input"]}, {"name": "fc", "kind": "dense", "outputs": 10}]}' >"$work/shape.json"
expect 1 "error: .*shape.json: layer 'sum': add takes two tensors of one shape; got \[1, 4, 28, 28\] and \[1, 1, 28, 28\]$" -- \
  "$apps/glnet_train" --data "$mnist" --out "$work/x.safetensors" --net "$work/shape.json"
printf '{"input": [1, 28, 28], "layers": [{"name": "c", "kind": "convolution"}]}' >"$work/kind.json"
expect 1 "error: .*kind.json: layer 'c': \"kind\" must be one of add, attention, avgpool, batchnorm, concat, conv" -- \
  "$apps/glnet_train" --data "$mnist" --out "$work/x.safetensors" --net "$work/kind.json"
printf '{"input": [3, 32, 32], "layers": [{"name": "fc", "kind": "dense", "outputs": 10}]}' >"$work/cifar.json"
expect 2 "error: the network 'net' takes \[3, 32, 32\] inputs \(3072 values\) but the images have 784 pixels" -- \
  "$apps/glnet_train" --data "$mnist" --out "$work/x.safetensors" --net "$work/cifar.json"
printf '{"input": [1, 28, 28], "layers": [' >"$work/torn.json"
expect 1 "error: .*torn.json is not valid JSON" -- "$apps/glnet_train" --data "$mnist" --out "$work/x.safetensors" --net "$work/torn.json"
expect 1 "error: .*act.safetensors: tensor c1.bias is not one of the network small-resnet's$" -- \
  "$apps/glnet_train" --data "$mnist" --out "$work/x.safetensors" --net "$examples/nets/small-resnet.json" --init "$work/act.safetensors"
expect 1 "error: .*missing.json" -- "$apps/glnet_train" --data "$mnist" --out "$work/x.safetensors" --net "$work/missing.json"
finish "described-network"
