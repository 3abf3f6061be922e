#!/bin/sh
# bad_inputs.sh APPS_DIR MNIST_DIR: every bad input to glnet_predict and glnet_eval is one line on stderr
# with exit code 1 (2 for usage), and no partial output file is left behind.
set -u
apps=$1 mnist=$2
here=$(dirname "$0")
. "$here/common.sh"

# A valid small model and data directory to vary one thing at a time.
/usr/bin/python3 - "$work/model.safetensors" <<'PY'
import json, struct, sys
import numpy as np
rng = np.random.default_rng(0)
t = {"fc1.weight": rng.standard_normal((10, 784)).astype("<f4"), "fc1.bias": np.zeros(10, "<f4")}
h, off, blobs = {}, 0, []
for k, v in t.items():
    b = v.tobytes(); h[k] = {"dtype": "F32", "shape": list(v.shape), "data_offsets": [off, off + len(b)]}; off += len(b); blobs.append(b)
s = json.dumps(h).encode()
open(sys.argv[1], "wb").write(struct.pack("<Q", len(s)) + s + b"".join(blobs))
PY
printf 'garbage' >"$work/garbage.safetensors"
head -c 3000 "$work/model.safetensors" >"$work/truncated.safetensors"
mkdir "$work/truncated" "$work/magic" "$work/mismatch"
head -c 100000 "$mnist/t10k-images-idx3-ubyte" >"$work/truncated/t10k-images-idx3-ubyte"
cp "$mnist/t10k-labels-idx1-ubyte" "$work/truncated/"
{ printf '\022\064'; tail -c +3 "$mnist/t10k-images-idx3-ubyte"; } >"$work/magic/t10k-images-idx3-ubyte"
cp "$mnist/t10k-labels-idx1-ubyte" "$work/magic/"
cp "$mnist/t10k-images-idx3-ubyte" "$work/mismatch/"
head -c 5008 "$mnist/t10k-labels-idx1-ubyte" | { printf '\000\000\010\001\000\000\023\210'; tail -c +9; } >"$work/mismatch/t10k-labels-idx1-ubyte"
printf 'not an image' >"$work/notes.png"

expect 2 "error: --model is required" -- "$apps/glnet_eval"
expect 2 "error: --batch must be an integer" -- "$apps/glnet_eval" --model "$work/model.safetensors" --batch 0
expect 2 "error: unknown option --frobnicate" -- "$apps/glnet_eval" --frobnicate
expect 2 "error: --split is test or train" -- "$apps/glnet_eval" --model "$work/model.safetensors" --split dev
expect 1 "error: .*missing.safetensors: no such file" -- "$apps/glnet_eval" --model "$work/missing.safetensors"
expect 1 "error: .*garbage.safetensors: too short" -- "$apps/glnet_eval" --model "$work/garbage.safetensors"
expect 1 "error: .*truncated.safetensors: not a safetensors file|run past the end" -- "$apps/glnet_eval" --model "$work/truncated.safetensors"
expect 1 "error: .*t10k-images-idx3-ubyte: truncated" -- "$apps/glnet_eval" --model "$work/model.safetensors" --data "$work/truncated"
expect 1 "error: .*t10k-images-idx3-ubyte: not an IDX file" -- "$apps/glnet_eval" --model "$work/model.safetensors" --data "$work/magic"
expect 1 "error: .*5000 labels for 10000 images" -- "$apps/glnet_eval" --model "$work/model.safetensors" --data "$work/mismatch"
expect 1 "error: .*nowhere: no such directory; run scripts/fetch-mnist \(it writes data/mnist\), or point --data at a directory of IDX files$" -- "$apps/glnet_eval" --model "$work/model.safetensors" --data "$work/nowhere"
expect 1 "error: .*predictions.txt: cannot write" -- "$apps/glnet_eval" --model "$work/model.safetensors" --data "$mnist" --limit 10 --predictions "$work/no-dir/predictions.txt"
expect 0 "accuracy" -- "$apps/glnet_eval" --model "$work/model.safetensors" --data "$mnist" --limit 7 --batch 3

expect 2 "error: give image files or --mnist-index" -- "$apps/glnet_predict" --model "$work/model.safetensors"
expect 2 "error: --mnist-index takes indices" -- "$apps/glnet_predict" --model "$work/model.safetensors" --mnist-index 10000 --data "$mnist"
expect 2 "error: --invert and --no-invert contradict" -- "$apps/glnet_predict" --model "$work/model.safetensors" --invert --no-invert x.png
expect 1 "error: .*notes.png: not a readable image" -- "$apps/glnet_predict" --model "$work/model.safetensors" "$work/notes.png"
expect 1 "error: .*absent.png: no such file" -- "$apps/glnet_predict" --model "$work/model.safetensors" "$work/absent.png"
expect 0 "mnist-test\[5\]: [0-9]  \(" -- "$apps/glnet_predict" --model "$work/model.safetensors" --mnist-index 5 --data "$mnist" --time

leftovers=$(find "$work" -name '*.tmp*' | wc -l)
[ "$leftovers" -eq 0 ] || fail "temporary files left behind"
finish bad-input
