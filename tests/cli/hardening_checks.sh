#!/bin/sh
# hardening_checks.sh APPS_DIR MNIST_DIR: failures that come from the machine rather than the input. Sizes
# past what the device binds, a full disk (a file-size limit), outputs that cannot be written, a bad
# watchdog setting, corrupted program-binary cache entries, and training killed with SIGKILL at random
# moments while it checkpoints: each failure is one line and exit 1, the previous files stay intact, and no
# partial file is left.
set -u
apps=$1 mnist=$2
here=$(dirname "$0")
. "$here/common.sh"
train() { "$apps/glnet_train" --data "$mnist" --test-limit 100 "$@"; }

# Sizes: refused before allocating, naming the size asked and the limit.
expect 1 "error: layer fc2 of 784-65536-65536-10 needs a 65536 x 65536 weight of 17179869184 bytes; .* at most 2147483647" \
  -- "$apps/glnet_train" --data "$mnist" --arch 784-65536-65536-10 --out "$work/huge.safetensors"
expect 1 "error: tensor images \[60000, 784\] needs 188160000 bytes; this device binds at most [0-9]+ bytes|error: tensor .* needs [0-9]+ bytes; this device binds at most" \
  -- "$apps/glnet_train" --data "$mnist" --arch 784-30000-10 --full-batch --epochs 1 --out "$work/huge.safetensors"
[ -e "$work/huge.safetensors" ] && fail "a refused run wrote its model"

# A model at --out survives every run that fails before its first checkpoint.
train --arch 784-32-10 --train-limit 640 --epochs 1 --out "$work/model.safetensors" >/dev/null 2>&1 || fail "training the first model"
cp "$work/model.safetensors" "$work/model.copy"
expect 1 "error: .*nowhere" -- "$apps/glnet_train" --data "$work/nowhere" --arch 784-32-10 --out "$work/model.safetensors"
expect 1 "error: .*(NaN|not finite|diverged)" -- "$apps/glnet_train" --data "$mnist" --test-limit 100 --arch 784-32-10 \
  --train-limit 640 --lr 1e30 --epochs 1 --out "$work/model.safetensors"
cmp -s "$work/model.safetensors" "$work/model.copy" || fail "a failed run changed the model at --out"

# A full disk, as a file-size limit (ulimit -f, in blocks of 512 or 1024 bytes): one line, the previous file intact.
limit='ulimit -f "$0"; exec "$@"'  # sh -c "$limit" BLOCKS COMMAND...
expect 1 "error: .*model(\.checkpoint)?\.safetensors: writing [0-9]+ bytes failed \(File too large\); the previous file, if any, is untouched" \
  -- sh -c "$limit" 16 "$apps/glnet_train" --data "$mnist" --test-limit 100 --arch 784-128-10 --train-limit 640 --epochs 1 --out "$work/model.safetensors"
cmp -s "$work/model.safetensors" "$work/model.copy" || fail "a write that ran out of space changed the previous model"
# A real full disk where this user may mount a small tmpfs (root in a container, usually).
mkdir "$work/disk"
if mount -t tmpfs -o size=256k tmpfs "$work/disk" 2>/dev/null; then
  cp "$work/model.copy" "$work/disk/model.safetensors" || fail "the previous model does not fit the small disk"
  expect 1 "error: .*disk/model(\.checkpoint)?\.safetensors: writing [0-9]+ bytes failed \(No space left on device\); the previous file, if any, is untouched" \
    -- "$apps/glnet_train" --data "$mnist" --test-limit 100 --arch 784-128-10 --train-limit 640 --epochs 1 --out "$work/disk/model.safetensors"
  cmp -s "$work/disk/model.safetensors" "$work/model.copy" || fail "a write to a full disk changed the previous model"
  [ -z "$(find "$work/disk" -name '*.tmp*')" ] || fail "a write to a full disk left a partial file"
  umount "$work/disk"
  echo "full disk: checked on a 256 KiB tmpfs"
else
  echo "full disk: no tmpfs can be mounted here; checked by the file-size limit only"
fi
printf 'old predictions\n' >"$work/predictions.txt"
expect 1 "error: .*predictions.txt: writing [0-9]+ bytes failed \(File too large\)" \
  -- sh -c "$limit" 4 "$apps/glnet_eval" --model "$work/model.safetensors" --data "$mnist" --predictions "$work/predictions.txt"
[ "$(cat "$work/predictions.txt")" = "old predictions" ] || fail "a failed write changed the previous predictions"
# (glnet_bench reports progress on stderr, so the error is its last line there rather than its only one.)
sh -c "$limit" 1 "$apps/glnet_bench" --batches 1 --runs 1 --warmup 0 --json-out "$work/bench.json" >/dev/null 2>"$work/bench.err"
[ $? -eq 1 ] || fail "glnet_bench with a full disk did not exit 1"
tail -1 "$work/bench.err" | grep -Eq "error: .*bench.json: writing [0-9]+ bytes failed \(File too large\)" || fail "glnet_bench: $(tail -1 "$work/bench.err")"
[ -e "$work/bench.json" ] && fail "glnet_bench left a partial bench.json"

# Outputs that cannot be written are refused before the work starts.
expect 1 "error: .*no-dir/m.safetensors: cannot write \(no directory" -- "$apps/glnet_train" --data "$mnist" --arch 784-32-10 --out "$work/no-dir/m.safetensors"
expect 1 "error: /proc/glnet(\.checkpoint)?\.safetensors: cannot write" -- "$apps/glnet_train" --data "$mnist" --arch 784-32-10 --train-limit 64 --epochs 1 --out /proc/glnet.safetensors
expect 1 "error: GLNET_GPU_TIMEOUT_S must be a positive number of seconds, not 'soon'" -- env GLNET_GPU_TIMEOUT_S=soon "$apps/glnet_eval" --model "$work/model.safetensors" --data "$mnist" --limit 10

# Corrupted program-binary cache entries are compiled afresh and replaced.
GLNET_CACHE_DIR="$work/cache" "$apps/glnet_eval" --model "$work/model.safetensors" --data "$mnist" --limit 100 >"$work/first.txt" 2>&1 || fail "eval filling the cache"
entries=$(find "$work/cache" -name '*.bin' | wc -l)
[ "$entries" -gt 0 ] || fail "no program binaries were cached"
for entry in "$work/cache"/*.bin; do
  head -c 100 /dev/urandom >"$entry"
done
GLNET_CACHE_DIR="$work/cache" expect 0 "accuracy" -- "$apps/glnet_eval" --model "$work/model.safetensors" --data "$mnist" --limit 100
for entry in "$work/cache"/*.bin; do
  [ "$(wc -c <"$entry")" -gt 100 ] || fail "a corrupted cache entry was not replaced"
done

# SIGKILL at random moments of a run that checkpoints every epoch, five times: the checkpoint is absent or
# loads (training resumes from it), and what a killed writer left is cleared by the next write.
present=0
for attempt in 1 2 3 4 5; do
  rm -f "$work"/run.*
  # The command itself in the background (not through a shell function, whose subshell the kill would hit).
  "$apps/glnet_train" --data "$mnist" --test-limit 100 --arch 784-64-10 --train-limit 1280 --epochs 400 \
    --out "$work/run.safetensors" >/dev/null 2>&1 &
  pid=$!
  # Once the first checkpoint exists (slow builds, sanitizers, take longer to get there), at a random moment
  # of the epochs that follow, each of which ends by writing the checkpoint and the model again.
  waited=0
  while [ ! -e "$work/run.checkpoint.safetensors" ] && [ $waited -lt 600 ] && kill -0 "$pid" 2>/dev/null; do
    sleep 0.1; waited=$((waited + 1))
  done
  sleep "$(awk -v seed="$$$attempt" 'BEGIN { srand(seed); printf "%.2f", 0.05 + 1.5 * rand() }')"
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  if [ -e "$work/run.checkpoint.safetensors" ]; then
    present=$((present + 1))
    # The previous attempt's log removed first: its "resumed from" would end the wait below before this run
    # has even opened the file.
    rm -f "$work/resume.txt"
    "$apps/glnet_train" --data "$mnist" --test-limit 100 --arch 784-64-10 --train-limit 64 --epochs 400 \
      --resume "$work/run.checkpoint.safetensors" --out "$work/run.safetensors" >"$work/resume.txt" 2>&1 &
    resumed=$!
    # Until it says it resumed (a sanitized build beside another test takes seconds to start), then stopped.
    waited=0
    while ! grep -qs "resumed from" "$work/resume.txt" && [ $waited -lt 600 ] && kill -0 "$resumed" 2>/dev/null; do
      sleep 0.1; waited=$((waited + 1))
    done
    kill -9 "$resumed" 2>/dev/null
    wait "$resumed" 2>/dev/null
    grep -qs "resumed from" "$work/resume.txt" || fail "attempt $attempt: the checkpoint left by a killed run does not load: $(tail -1 "$work/resume.txt" 2>/dev/null)"
  fi
  [ -e "$work/run.safetensors" ] && { "$apps/glnet_eval" --model "$work/run.safetensors" --data "$mnist" --limit 10 >/dev/null 2>&1 \
    || fail "attempt $attempt: the model left by a killed run does not load"; }
done
echo "killed 5 runs at random moments: a checkpoint existed in $present, each loaded"
[ "$present" -gt 0 ] || fail "no kill happened after a checkpoint: the check proved nothing"
train --arch 784-64-10 --train-limit 64 --epochs 1 --out "$work/run.safetensors" >/dev/null 2>&1 || fail "a run after the kills"
leftovers=$(find "$work" -name 'run.safetensors.tmp*' | wc -l)
[ "$leftovers" -eq 0 ] || fail "$leftovers temporary files of killed writers were not cleared"
finish hardening
