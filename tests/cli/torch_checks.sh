#!/bin/sh
# torch_checks.sh APPS_DIR: networks exported by Debian's PyTorch (python3-torch, torch.onnx.export at opset 17
# and 11) run through glnet_run and compared with PyTorch's own CPU outputs for the same inputs: an nn.Sequential
# CNN with a dynamic batch, an MLP module with x.view(x.size(0), -1) and x @ W + b at a fixed batch; a model
# with an op glnet does not run yet is refused naming the node PyTorch gave it.
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
export("softmax", torch.nn.Sequential(torch.nn.Linear(6, 3), torch.nn.Softmax(dim=1)), torch.randn(2, 6), 17, True)
PY

for model in cnn mlp; do
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
expect 1 "softmax.onnx: node '/1/Softmax' \(Softmax, opset 17\): the op Softmax is not supported yet" \
  -- "$apps/glnet_run" --model "$work/softmax.onnx" --input "$work/softmax-x.npy" --output "$work/o.npy"
finish torch
