#!/usr/bin/env bash
# Every program variant glnet builds, validated by the Khronos reference compiler as GLSL 4.30 and as
# ESSL 3.10: the GL test suite (every op, mode and activation, every GEMM configuration forced in turn) and
# the commands on the MLP and the CNN, on this device and as on a device with only OpenGL ES 3.1's minimum
# limits (smaller groups, the 64x32 GEMM tile), run with GLNET_SHADER_DUMP so that each program's whole
# text is written once per language; then glslangValidator on each.
# Usage: glslang_checks.sh GLSLANG_VALIDATOR GLNET_TESTS BIN_DIR SHADER_DIR MNIST_DIR
set -uo pipefail
validator=$1 tests=$2 bin=$3 shaders=$4 data=$5
here=$(cd "$(dirname "$0")/../cli" && pwd)
. "$here/common.sh"
dump="$work/dump"
export GLNET_SHADER_DUMP="$dump" GLNET_CACHE_DIR="$work/cache"

# The runs only need to build their programs; their own results are checked by the other tests.
"$tests" --test-suite=gl >"$work/tests.log" 2>&1 || fail "the GL test suite failed while dumping (see ctest gl)"
for minimum in 0 1; do
  GLNET_MINIMUM_DEVICE=$minimum "$bin/glnet_train" --data "$data" --arch 784-64-10 --epochs 1 --train-limit 512 --test-limit 100 --batch 64 \
    --out "$work/mlp.safetensors" >"$work/train.log" 2>&1
  GLNET_MINIMUM_DEVICE=$minimum "$bin/glnet_train" --data "$data" --arch cnn --epochs 1 --train-limit 128 --test-limit 64 --batch 32 \
    --out "$work/cnn.safetensors" >"$work/cnn.log" 2>&1
  [ -f "$work/mlp.safetensors" ] && GLNET_MINIMUM_DEVICE=$minimum "$bin/glnet_eval" --model "$work/mlp.safetensors" \
    --data "$data" --limit 100 >"$work/eval.log" 2>&1
done

count=0 invalid=0 gl=0
for file in "$dump"/*.comp; do
  [ -e "$file" ] || break
  name=$(basename "$file")
  # Shaders the tests write themselves (deliberately broken ones among them) are not glnet's.
  [ -f "$shaders/${name%%-*}.glsl" ] || continue
  count=$((count + 1))
  case $name in *.gl.comp) gl=$((gl + 1)) ;; esac
  if ! "$validator" -S comp "$file" >"$work/glslang.log" 2>&1; then
    invalid=$((invalid + 1))
    fail "$name: $(grep -m1 ERROR "$work/glslang.log")"
  fi
done
echo "validated $count program texts ($gl per language) with $("$validator" --version | head -1): $invalid invalid"
[ "$count" -ge 40 ] || fail "only $count program texts were dumped; the runs above did not build what they should"
finish glslang
