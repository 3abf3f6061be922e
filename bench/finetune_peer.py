#!/usr/bin/env python3
"""bench/finetune_peer.py DATA OUT_DIR EPOCHS: the PyTorch side of bench/finetune-gpu. Trains a small CNN written as
PyTorch users write them (bias-free convolutions before batch normalization, a depthwise convolution, a concatenation,
SiLU, a residual add, dropout before the classifier) on the MNIST training set on the GPU for EPOCHS epochs (SGD with
momentum, batch 128, inputs (x/255 - 0.1307)/0.3081), prints its test accuracy as one JSON line, then fine-tunes a copy
one more epoch at lr 0.01 (what glnet is asked to do with the export) and prints that accuracy, and exports the
pretrained model in training mode (BatchNormalization and Dropout kept) with the normalization in metadata_props, as
OUT_DIR/pretrained.onnx."""
import copy, json, sys
import numpy as np
import onnx
import torch
from torch import nn
from idx_files import idx

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
MEAN, STD = 0.1307, 0.3081


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(1, 32, 3, padding=1, bias=False)
        self.stem_bn = nn.BatchNorm2d(32)
        self.depthwise = nn.Conv2d(32, 32, 3, padding=1, groups=32, bias=False)
        self.depthwise_bn = nn.BatchNorm2d(32)
        self.mix = nn.Conv2d(64, 64, 1, bias=False)
        self.mix_bn = nn.BatchNorm2d(64)
        self.down = nn.Conv2d(64, 64, 3, stride=2, padding=1, bias=False)
        self.down_bn = nn.BatchNorm2d(64)
        self.pool = nn.MaxPool2d(2)
        self.drop = nn.Dropout(0.2)
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        a = torch.relu(self.stem_bn(self.stem(x)))
        b = nn.functional.silu(self.depthwise_bn(self.depthwise(a)))
        c = torch.cat([a, b], 1)
        c = torch.relu(self.mix_bn(self.mix(c)) + c)
        c = self.pool(torch.relu(self.down_bn(self.down(c))))
        c = torch.flatten(nn.functional.adaptive_avg_pool2d(c, 1), 1)
        return self.fc(self.drop(c))


def train(model, x, y, epochs, lr, seed):
    generator = torch.Generator(device="cuda").manual_seed(seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(x), device="cuda", generator=generator)
        for i in range(0, len(x) - 127, 128):
            batch = order[i:i + 128]
            optimizer.zero_grad(set_to_none=True)
            nn.functional.cross_entropy(model(x[batch]), y[batch]).backward()
            optimizer.step()


def accuracy(model, x, y):
    model.eval()
    with torch.no_grad():
        return float(torch.cat([model(x[i:i + 1000]).argmax(1) for i in range(0, len(x), 1000)]).eq(y).float().mean())


def main(data, out, epochs):
    torch.manual_seed(0)
    load = lambda name: torch.from_numpy(idx(data, name).astype(np.float32) / 255).cuda()
    x = ((load("train-images-idx3-ubyte") - MEAN) / STD)[:, None]
    y = torch.from_numpy(idx(data, "train-labels-idx1-ubyte").astype(np.int64)).cuda()
    tx = ((load("t10k-images-idx3-ubyte") - MEAN) / STD)[:, None]
    ty = torch.from_numpy(idx(data, "t10k-labels-idx1-ubyte").astype(np.int64)).cuda()
    model = Net().cuda()
    train(model, x, y, int(epochs), 0.05, 1)
    print(json.dumps({"pytorch": torch.__version__, "pretrained_test_accuracy": accuracy(model, tx, ty)}), flush=True)
    tuned = copy.deepcopy(model)
    train(tuned, x, y, 1, 0.01, 2)
    print(json.dumps({"pytorch_finetuned_test_accuracy": accuracy(tuned, tx, ty)}), flush=True)
    model = model.cpu().train()
    path = f"{out}/pretrained.onnx"
    torch.onnx.export(model, torch.zeros(2, 1, 28, 28), path, opset_version=17, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, input_names=["images"], output_names=["logits"], dynamic_axes={"images": {0: "batch"}},
                      dynamo=False)
    exported = onnx.load(path)
    for key, value in (("input_mean", str(MEAN)), ("input_std", str(STD))):
        entry = exported.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.save(exported, path)


if __name__ == "__main__":
    main(*sys.argv[1:])
