#!/bin/sh
# flag_checks.sh APPS_DIR MNIST_DIR: every option of every command (read from its --help) given invalid
# values: a number option gets "abc" and "-1", any other option an empty value and a path that cannot
# exist. Each run either refuses with exit 1 or 2 and exactly one line on stderr, or accepts the value and
# finishes (exit 0) on a small workload; never a crash, a hang or a partial file. glnet_serve accepting a
# value is a server that keeps running, stopped after a few seconds.
set -u
apps=$1 mnist=$2
here=$(dirname "$0")
. "$here/common.sh"
"$apps/glnet_train" --data "$mnist" --arch 784-16-10 --train-limit 64 --test-limit 10 --epochs 1 --out "$work/m.safetensors" \
  >/dev/null 2>&1 || fail "training the model the checks use"
/usr/bin/python3 - "$work" <<'PY' || fail "making the ONNX model the checks use"
import sys
import numpy as np
from onnx import helper, numpy_helper, save, TensorProto
work = sys.argv[1]
graph = helper.make_graph([helper.make_node("Gemm", ["x", "w", "b"], ["y"], name="fc", transB=1)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2])],
                          [numpy_helper.from_array(np.ones((2, 3), np.float32), "w"), numpy_helper.from_array(np.zeros(2, np.float32), "b")])
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), f"{work}/m.onnx")
np.save(f"{work}/x.npy", np.ones((2, 3), np.float32))
PY
runs=0 refused=0 accepted=0
for command in glnet_info glnet_train glnet_eval glnet_predict glnet_bench glnet_serve glnet_examples glnet_run; do
  case $command in
    glnet_info) base="--elements 100" ;;
    glnet_train) base="--data $mnist --train-limit 64 --test-limit 10 --epochs 1 --out $work/out/t.safetensors" ;;
    glnet_eval) base="--model $work/m.safetensors --data $mnist --limit 10" ;;
    glnet_predict) base="--model $work/m.safetensors --data $mnist --mnist-index 0" ;;
    glnet_bench) base="--batches 1 --runs 1 --warmup 0 --elementwise 1000 --training-steps 2" ;;
    glnet_serve) base="--model $work/m.safetensors --port 0" ;;
    glnet_examples) base="xor" ;;
    glnet_run) base="--model $work/m.onnx --input $work/x.npy --output $work/out/y.npy" ;;
  esac
  "$apps/$command" --help | sed -n 's/^  --\([a-z0-9-]*\) \([^ ]*\)$/\1 \2/p' >"$work/options"
  [ -s "$work/options" ] || fail "$command --help lists no option with a value"
  while read -r option placeholder; do
    case $placeholder in
      N|X|RATE|SECONDS|MB|N,N*|N\[*) values="abc -1" ;;
      *) values="EMPTY /nonexistent/dir/x" ;;
    esac
    for value in $values; do
      [ "$value" = EMPTY ] && value=
      mkdir -p "$work/out"
      runs=$((runs + 1))
      # shellcheck disable=SC2086  # base is a list of words
      seconds=60
      [ "$command" = glnet_serve ] && seconds=4
      timeout "$seconds" "$apps/$command" $base "--$option" "$value" </dev/null >"$work/stdout" 2>"$work/stderr"
      code=$?
      if [ "$command" = glnet_serve ] && [ $code -eq 124 ]; then code=0; fi
      case $code in
        0) accepted=$((accepted + 1)) ;;
        1|2)
          refused=$((refused + 1))
          [ "$(wc -l <"$work/stderr")" -eq 1 ] || fail "$command --$option '$value': exit $code with $(wc -l <"$work/stderr") lines on stderr: $(head -3 "$work/stderr")"
          grep -q "^$command: error: " "$work/stderr" || fail "$command --$option '$value': $(cat "$work/stderr")"
          [ -z "$(find "$work/out" -name '*.tmp*')" ] || fail "$command --$option '$value' left a partial file" ;;
        *) fail "$command --$option '$value': exit $code (crash or hang): $(tail -2 "$work/stderr")" ;;
      esac
      rm -rf "$work/out"
    done
  done <"$work/options"
done
echo "$runs runs: $refused refused with one line, $accepted accepted"
finish flag
