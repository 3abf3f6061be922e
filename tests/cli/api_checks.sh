#!/bin/sh
# api_checks.sh APPS_DIR MNIST_DIR: a model trained under one API evaluates to the same predictions under
# the other, for an MLP and the CNN, and under OpenGL ES's minimum limits (GLNET_MINIMUM_DEVICE); the
# commands say which API they run.
set -u
apps=$1 mnist=$2
here=$(dirname "$0")
. "$here/common.sh"
unset GLNET_API GLNET_MINIMUM_DEVICE

# tanh: its saturating tails are where drivers' transcendental functions differ most.
"$apps/glnet_train" --api gl --arch 784-96-10 --activation tanh --data "$mnist" --train-limit 2000 --test-limit 500 \
  --epochs 1 --out "$work/mlp-gl.safetensors" >/dev/null || fail "training an MLP under GL"
"$apps/glnet_train" --api gles --arch cnn --data "$mnist" --train-limit 300 --test-limit 200 --batch 30 --epochs 1 \
  --optimizer momentum --lr 0.05 --out "$work/cnn-gles.safetensors" >/dev/null || fail "training the CNN under ES"
for model in mlp-gl cnn-gles; do
  for run in "gl" "gles" "gles minimum"; do
    set -- $run
    GLNET_MINIMUM_DEVICE=$([ $# -eq 2 ] && echo 1 || echo 0) "$apps/glnet_eval" --api "$1" --model "$work/$model.safetensors" \
      --data "$mnist" --limit 500 --batch 128 --predictions "$work/$model-$1-$#.txt" >"$work/eval.txt" \
      || fail "glnet_eval --api $1 on $model"
  done
  cmp -s "$work/$model-gl-1.txt" "$work/$model-gles-1.txt" || fail "$model: GL and ES predictions differ"
  cmp -s "$work/$model-gl-1.txt" "$work/$model-gles-2.txt" || fail "$model: ES predictions under the minimum limits differ"
  [ "$(wc -l <"$work/$model-gl-1.txt")" -eq 500 ] || fail "$model: not 500 predictions"
done
"$apps/glnet_info" --api gles --elements 1000 >"$work/info.txt" || fail "glnet_info --api gles"
grep -q "OpenGL ES 3" "$work/info.txt" || fail "glnet_info --api gles does not show an OpenGL ES context"
# Without timer queries the times are wall times, and say so.
GLNET_MINIMUM_DEVICE=1 "$apps/glnet_info" --api gles --elements 1000 >"$work/info-minimum.txt" || fail "glnet_info at minimum limits"
grep -q "dispatch [0-9.]* ms wall (no timer queries)" "$work/info-minimum.txt" || fail "a wall time is not marked as such"
grep -q "groups of 128" "$work/info-minimum.txt" || fail "minimum limits do not give groups of 128"
expect 2 "^glnet_eval: error: unknown API 'metal'" -- "$apps/glnet_eval" --api metal --model "$work/mlp-gl.safetensors"
GLNET_API=vulkan expect 1 "^glnet_info: error: unknown API 'vulkan'" -- "$apps/glnet_info"
finish API
