#!/bin/sh
# train_checks.sh APPS_DIR MNIST_DIR: glnet_train end to end on a small MNIST subset (llvmpipe-sized).
set -u
apps=$1 mnist=$2
here=$(dirname "$0")
. "$here/common.sh"
json_field() { /usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$1" "$2"; }
# GLNET_CHECKS=core (the sanitized run, hardening.commands, where llvmpipe's every work group allocates through
# AddressSanitizer): the same checks on a third of the images and a tenth of the test set; the accuracy floor is the
# plain run's.
full() { [ "${GLNET_CHECKS:-all}" = all ]; }
if full; then images=3000 tests=10000; else images=1000 tests=1000; fi
train() { "$apps/glnet_train" --data "$mnist" --train-limit $images --test-limit $tests --batch 50 --log-every 20 "$@"; }

# An accuracy floor, and the written model evaluates to the accuracy training reported.
train --out "$work/a.safetensors" --epochs 3 --json >"$work/a.json" || fail "training a subset"
accuracy=$(json_field "$work/a.json" "d['epochs'][-1]['test_accuracy']")
echo "3 epochs on $images images: test accuracy $accuracy"
if full; then
  /usr/bin/python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) >= 0.85 else 1)" "$accuracy" || fail "test accuracy $accuracy below the 0.85 floor"
fi
"$apps/glnet_eval" --model "$work/a.safetensors" --data "$mnist" --limit $tests --json >"$work/eval.json" || fail "evaluating the trained model"
[ "$(json_field "$work/eval.json" "d['accuracy']")" = "$accuracy" ] || fail "glnet_eval disagrees with the accuracy training reported"

# Deterministic for a seed and device; resuming gives exactly what an uninterrupted run gives.
train --out "$work/b.safetensors" --epochs 3 >/dev/null || fail "second run"
cmp -s "$work/a.safetensors" "$work/b.safetensors" || fail "two runs with the same seed differ"
train --out "$work/c.safetensors" --epochs 1 --optimizer momentum --lr 0.05 >/dev/null || fail "one momentum epoch"
train --out "$work/c.safetensors" --epochs 2 --optimizer momentum --lr 0.05 --resume "$work/c.checkpoint.safetensors" >/dev/null || fail "resume"
train --out "$work/d.safetensors" --epochs 2 --optimizer momentum --lr 0.05 >/dev/null || fail "two momentum epochs"
cmp -s "$work/c.safetensors" "$work/d.safetensors" || fail "1 epoch + resume differs from 2 epochs"
# --save-every 3: nothing written after epoch 1, the files of the last epoch (2) all the same.
train --out "$work/s.safetensors" --epochs 2 --optimizer momentum --lr 0.05 --save-every 3 >"$work/s.txt" 2>&1 &&
  [ "$(grep -c '^epoch [12]/2:' "$work/s.txt")" = 2 ] || fail "--save-every 3: $(tail -1 "$work/s.txt")"
cmp -s "$work/s.safetensors" "$work/d.safetensors" || fail "--save-every 3 did not write the last epoch's model"
expect 1 "error: .*the run is complete \(2 of 2" -- \
  "$apps/glnet_train" --data "$mnist" --out "$work/s.safetensors" --epochs 2 --resume "$work/s.checkpoint.safetensors"

# A diverging run stops with the epoch and steps named, and leaves the last checkpoint intact.
before=$(md5sum <"$work/c.checkpoint.safetensors")
expect 1 "error: the loss became (NaN|infinite) in epoch 3 between steps" -- \
  "$apps/glnet_train" --data "$mnist" --train-limit $images --test-limit $tests --batch 50 --out "$work/c.safetensors" --epochs 3 \
  --optimizer momentum --lr 1e30 --resume "$work/c.checkpoint.safetensors"
[ "$(md5sum <"$work/c.checkpoint.safetensors")" = "$before" ] || fail "the checkpoint changed after the NaN"
expect 1 "error: .*checkpoint is architecture 784-128-10, not 784-32-10" -- \
  "$apps/glnet_train" --data "$mnist" --out "$work/e.safetensors" --arch 784-32-10 --optimizer momentum --resume "$work/c.checkpoint.safetensors"
# A flag given anew is used (with a note once the checkpoint has loaded), and checked against the checkpoint.
expect 1 "error: .*trained with --optimizer momentum, not sgd" -- \
  "$apps/glnet_train" --data "$mnist" --out "$work/e.safetensors" --optimizer sgd --epochs 5 --resume "$work/c.checkpoint.safetensors"
expect 1 "error: .*a.safetensors: not a glnet checkpoint" -- \
  "$apps/glnet_train" --data "$mnist" --out "$work/e.safetensors" --resume "$work/a.safetensors"

# Usage errors.
expect 2 "error: --out is required" -- "$apps/glnet_train"
expect 2 "error: --save-every must be an integer from 1 to" -- "$apps/glnet_train" --out x --save-every 0
expect 1 "error: .*no-dir/m.safetensors: cannot write \(no directory" -- "$apps/glnet_train" --data "$mnist" --out "$work/no-dir/m.safetensors"
expect 2 "error: unknown optimizer 'rmsprop'" -- "$apps/glnet_train" --out x --optimizer rmsprop
expect 2 "error: --dataset is mnist, fashion, cifar10, folder, text or ids, not 'cifar'" -- "$apps/glnet_train" --out x --dataset cifar
expect 2 "error: architecture '784-x-10'" -- "$apps/glnet_train" --out x --arch 784-x-10
expect 2 "error: the network '100-10' takes \[100\] inputs \(100 values\) but the images have 784 pixels" -- "$apps/glnet_train" --out x --arch 100-10 --data "$mnist"
expect 2 "error: --lr must be a positive number" -- "$apps/glnet_train" --out x --lr -1

# --tune: the training step's GEMMs tuned first, on this device, into its tuning table beside the program cache, then
# the run trains under it (not in the sanitized run: every candidate compiles its programs afresh); refused where the
# tuning would be ignored or under a forced configuration.
if full; then
  GLNET_TUNE=1 GLNET_CACHE_DIR="$work/tuned-cache" "$apps/glnet_train" --data "$mnist" --train-limit 256 --test-limit 256 --batch 64 \
    --epochs 1 --tune --out "$work/t.safetensors" >"$work/t.txt" 2>"$work/t.err" || { cat "$work/t.err"; fail "glnet_train --tune"; }
  GLNET_TUNE=1 GLNET_CACHE_DIR="$work/tuned-cache" "$apps/glnet_train" --data "$mnist" --train-limit 256 --test-limit 256 --batch 64 \
    --epochs 1 --tune --json --out "$work/tj.safetensors" >"$work/tj.json" 2>/dev/null || fail "glnet_train --tune --json"
  /usr/bin/python3 - "$work/tj.json" <<'PY' || fail "glnet_train --tune --json's gemm_tuning"
import json, os, sys
t = json.load(open(sys.argv[1]))["gemm_tuning"]
assert t["shapes"] == 5 and t["candidates"] >= 2 and 0 <= t["changed"] <= 5 and t["seconds"] > 0 and os.path.isfile(t["path"]), t
assert t["rule_total_ms"] > 0 and t["tuned_total_ms"] > 0 and t["reverted"] in (True, False), t
PY
  grep -Eq "^GEMM tuning of the training step: 5 GEMM shapes under [0-9]+ candidates in [0-9.]+ s, [0-5] kept" "$work/t.txt" \
    || fail "no tuning line: $(cat "$work/t.txt")"
  grep -q "^glnet_train: GEMM tuning of the training step: 64x64 whole" "$work/t.err" || fail "no tuning progress on stderr"
  ls "$work/tuned-cache"/gemm-tuning-*.txt >/dev/null 2>&1 || fail "--tune wrote no tuning table"
  grep -q "^epoch 1/1: " "$work/t.txt" || fail "no epoch after the tuning"
fi
# Checked before minutes of tuning (no table written): a batch larger than the training set.
GLNET_TUNE=1 GLNET_CACHE_DIR="$work/refused-cache" expect 1 "error: --batch 512 is larger than the 256 training images" -- \
  "$apps/glnet_train" --data "$mnist" --train-limit 256 --batch 512 --tune --out "$work/u.safetensors"
ls "$work/refused-cache"/gemm-tuning-*.txt >/dev/null 2>&1 && fail "a refused --tune run tuned first"
GLNET_TUNE=0 expect 2 "error: --tune with GLNET_TUNE=0" -- "$apps/glnet_train" --out "$work/u.safetensors" --tune
GLNET_GEMM_CONFIG=64x64 expect 2 "error: --tune with GLNET_GEMM_CONFIG set" -- "$apps/glnet_train" --out "$work/u.safetensors" --tune

# Killing training at any moment leaves no torn file: what exists loads.
"$apps/glnet_train" --data "$mnist" --train-limit 500 --batch 10 --epochs 1000 --out "$work/k.safetensors" >/dev/null 2>&1 &
pid=$!
sleep 3
kill -9 $pid
wait $pid 2>/dev/null
for file in "$work/k.safetensors" "$work/k.checkpoint.safetensors"; do
  [ -e "$file" ] || continue
  "$apps/glnet_eval" --model "$work/k.safetensors" --data "$mnist" --limit 10 >/dev/null 2>&1 || fail "$file is torn"
done
ls "$work" | grep -q '\.tmp' && echo "note: a killed run leaves its temporary file, never a torn model"

finish training
