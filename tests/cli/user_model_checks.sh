#!/bin/bash
# user_model_checks.sh APPS_DIR REFERENCE_DIR: what a user gets, following the README, with a model glnet trained on an
# image folder of RGB PNGs (tests/reference/make_datasets.py, resized to 16x16): the model file and its ONNX export
# record the preprocessing and the class names; glnet_predict, glnet_eval and glnet_serve take both files, see each
# image as training saw it (glnet_predict on the test images answers what glnet_eval measured), and name the classes;
# glnet_train --num-classes fine-tunes a model of other classes; glnet_serve lowers a --max-batch the device cannot take.
set -u
apps=$1 reference=$2
here=$(dirname "$0")
. "$here/common.sh"
. "$here/server.sh"
py() { /usr/bin/python3 "$@"; }

# The folder as train/ and test/: the first 4 images of each class are the test set.
py "$reference/make_datasets.py" folder "$work/all" || { fail "writing the image folder"; finish user-model; }
for class in circle cross square; do
  mkdir -p "$work/shapes/train/$class" "$work/shapes/test/$class"
  mv "$work/all/$class"/00[0-3].png "$work/shapes/test/$class/"
  mv "$work/all/$class"/*.png "$work/shapes/train/$class/"
done
printf '{"input": [3, 16, 16], "layers": [
  {"name": "c1", "kind": "conv", "outputs": 8, "kernel": 3, "stride": 2}, {"name": "b1", "kind": "batchnorm"}, {"name": "r1", "kind": "relu"},
  {"name": "pool", "kind": "globalavgpool"}, {"name": "fc", "kind": "dense", "outputs": %s}]}' 3 >"$work/net.json"
"$apps/glnet_train" --dataset folder --data "$work/shapes" --net "$work/net.json" --epochs 3 --batch 12 --optimizer adam --lr 0.02 \
  --out "$work/shapes.safetensors" --export-onnx "$work/shapes.onnx" >"$work/train.txt" 2>&1 ||
  { cat "$work/train.txt"; fail "training on the image folder"; finish user-model; }

# Both files record the preprocessing and the class names.
py - "$work" <<'PY' || fail "the model files do not record the preprocessing and the class names"
import json, struct, sys
import onnx
work = sys.argv[1]
raw = open(f"{work}/shapes.safetensors", "rb").read()
metadata = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])["__metadata__"]
props = {p.key: p.value for p in onnx.load(f"{work}/shapes.onnx").metadata_props}
for where in (metadata, props):
    assert where["image_resize"] == "stretch" and where["image_size"] == "16x16" and where["image_channels"] == "rgb", where
    assert where["labels"] == "circle\ncross\nsquare\n", where
    assert len(where["input_mean"].split(",")) == 3, where
# An ONNX classifier from elsewhere: the same model without glnet's metadata.
model = onnx.load(f"{work}/shapes.onnx")
del model.metadata_props[:]
onnx.save(model, f"{work}/foreign.onnx")
PY

# glnet_eval measures the test set as training read it; glnet_predict on the same files gives the same classes, from
# either file, with the same probabilities, and names them.
tests=("$work"/shapes/test/*/*.png)
for model in shapes.safetensors shapes.onnx; do
  "$apps/glnet_eval" --model "$work/$model" --dataset folder --data "$work/shapes" --predictions "$work/$model.eval" >"$work/$model.eval.txt" ||
    fail "glnet_eval on $model"
  grep -Eq '^ +circle +cross +square$' "$work/$model.eval.txt" || fail "glnet_eval $model: no class names over the confusion matrix"
  grep -Eq '^ +cross( +[0-9]+){3}$' "$work/$model.eval.txt" || fail "glnet_eval $model: no class names before the rows"
  "$apps/glnet_predict" --model "$work/$model" "${tests[@]}" --json >"$work/$model.json" 2>"$work/$model.err" ||
    { cat "$work/$model.err"; fail "glnet_predict on $model"; continue; }
  py -c "import json,sys; [print(a['class']) for a in json.load(open(sys.argv[1]))]" "$work/$model.json" >"$work/$model.predicted"
  cmp -s "$work/$model.predicted" "$work/$model.eval" || fail "glnet_predict $model disagrees with glnet_eval on the test images"
  py -c "import json,sys; names=['circle','cross','square']; sys.exit(any(a['class_name'] != names[a['class']] for a in json.load(open(sys.argv[1]))))" \
    "$work/$model.json" || fail "glnet_predict $model does not name the classes"
done
py -c "
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
sys.exit(max(abs(p - q) for x, y in zip(a, b) for p, q in zip(x['probabilities'], y['probabilities'])) > 1e-4)" \
  "$work/shapes.safetensors.json" "$work/shapes.onnx.json" || fail "glnet_predict: the ONNX export answers otherwise than the model file"
expect 0 "^$work/shapes/test/cross/000.png: [0-9] (circle|cross|square)  \(" -- "$apps/glnet_predict" --model "$work/shapes.safetensors" "$work/shapes/test/cross/000.png"
expect 0 "^      model file \(safetensors, or ONNX" -- "$apps/glnet_predict" --help
# A 28x28 gray network (an MLP) trained on the folder records the folder's stretch, not MNIST's digit centring and
# inversion, which its input shape alone would suggest: glnet_predict answers its test images as glnet_eval does.
"$apps/glnet_train" --dataset folder --data "$work/shapes" --arch 784-32-3 --epochs 2 --batch 12 --lr 0.05 \
  --out "$work/gray.safetensors" >"$work/gray.txt" 2>&1 || { cat "$work/gray.txt"; fail "training a gray MLP on the image folder"; }
py - "$work/gray.safetensors" <<'PY' || fail "the gray MLP's file does not record the folder's stretch"
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
metadata = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])["__metadata__"]
assert metadata["image_resize"] == "stretch" and metadata["image_invert"] == "never" and metadata["image_channels"] == "gray", metadata
PY
"$apps/glnet_eval" --model "$work/gray.safetensors" --dataset folder --data "$work/shapes" --predictions "$work/gray.eval" >/dev/null ||
  fail "glnet_eval on the gray MLP"
"$apps/glnet_predict" --model "$work/gray.safetensors" "${tests[@]}" --json 2>/dev/null |
  py -c "import json,sys; [print(a['class']) for a in json.load(sys.stdin)]" >"$work/gray.predicted"
cmp -s "$work/gray.predicted" "$work/gray.eval" || fail "glnet_predict disagrees with glnet_eval on the gray MLP's test images"

# Fine-tuning a model of 10 classes (trained on CIFAR-10's format) on the folder's 3: refused with the way out, which works.
py "$reference/make_datasets.py" cifar "$work/cifar" || fail "writing the CIFAR-10 files"
sed 's/"input": \[3, 16, 16\]/"input": [3, 32, 32]/; s/"outputs": 3}/"outputs": 10}/' "$work/net.json" >"$work/net10.json"
"$apps/glnet_train" --dataset cifar10 --data "$work/cifar" --net "$work/net10.json" --epochs 1 --train-limit 100 --out "$work/ten.safetensors" \
  >"$work/ten.txt" 2>&1 || { cat "$work/ten.txt"; fail "training the 10-class model"; }
expect 1 "error: .*shapes: 3 class folders for a network of 10 classes; to fine-tune it for these, replace its last layer \(--num-classes 3\)" -- \
  "$apps/glnet_train" --dataset folder --data "$work/shapes" --net "$work/net10.json" --init "$work/ten.safetensors" --out "$work/tuned.safetensors"
expect 0 "wrote .*tuned.safetensors" -- "$apps/glnet_train" --dataset folder --data "$work/shapes" --net "$work/net10.json" \
  --init "$work/ten.safetensors" --num-classes 3 --epochs 1 --out "$work/tuned.safetensors"
expect 0 "cross/000.png: [0-2] (circle|cross|square)  \(" -- "$apps/glnet_predict" --model "$work/tuned.safetensors" "$work/shapes/test/cross/000.png"
expect 0 "^  --num-classes N" -- "$apps/glnet_train" --help

# serve NAME MODEL ARGS...: glnet_serve with $work/MODEL on a free port; sets $url.
serve() { start_server "$1" "$work/$2" "${@:3}"; }
stop() { kill "${servers[-1]}"; wait "${servers[-1]}" 2>/dev/null; }

# glnet_serve answers an uploaded image as glnet_predict does, with its class name, for the model file and for an ONNX
# classifier from elsewhere (no warning about flags that mean nothing for it).
first=$(sed -n 1p "$work/shapes.safetensors.predicted")
for model in shapes.safetensors foreign.onnx; do
  serve "$model" "$model" --max-batch 4 || continue
  grep -q "warning" "$work/$model.err" && fail "glnet_serve $model warns: $(cat "$work/$model.err")"
  curl -s --data-binary "@${tests[0]}" -H 'Content-Type: image/png' "$url/v1/predict" >"$work/answer.json"
  if [ "$model" = shapes.safetensors ]; then
    grep -q "\"class\":$first,\"class_name\":\"[a-z]*\"" "$work/answer.json" || fail "glnet_serve $model: $(cat "$work/answer.json"), expected class $first named"
  else
    grep -q '"class":[0-2],' "$work/answer.json" || fail "glnet_serve $model: $(cat "$work/answer.json")"
  fi
  stop
done

# A --max-batch larger than the device takes (the default 64 of 448x448 RGB images: 154 MB, over the 128 MiB storage
# blocks of GLNET_MINIMUM_DEVICE) is lowered to the largest batch that fits, and said.
py - "$work" <<'PY' || fail "writing the large ONNX model"
import sys
import numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto
rng = np.random.default_rng(1)
nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], strides=[4, 4], pads=[1, 1, 1, 1]),
         helper.make_node("GlobalAveragePool", ["c"], ["g"]), helper.make_node("Flatten", ["g"], ["f"]),
         helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], transB=1)]
weights = {"w": rng.standard_normal((4, 3, 3, 3)), "b": np.zeros(4), "fw": rng.standard_normal((5, 4)), "fb": np.zeros(5)}
graph = helper.make_graph(nodes, "large", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 448, 448])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])],
                          [numpy_helper.from_array(v.astype(np.float32), k) for k, v in weights.items()])
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1] + "/large.onnx")
PY
if GLNET_MINIMUM_DEVICE=1 serve large large.onnx; then
  grep -q "warning: --max-batch 64 is more than this device takes for this model: batches of up to 32 images" "$work/large.err" ||
    fail "glnet_serve did not lower --max-batch: $(cat "$work/large.err")"
  curl -s --data-binary "@${tests[0]}" -H 'Content-Type: image/png' "$url/v1/predict" | grep -q '"class":[0-4],' || fail "glnet_serve large.onnx did not answer"
  stop
fi

finish user-model
