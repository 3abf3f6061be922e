#!/usr/bin/python3
"""onnx_models.py OUT_DIR MNIST_DIR: networks built and exported by PyTorch (torch.onnx.export), each as NAME.onnx
with an input NAME-x.npy and PyTorch's output for it, NAME-y.npy. The command-line checks (tests/cli/torch_checks.sh)
and the GPU run (bench/onnx-gpu) take them:

  cnn         an nn.Sequential CNN (Conv, ReLU, MaxPool, Tanh, Sigmoid, Dropout, Linear), dynamic batch, opset 17
  mlp         x.view(x.size(0), -1) @ W + b, then a Linear, fixed batch 4, opset 11
  normalized  BatchNorm after a Conv and a Linear, a dynamic view and a softmax, dynamic batch, opset 17
  mnist       an MNIST classifier ending in a softmax, input_mean/input_std in metadata_props; mnist-x.npy holds
              the first 50 MNIST test images scaled as that says, mnist-y.npy PyTorch's probabilities for them
  avgpool     AvgPool2d, which glnet does not run yet (torch 1.13 exports a Pad before it)
"""
import os, sys, warnings
import numpy as np
import torch
warnings.filterwarnings("ignore")
if len(sys.argv) != 3:
    sys.exit(__doc__)
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
normalized_pixels = torch.tensor((pixels / 255.0 - 0.1307) / 0.3081, dtype=torch.float32)
np.save(os.path.join(work, "mnist-x.npy"), normalized_pixels.numpy())
with torch.no_grad():
    np.save(os.path.join(work, "mnist-y.npy"), classifier(normalized_pixels).numpy())
export("avgpool", torch.nn.Sequential(torch.nn.AvgPool2d(2), torch.nn.Flatten()), torch.randn(2, 1, 4, 4), 17, True)
