#!/usr/bin/env bash
# Every program variant glnet builds, validated by the Khronos reference compiler as GLSL 4.30 and as
# ESSL 3.10: those the GL test suite wrote to DUMP_DIR when it ran (ctest's gl.N and gl.gles_minimum.N: every op, mode
# and activation, every GEMM configuration forced in turn, on this device and as on a device with only OpenGL ES
# 3.1's minimum limits), and those of the commands on the MLP and the CNN, run here on both devices with
# GLNET_SHADER_DUMP, which writes each program's whole text once per language; then glslangValidator on each.
# Usage: glslang_checks.sh GLSLANG_VALIDATOR DUMP_DIR BIN_DIR SHADER_DIR MNIST_DIR
set -uo pipefail
validator=$1 dump=$2 bin=$3 shaders=$4 data=$5
here=$(cd "$(dirname "$0")/../cli" && pwd)
. "$here/common.sh"
export GLNET_SHADER_DUMP="$dump" GLNET_CACHE_DIR="$work/cache"

[ -n "$(find "$dump" -name 'ForwardPass-*.comp' -print -quit 2>/dev/null)" ] ||
  fail "$dump holds no program the GL test suite wrote: run ctest's gl.N parts first (ctest -R shaders.glslang does)"
# The runs only need to build their programs; their own results are checked by the other tests.
for minimum in 0 1; do
  GLNET_MINIMUM_DEVICE=$minimum "$bin/glnet_train" --data "$data" --arch 784-64-10 --epochs 1 --train-limit 512 --test-limit 100 --batch 64 \
    --out "$work/mlp.safetensors" >"$work/train.log" 2>&1
  GLNET_MINIMUM_DEVICE=$minimum "$bin/glnet_train" --data "$data" --arch cnn --epochs 1 --train-limit 128 --test-limit 64 --batch 32 \
    --out "$work/cnn.safetensors" >"$work/cnn.log" 2>&1
  [ -f "$work/mlp.safetensors" ] && GLNET_MINIMUM_DEVICE=$minimum "$bin/glnet_eval" --model "$work/mlp.safetensors" \
    --data "$data" --limit 100 >"$work/eval.log" 2>&1
done

count=0 gl=0
: >"$work/files"
for file in "$dump"/*.comp; do
  [ -e "$file" ] || break
  name=$(basename "$file")
  # Shaders the tests write themselves (deliberately broken ones among them) are not glnet's.
  [ -f "$shaders/${name%%-*}.glsl" ] || continue
  count=$((count + 1))
  case $name in *.gl.comp) gl=$((gl + 1)) ;; esac
  echo "$file" >>"$work/files"
done
# Many files per run of the validator (its start costs 0.17 s, a whole file's check a few ms): it prints each file's
# name, then that file's errors.
xargs "$validator" -S comp <"$work/files" >"$work/glslang.log" 2>&1
status=$?
awk '/[.]comp$/ { file = $0; next } /^ERROR: / && file != reported { print file ": " $0; reported = file }' \
  "$work/glslang.log" >"$work/invalid"
invalid=$(wc -l <"$work/invalid")
while read -r line; do fail "$line"; done <"$work/invalid"
# A failure with no ERROR line to show (the validator itself failing) still fails.
[ "$status" -eq 0 ] || [ "$invalid" -gt 0 ] || fail "glslangValidator exited with $status: $(tail -1 "$work/glslang.log")"
echo "validated $count program texts ($gl per language) with $("$validator" --version | head -1): $invalid invalid"
[ "$count" -ge 40 ] || fail "only $count program texts were dumped; the runs above did not build what they should"
finish glslang
