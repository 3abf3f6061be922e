#!/usr/bin/python3
"""onnx_models.py OUT_DIR MNIST_DIR: networks built and exported by PyTorch (torch.onnx.export), each as NAME.onnx
with an input NAME-x.npy and PyTorch's output for it, NAME-y.npy. The command-line checks (tests/cli/torch_checks.sh)
and the GPU run (bench/onnx-gpu) take them:

  cnn         an nn.Sequential CNN (Conv, ReLU, MaxPool, Tanh, Sigmoid, Dropout, Linear), dynamic batch, opset 17
  mlp         x.view(x.size(0), -1) @ W + b, then a Linear, fixed batch 4, opset 11
  normalized  BatchNorm after a Conv and a Linear, a dynamic view and a softmax, dynamic batch, opset 17
  mnist       an MNIST classifier ending in a softmax, input_mean/input_std in metadata_props; mnist-x.npy holds
              the first 50 MNIST test images scaled as that says, mnist-y.npy PyTorch's probabilities for them
  avgpool     AvgPool2d (torch 1.13 exports a Pad before it)
  residual, squeeze_excite, fire, transformer, inverted_residual, factorized, conv1d
              the blocks of modern networks (a ResNet bottleneck with its shortcut, a depthwise convolution with
              squeeze-and-excitation and Hardswish, SqueezeNet's fire module with its Concat, a transformer block with
              multi-head attention, LayerNorm and GELU, two MobileNetV2 blocks: expansion, depthwise convolution and
              ReLU6, projection, with and without stride and shortcut; Inception's factorized 1x7 and 7x1 convolutions,
              each axis padded by its own amount, and a strided 1x3 one; 1-D convolutions, padded and strided), dynamic
              batch, opset 17; their -y.npy is
              PyTorch's float64 output
  upsample    nn.Upsample (Resize), which glnet does not run yet
"""
import os, sys, warnings
import numpy as np
import torch
from torch_export import export_torchscript
warnings.filterwarnings("ignore")
if len(sys.argv) != 3:
    sys.exit(__doc__)
work, mnist = sys.argv[1:]
torch.manual_seed(3)

def export(name, model, x, opset, dynamic):
    model.eval()
    axes = {"x": {0: "batch"}, "y": {0: "batch"}} if dynamic else None
    export_torchscript(model, x, os.path.join(work, name + ".onnx"), opset_version=opset, input_names=["x"],
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
export_torchscript(classifier, torch.randn(1, 1, 28, 28), path, opset_version=17, input_names=["x"], output_names=["y"],
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
export("upsample", torch.nn.Upsample(scale_factor=2), torch.randn(2, 1, 4, 4), 17, True)

def export64(name, model, x):
    """Exported in float32; the reference output is the same module's in float64."""
    export(name, model, x, 17, True)
    with torch.no_grad():
        np.save(os.path.join(work, name + "-y.npy"), model.double()(x.double()).numpy())

class Residual(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Conv2d(16, 8, 1, bias=False), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                                        torch.nn.Conv2d(8, 8, 3, stride=2, padding=1, bias=False), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                                        torch.nn.Conv2d(8, 24, 1, bias=False), torch.nn.BatchNorm2d(24))
        self.shortcut = torch.nn.Sequential(torch.nn.Conv2d(16, 24, 1, stride=2, bias=False), torch.nn.BatchNorm2d(24))
    def forward(self, x):
        return torch.relu(self.body(x) + self.shortcut(x))

class SqueezeExcite(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.depthwise = torch.nn.Sequential(torch.nn.Conv2d(12, 12, 5, stride=2, padding=2, groups=12, bias=False),
                                             torch.nn.BatchNorm2d(12), torch.nn.Hardswish())
        self.squeeze = torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(1), torch.nn.Conv2d(12, 4, 1), torch.nn.ReLU(),
                                           torch.nn.Conv2d(4, 12, 1), torch.nn.Hardsigmoid())
        self.project = torch.nn.Conv2d(12, 6, 1)
    def forward(self, x):
        y = self.depthwise(x)
        return self.project(y * self.squeeze(y))

class Fire(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.squeeze = torch.nn.Sequential(torch.nn.Conv2d(10, 4, 1), torch.nn.ReLU(inplace=True))
        self.expand1 = torch.nn.Sequential(torch.nn.Conv2d(4, 8, 1), torch.nn.ReLU(inplace=True))
        self.expand3 = torch.nn.Sequential(torch.nn.Conv2d(4, 8, 3, padding=1), torch.nn.ReLU(inplace=True))
        self.pool = torch.nn.MaxPool2d(3, 2, ceil_mode=True)
    def forward(self, x):
        s = self.squeeze(self.pool(x))
        return torch.cat([self.expand1(s), self.expand3(s)], 1)

class InvertedResidual(torch.nn.Module):
    def __init__(self):
        super().__init__()
        def block(channels, out, stride):
            return torch.nn.Sequential(torch.nn.Conv2d(channels, 4 * channels, 1, bias=False), torch.nn.BatchNorm2d(4 * channels), torch.nn.ReLU6(),
                                       torch.nn.Conv2d(4 * channels, 4 * channels, 3, stride=stride, padding=1, groups=4 * channels, bias=False),
                                       torch.nn.BatchNorm2d(4 * channels), torch.nn.ReLU6(),
                                       torch.nn.Conv2d(4 * channels, out, 1, bias=False), torch.nn.BatchNorm2d(out))
        self.first, self.second = block(6, 6, 1), block(6, 10, 2)
    def forward(self, x):
        return self.second(x + self.first(x))

class Factorized(torch.nn.Module):
    def __init__(self):
        super().__init__()
        def unit(channels, out, kernel, padding, stride=1):
            return torch.nn.Sequential(torch.nn.Conv2d(channels, out, kernel, stride=stride, padding=padding, bias=False),
                                       torch.nn.BatchNorm2d(out), torch.nn.ReLU())
        self.wide, self.tall = unit(6, 8, (1, 7), (0, 3)), unit(8, 8, (7, 1), (3, 0))
        self.strided = unit(8, 5, (1, 3), (0, 1), stride=2)
    def forward(self, x):
        y = self.tall(self.wide(x))
        return self.strided(torch.cat([x, x[:, :2]], 1) + y)

class Transformer(torch.nn.Module):
    def __init__(self, width=32, heads=4):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = torch.nn.LayerNorm(width), torch.nn.LayerNorm(width)
        self.qkv, self.out = torch.nn.Linear(width, 3 * width), torch.nn.Linear(width, width)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(width, 4 * width), torch.nn.GELU(), torch.nn.Linear(4 * width, width))
    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        q, k, v = (z.reshape(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        attention = torch.softmax(q @ k.transpose(-2, -1) / (c // self.heads) ** 0.5, dim=-1)
        x = x + self.out((attention @ v).transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.norm2(x))

residual, squeeze_excite, inverted_residual, factorized = Residual(), SqueezeExcite(), InvertedResidual(), Factorized()
for block in (residual, squeeze_excite, inverted_residual, factorized):
    for module in block.modules():
        if isinstance(module, torch.nn.BatchNorm2d):  # running statistics that are not the identity
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 2)
            module.weight.data.uniform_(0.5, 1.5)
            module.bias.data.uniform_(-0.5, 0.5)
export64("residual", residual.eval(), torch.randn(3, 16, 9, 11))
export64("squeeze_excite", squeeze_excite.eval(), torch.randn(2, 12, 15, 13))
export64("fire", Fire().eval(), torch.randn(2, 10, 14, 13))
export64("transformer", Transformer().eval(), torch.randn(3, 7, 32))
export64("inverted_residual", inverted_residual.eval(), torch.randn(2, 6, 11, 9))
export64("factorized", factorized.eval(), torch.randn(2, 6, 10, 9))
export64("conv1d", torch.nn.Sequential(torch.nn.Conv1d(3, 5, 5, padding=2), torch.nn.ReLU(), torch.nn.Conv1d(5, 4, 3, stride=2, padding=1)).eval(),
         torch.randn(2, 3, 17))
