#!/bin/sh
# torch_checks.sh APPS_DIR MNIST_DIR: networks exported by Debian's PyTorch (python3-torch, torch.onnx.export at opset 17
# and 11) run through glnet_run and compared with PyTorch's own CPU outputs for the same inputs: an nn.Sequential
# CNN with a dynamic batch, an MLP module with x.view(x.size(0), -1) and x @ W + b at a fixed batch, a model with
# BatchNorm after a convolution and a linear layer, a dynamic view and a softmax, average pooling, the blocks of
# modern networks (residual, squeeze-excite, fire, transformer) and seven of torchvision's classifiers; a model with
# an op glnet does not run yet is refused naming the node PyTorch gave it. An exported MNIST classifier with its input scaling in
# metadata_props classifies MNIST test images through glnet_predict, glnet_eval and glnet_serve as PyTorch does.
set -u
apps=$1 mnist=$2
here=$(dirname "$0")
. "$here/common.sh"

/usr/bin/python3 "$here/../reference/onnx_models.py" "$work" "$mnist" || { fail "exporting the PyTorch models"; finish torch; }

# run_and_compare DIR MODEL BOUND TOP1: glnet_run on DIR/MODEL-x.npy against DIR/MODEL-y.npy, max |diff| <= BOUND x
# max |output| (at least 1e-3), and with TOP1=1 the same argmax per row.
run_and_compare() {
  expect 0 "wrote" -- "$apps/glnet_run" --model "$1/$2.onnx" --input "$1/$2-x.npy" --output "$1/$2-out.npy"
  /usr/bin/python3 -c "
import numpy as np, sys
got, want = np.load(sys.argv[1]), np.load(sys.argv[2])
assert got.shape == want.shape, (got.shape, want.shape)
worst = np.abs(got - want).max()
assert worst <= float(sys.argv[3]) * max(np.abs(want).max(), 1e-3), worst
assert sys.argv[4] == '0' or (got.argmax(1) == want.argmax(1)).all()
" "$1/$2-out.npy" "$1/$2-y.npy" "$3" "$4" || fail "$2: glnet_run differs from PyTorch"
}

for model in cnn mlp normalized avgpool; do run_and_compare "$work" $model 1e-4 1; done
# A batch other than the exported one, through the folded shape arithmetic: each row as alone.
expect 0 "on 7 rows" -- "$apps/glnet_run" --model "$work/normalized.onnx" --input "$work/normalized-x.npy" --output "$work/n7.npy" --batch 7
/usr/bin/python3 -c "
import numpy as np, sys
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
assert a.shape == (7, 4) and np.abs(a[:3] - b).max() <= 1e-5 and np.abs(a[3:6] - b).max() <= 1e-5
" "$work/n7.npy" "$work/normalized-y.npy" || fail "the normalized model at batch 7"
# The blocks of modern networks against PyTorch in float64: float32 rounding only.
for model in residual squeeze_excite fire transformer inverted_residual factorized conv1d; do run_and_compare "$work" $model 1e-5 0; done
# Inception's 1xk and kx1 kernels run as implicit GEMMs (each axis padded by its own amount), not the direct kernel.
"$apps/glnet_info" --model "$work/factorized.onnx" >"$work/factorized.txt" 2>&1 || fail "glnet_info --model factorized.onnx"
grep -q "direct conv" "$work/factorized.txt" && fail "a factorized convolution runs on the direct kernel: $(grep "direct conv" "$work/factorized.txt" | head -1)"
# The squeeze-excite gate is applied by the projection as it reads its input (no pass of its own).
expect 0 "/project/Conv +conv2d of scaled input" -- \
  "$apps/glnet_run" --model "$work/squeeze_excite.onnx" --input "$work/squeeze_excite-x.npy" --output "$work/se.npy" --profile
# A fire module at a batch of up to 4: both expansions as one 3x3 convolution writing the Concat's tensor (the 1x1
# kernel at the centre tap); at 8 the two convolutions and their Concat as exported.
for batch in 2 8; do
  "$apps/glnet_info" --model "$work/fire.onnx" --batch $batch --json >"$work/fire-$batch.json" || fail "glnet_info --model fire.onnx --batch $batch"
done
/usr/bin/python3 -c "
import json, sys
def ops(path): return [(n['op_type'], n['glnet']) for n in json.load(open(path))['nodes']]
small, large = ops(sys.argv[1]), ops(sys.argv[2])
assert ('Conv', 'joined conv') in small and ('Concat', 'fused') in small and ('Concat', 'concat') not in small, small
assert ('Concat', 'concat') in large and ('Conv', 'joined conv') not in large, large
" "$work/fire-2.json" "$work/fire-8.json" || fail "the fire module's expansions joined at batch 2 only"
expect 1 "upsample.onnx: node '/Resize' \(Resize, opset 17\): the op Resize is not supported yet" \
  -- "$apps/glnet_run" --model "$work/upsample.onnx" --input "$work/avgpool-x.npy" --output "$work/o.npy"

# torchvision's classifiers (random weights) at 64x64, batch 2, against PyTorch on the CPU: the issue's tolerance,
# max |diff| <= 1e-4 max |output|, and the same top-1. vgg11 runs on the GPU machine only (bench/onnx-gpu): its
# classifier exports only at 224x224, and its 133 M parameters are too slow for llvmpipe.
mkdir -p "$work/vision"
/usr/bin/python3 "$here/../reference/torchvision_models.py" "$work/vision" resnet18 resnet50 mobilenet_v2 mobilenet_v3_small \
  efficientnet_b0 squeezenet1_1 densenet121 >/dev/null || fail "exporting torchvision's models"
for model in resnet18 resnet50 mobilenet_v2 mobilenet_v3_small efficientnet_b0 squeezenet1_1 densenet121; do
  run_and_compare "$work/vision" $model 1e-4 1
done
# Every 3x3 stride-1 layer as Winograd's F(2x2, 3x3), then as F(4x4, 3x3) (the rule takes them only for larger
# layers than these): the same bound. Under desktop GL only (four more runs of the two largest models); under ES
# the gl.gles suite checks both tiles with every fused epilogue and pooling against float64.
algorithms="winograd2 winograd4"
[ "${GLNET_API:-gl}" = gl ] || algorithms=
for algorithm in $algorithms; do
  for model in resnet18 densenet121; do
    GLNET_CONV_ALGORITHM=$algorithm run_and_compare "$work/vision" $model 1e-4 1
  done
done
expect 1 "GLNET_CONV_ALGORITHM is 'fast'; it takes auto, gemm, winograd, winograd2 or winograd4" -- \
  env GLNET_CONV_ALGORITHM=fast "$apps/glnet_run" --model "$work/vision/resnet18.onnx" --input "$work/vision/resnet18-x.npy" --output "$work/w.npy"

# glnet_predict on photographs with an image classifier: a 64x64 PNG at --resize 64 is the model's input exactly,
# so the top-3 probabilities must be PyTorch's for the same normalised pixels (the seeded resnet18 built again).
/usr/bin/python3 -c "
import numpy as np, sys
from PIL import Image
rng = np.random.default_rng(5)
Image.fromarray((rng.random((64, 64, 3)) * 255).astype(np.uint8)).save(sys.argv[1])
Image.fromarray((rng.random((90, 120, 3)) * 255).astype(np.uint8)).save(sys.argv[2])
" "$work/photo.png" "$work/wide.jpg.png"
printf 'class %s\n' $(seq 0 999) >"$work/labels.txt"
"$apps/glnet_predict" --model "$work/vision/resnet18.onnx" "$work/photo.png" "$work/wide.jpg.png" --resize 64 --size 64 --top 3 \
  --mean 0.485,0.456,0.406 --std 0.229,0.224,0.225 --labels "$work/labels.txt" --json >"$work/photo.json" 2>"$work/photo.err" \
  || fail "glnet_predict on photographs: $(cat "$work/photo.err")"
/usr/bin/python3 -c "
import json, sys, numpy as np, torch, torchvision
from PIL import Image
answers = json.load(open(sys.argv[1]))
torch.manual_seed(7)
model = torchvision.models.resnet18(weights=None).eval()
x = (np.asarray(Image.open(sys.argv[2]), np.float64) / 255 - [0.485, 0.456, 0.406]) / [0.229, 0.224, 0.225]
with torch.no_grad():
    p = torch.softmax(model(torch.tensor(x.transpose(2, 0, 1)[None], dtype=torch.float32)), 1)[0].numpy()
top = answers[0]['top']
assert [t['class'] for t in top] == list(np.argsort(-p)[:3]), (top, np.argsort(-p)[:3])
assert all(abs(t['probability'] - p[t['class']]) <= 1e-5 for t in top) and top[0]['label'] == 'class %d' % top[0]['class']
assert len(answers) == 2 and len(answers[1]['top']) == 3
" "$work/photo.json" "$work/photo.png" || fail "glnet_predict's probabilities for a photograph differ from PyTorch's"
expect 2 "error: --size 32: the model takes 64x64 images" -- "$apps/glnet_predict" --model "$work/vision/resnet18.onnx" "$work/photo.png" --size 32
expect 2 "error: --mean needs 1 or 3 values for this model" -- "$apps/glnet_predict" --model "$work/vision/resnet18.onnx" "$work/photo.png" --mean 1,2
expect 1 "labels.txt names 1000 classes; the model has 10" -- "$apps/glnet_predict" --model "$work/cnn.onnx" "$work/photo.png" --labels "$work/labels.txt"
expect 2 "error: --resize is for image classifiers; this model takes 28x28 digits" -- "$apps/glnet_predict" --model "$work/mnist.onnx" --mnist-index 0 --data "$mnist" --resize 32

# The MNIST classifier through the commands that take --model: glnet_predict's probabilities are PyTorch's.
"$apps/glnet_predict" --model "$work/mnist.onnx" --data "$mnist" --mnist-index "$(seq -s, 0 49)" --json >"$work/predict.json" 2>"$work/predict.err" \
  || fail "glnet_predict on an ONNX model: $(cat "$work/predict.err")"
grep -q warning "$work/predict.err" && fail "a warning although metadata_props gives the input scaling: $(cat "$work/predict.err")"
/usr/bin/python3 -c "
import json, numpy as np, sys
answers, want = json.load(open(sys.argv[1])), np.load(sys.argv[2])
got = np.array([a['probabilities'] for a in answers])
assert got.shape == want.shape and np.abs(got - want).max() <= 1e-5, np.abs(got - want).max()
assert [a['class'] for a in answers] == list(want.argmax(1))
" "$work/predict.json" "$work/mnist-y.npy" || fail "glnet_predict's probabilities differ from PyTorch's"
expect 0 "accuracy: [0-9.]+% \(.* of 300\)" -- "$apps/glnet_eval" --model "$work/mnist.onnx" --data "$mnist" --limit 300 --batch 64
expect 2 "error: --activation applies to safetensors models" -- "$apps/glnet_predict" --model "$work/mnist.onnx" --activation relu --mnist-index 0 --data "$mnist"
expect 2 "error: --mnist-index, --invert and --no-invert are for MNIST digit models; .*mlp.onnx takes \[4, 3, 4, 4\] images" -- "$apps/glnet_predict" --model "$work/mlp.onnx" --mnist-index 0 --data "$mnist"
"$apps/glnet_serve" --model "$work/mnist.onnx" --port 0 >"$work/serve.out" 2>"$work/serve.err" &
server=$!
url=
for _ in $(seq 300); do
  url=$(sed -n 's/^glnet_serve: listening on \(http:[^ ]*\)$/\1/p' "$work/serve.out")
  [ -n "$url" ] && break
  sleep 0.1
done
/usr/bin/python3 -c "
import json, sys
pixels = list(open(sys.argv[1], 'rb').read()[16 + 784 * 3:16 + 784 * 4])
json.dump({'pixels': pixels}, open(sys.argv[2], 'w'))
" "$mnist/t10k-images-idx3-ubyte" "$work/p3.json" 2>/dev/null || /usr/bin/python3 -c "
import gzip, json, sys
pixels = list(gzip.open(sys.argv[1] + '.gz').read()[16 + 784 * 3:16 + 784 * 4])
json.dump({'pixels': pixels}, open(sys.argv[2], 'w'))
" "$mnist/t10k-images-idx3-ubyte" "$work/p3.json"
curl -s -H 'Content-Type: application/json' --data-binary @"$work/p3.json" "$url/v1/predict" >"$work/serve.json" || fail "glnet_serve on an ONNX model"
kill -TERM "$server"; wait "$server"
/usr/bin/python3 -c "
import json, numpy as np, sys
answer, want = json.load(open(sys.argv[1]))[0], np.load(sys.argv[2])[3]
assert answer['class'] == want.argmax() and np.abs(np.array(answer['probabilities']) - want).max() <= 1e-5
" "$work/serve.json" "$work/mnist-y.npy" || fail "glnet_serve's answer differs from PyTorch's: $(cat "$work/serve.json")"
finish torch
