#!/usr/bin/env python3
"""bench/mnist_cnn_peer.py DATA OUT: the PyTorch-trained MNIST CNN of the ONNX issue, on the GPU machine. Trains glnet's
MNIST CNN architecture (conv5x5x32-relu-pool2-conv5x5x64-relu-pool2-fc512-relu-fc10, same padding) in PyTorch for two
epochs on the GPU (Adam, batch 128, fp32), exports it (torch.onnx.export, opset 17, dynamic batch; metadata_props
input_mean/input_std so that glnet_eval feeds it (x/255 - 0.1307)/0.3081), and writes the normalised test images
(OUT/x.npy) and PyTorch's logits for them (OUT/torch.npy). Prints PyTorch's test accuracy. DATA holds MNIST's IDX
files (plain or .gz)."""
import os, sys
import numpy as np
import onnx
import torch
from torch import nn
from idx_files import idx

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def main(data, out):
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(5)
    normalise = lambda images: ((torch.from_numpy(images.astype(np.float32)) / 255 - 0.1307) / 0.3081).unsqueeze(1)
    train_x, train_y = normalise(idx(data, "train-images-idx3-ubyte")).cuda(), torch.from_numpy(idx(data, "train-labels-idx1-ubyte").astype(np.int64)).cuda()
    test_x, test_y = normalise(idx(data, "t10k-images-idx3-ubyte")), idx(data, "t10k-labels-idx1-ubyte")
    model = nn.Sequential(nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64 * 7 * 7, 512), nn.ReLU(), nn.Linear(512, 10)).cuda()
    optimiser = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(2):
        order = torch.randperm(len(train_x), device="cuda")
        for first in range(0, len(order), 128):
            batch = order[first:first + 128]
            optimiser.zero_grad()
            nn.functional.cross_entropy(model(train_x[batch]), train_y[batch]).backward()
            optimiser.step()
    model.eval()
    with torch.no_grad():
        logits = torch.cat([model(test_x[i:i + 1000].cuda()).cpu() for i in range(0, len(test_x), 1000)]).numpy()
    print(f"PyTorch {torch.__version__}: test accuracy {100 * (logits.argmax(1) == test_y).mean():.2f}% after 2 epochs")
    path = os.path.join(out, "mnist-cnn.onnx")
    torch.onnx.export(model.cpu(), test_x[:1], path, opset_version=17, input_names=["x"], output_names=["logits"],
                      dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}}, dynamo=False)
    exported = onnx.load(path)
    for key, value in (("input_mean", "0.1307"), ("input_std", "0.3081")):
        entry = exported.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.save(exported, path)
    np.save(os.path.join(out, "x.npy"), test_x.numpy())
    np.save(os.path.join(out, "torch.npy"), logits)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
