#!/bin/sh
# torch_checks.sh APPS_DIR: networks exported by Debian's PyTorch (python3-torch, torch.onnx.export at opset 17
# and 11) run through glnet_run and compared with PyTorch's own CPU outputs for the same inputs: an nn.Sequential
# CNN with a dynamic batch, an MLP module with x.view(x.size(0), -1) and x @ W + b at a fixed batch, a model with
# BatchNorm after a convolution and a linear layer, a dynamic view and a softmax; a model with an op glnet does
# not run yet is refused naming the node PyTorch gave it.
set -u
apps=$1
here=$(dirname "$0")
. "$here/common.sh"

/usr/bin/python3 - "$work" <<'PY' || { fail "exporting the PyTorch models"; finish torch; }
import os, sys, warnings
import numpy as np
import torch
warnings.filterwarnings("ignore")
work = sys.argv[1]
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
finish torch
