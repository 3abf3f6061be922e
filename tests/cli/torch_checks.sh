#!/bin/sh
# torch_checks.sh APPS_DIR MNIST_DIR: networks exported by Debian's PyTorch (python3-torch, torch.onnx.export at opset 17
# and 11) run through glnet_run and compared with PyTorch's own CPU outputs for the same inputs: an nn.Sequential
# CNN with a dynamic batch, an MLP module with x.view(x.size(0), -1) and x @ W + b at a fixed batch, a model with
# BatchNorm after a convolution and a linear layer, a dynamic view and a softmax; a model with an op glnet does
# not run yet is refused naming the node PyTorch gave it. An exported MNIST classifier with its input scaling in
# metadata_props classifies MNIST test images through glnet_predict, glnet_eval and glnet_serve as PyTorch does.
set -u
apps=$1 mnist=$2
here=$(dirname "$0")
. "$here/common.sh"

/usr/bin/python3 - "$work" "$mnist" <<'PY' || { fail "exporting the PyTorch models"; finish torch; }
import os, sys, warnings
import numpy as np
import torch
warnings.filterwarnings("ignore")
work, mnist = sys.argv[1:]
torch.manual_seed(3)

def export(name, model, x, opset, dynamic):
    model.eval()
    axes = {"x": {0: "batch"}, "y": {0: "batch"}} if dynamic else None
    torch.onnx.export(model, x, os.path.join(work, name + ".onnx"), opset_version=opset, input_names=["x"],
                      output_names=["y"], dynamic_axes=axes)
    np.save(os.path.join(work, name + "-x.npy"), x.numpy())
    with torch.no_grad():
        np.save(os.path.join(work, name + "-y.npy"), model(x).numpy())

cnn = torch.nn.Sequential(torch.nn.Conv2d(1, 6, 5, padding=2), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                          torch.nn.Conv2d(6, 8, 3, padding=1), torch.nn.Tanh(), torch.nn.MaxPool2d(2),
                          torch.nn.Flatten(), torch.nn.Linear(8 * 5 * 5, 24), torch.nn.Sigmoid(), torch.nn.Dropout(0.5),
                          torch.nn.Linear(24, 10))
export("cnn", cnn, torch.randn(3, 1, 21, 21), 17, True)

class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(48, 20) / 7)
        self.b = torch.nn.Parameter(torch.randn(20))
        self.out = torch.nn.Linear(20, 5)
    def forward(self, x):
        return self.out(torch.relu(x.view(x.size(0), -1) @ self.w + self.b))
export("mlp", Mlp(), torch.randn(4, 3, 4, 4), 11, False)

class Normalized(torch.nn.Module):
    """BatchNorm after a convolution and a linear layer, x.view(x.size(0), -1) with a dynamic batch (shape
    arithmetic that glnet folds at load), and a softmax at the end."""
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 5, 3, padding=1)
        self.norm = torch.nn.BatchNorm2d(5)
        self.fc = torch.nn.Linear(5 * 6 * 6, 12)
        self.norm1d = torch.nn.BatchNorm1d(12)
        self.out = torch.nn.Linear(12, 4)
    def forward(self, x):
        x = torch.relu(self.norm(self.conv(x)))
        x = torch.relu(self.norm1d(self.fc(x.view(x.size(0), -1))))
        return torch.softmax(self.out(x), dim=1)
normalized = Normalized()
for norm in (normalized.norm, normalized.norm1d):  # statistics other than the initial ones, as after training
    norm.running_mean.uniform_(-0.5, 0.5); norm.running_var.uniform_(0.5, 2); norm.weight.data.uniform_(0.5, 1.5); norm.bias.data.uniform_(-0.2, 0.2)
export("normalized", normalized, torch.randn(3, 2, 6, 6), 17, True)
# An MNIST classifier ending in a softmax, its preprocessing in metadata_props as glnet reads it, and PyTorch's
# probabilities for the first 50 test images.
import gzip, onnx
classifier = torch.nn.Sequential(torch.nn.Conv2d(1, 6, 5, padding=2), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                                 torch.nn.Conv2d(6, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                                 torch.nn.Flatten(), torch.nn.Linear(8 * 7 * 7, 10), torch.nn.Softmax(dim=1)).eval()
path = os.path.join(work, "mnist.onnx")
torch.onnx.export(classifier, torch.randn(1, 1, 28, 28), path, opset_version=17, input_names=["x"], output_names=["y"],
                  dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
model = onnx.load(path)
for key, value in (("input_mean", "0.1307"), ("input_std", "0.3081")):
    entry = model.metadata_props.add(); entry.key, entry.value = key, value
onnx.save(model, path)
images = os.path.join(mnist, "t10k-images-idx3-ubyte")
raw = open(images, "rb").read() if os.path.exists(images) else gzip.open(images + ".gz").read()
pixels = np.frombuffer(raw[16:16 + 784 * 50], np.uint8).reshape(50, 1, 28, 28)
with torch.no_grad():
    np.save(os.path.join(work, "mnist-y.npy"), classifier(torch.tensor((pixels / 255.0 - 0.1307) / 0.3081, dtype=torch.float32)).numpy())
export("avgpool", torch.nn.Sequential(torch.nn.AvgPool2d(2), torch.nn.Flatten()), torch.randn(2, 1, 4, 4), 17, True)
PY

for model in cnn mlp normalized; do
  expect 0 "wrote" -- "$apps/glnet_run" --model "$work/$model.onnx" --input "$work/$model-x.npy" --output "$work/$model-out.npy"
  /usr/bin/python3 -c "
import numpy as np, sys
got, want = np.load(sys.argv[1]), np.load(sys.argv[2])
assert got.shape == want.shape, (got.shape, want.shape)
worst = np.abs(got - want).max()
assert worst <= 1e-4 * max(np.abs(want).max(), 1e-3), worst
assert (got.argmax(1) == want.argmax(1)).all()
" "$work/$model-out.npy" "$work/$model-y.npy" || fail "$model: glnet_run differs from PyTorch"
done
# A batch other than the exported one, through the folded shape arithmetic: each row as alone.
expect 0 "on 7 rows" -- "$apps/glnet_run" --model "$work/normalized.onnx" --input "$work/normalized-x.npy" --output "$work/n7.npy" --batch 7
/usr/bin/python3 -c "
import numpy as np, sys
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
assert a.shape == (7, 4) and np.abs(a[:3] - b).max() <= 1e-5 and np.abs(a[3:6] - b).max() <= 1e-5
" "$work/n7.npy" "$work/normalized-y.npy" || fail "the normalized model at batch 7"
expect 1 "avgpool.onnx: node '/0/Pad' \(Pad, opset 17\): the op Pad is not supported yet" \
  -- "$apps/glnet_run" --model "$work/avgpool.onnx" --input "$work/avgpool-x.npy" --output "$work/o.npy"

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
expect 1 "mlp.onnx: the model takes 48 inputs; glnet_predict classifies 28x28 images" -- "$apps/glnet_predict" --model "$work/mlp.onnx" --mnist-index 0 --data "$mnist"
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
