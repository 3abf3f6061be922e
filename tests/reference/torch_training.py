#!/usr/bin/python3
"""Ten training steps of a small residual network with batch normalization in glnet_train and in Debian's PyTorch
(python3-torch, CPU; SGD with Nesterov momentum, weight decay on the weights alone, label smoothing 0.1), from the same
initial weights (PyTorch's, handed to glnet_train --init) on the same batch (the
first 64 MNIST training images, x/255, all of them each step: no shuffle or augmentation can differ). Checks every
step's loss and the parameters and running statistics after the last step.

Tolerance: both sides compute in float32 with different summation orders (cuDNN-free CPU kernels here, llvmpipe's
shaders there); batch normalization divides by per-channel deviations, which turns those last-bit differences into
relative differences of about 1e-6 per step, and SGD with momentum carries them on. Ten steps stay within a relative
1e-4 on the losses and 1e-4 + 1e-3·|value| on the parameters; a wrong gradient (a missing term of the
batch-normalization backward, a stride off by one) moves them by 1e-2 or more within these steps.

  torch_training.py GLNET_TRAIN MNIST_DIR WORK_DIR
"""
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

here = Path(__file__).resolve().parent
sys.path.insert(0, str(here))
from mlp_reference import write_safetensors  # noqa: E402
from step_comparison import compare_losses, read_safetensors  # noqa: E402

sys.path.insert(0, str(here.parent.parent / "bench"))
spec = importlib.util.spec_from_file_location("train_peer", here.parent.parent / "bench" / "train_peer.py")
train_peer = importlib.util.module_from_spec(spec)
spec.loader.exec_module(train_peer)

DESCRIPTION = {"name": "tiny-resnet", "input": [1, 28, 28], "layers": [
    {"name": "stem", "kind": "conv", "outputs": 6, "kernel": 3, "stride": 2},
    {"name": "stem.bn", "kind": "batchnorm"},
    {"name": "stem.relu", "kind": "relu"},
    {"name": "block.conv1", "kind": "conv", "outputs": 6, "kernel": 3},
    {"name": "block.bn1", "kind": "batchnorm"},
    {"name": "block.relu1", "kind": "relu"},
    {"name": "block.conv2", "kind": "conv", "outputs": 6, "kernel": 3},
    {"name": "block.bn2", "kind": "batchnorm", "momentum": 0.2},
    {"name": "block.add", "kind": "add", "inputs": ["block.bn2", "stem.relu"]},
    {"name": "block.relu2", "kind": "relu"},
    {"name": "down", "kind": "conv", "outputs": 8, "kernel": 3, "stride": 2, "activation": "relu"},
    {"name": "pool", "kind": "maxpool", "kernel": 2},
    {"name": "fc", "kind": "dense", "outputs": 10}]}
STEPS, BATCH, LR, DECAY, SMOOTHING = 10, 64, 0.05, 1e-3, 0.1


def glnet_names(model):
    """PyTorch's tensors of the described model under glnet's names (conv1.weight, bn.running_mean, ...)."""
    tensors = {}
    for layer in DESCRIPTION["layers"]:
        module = model.modules_[layer["name"].replace(".", "_")] if layer["name"].replace(".", "_") in model.modules_ else None
        if layer["kind"] == "conv":
            module = module[0]
        elif layer["kind"] == "dense":
            module = module[1]
        elif layer["kind"] != "batchnorm":
            continue
        for key, value in module.state_dict().items():
            if key != "num_batches_tracked":
                tensors[layer["name"] + "." + key] = value.detach().numpy().copy()
    return tensors


def main(train, mnist, work):
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(3)
    model = train_peer.Described(json.loads(json.dumps(DESCRIPTION)))
    net = work / "net.json"
    net.write_text(json.dumps(DESCRIPTION))
    write_safetensors(work / "init.safetensors", glnet_names(model), {"network": json.dumps(DESCRIPTION)})
    images = train_peer.idx(mnist, "train-images-idx3-ubyte")[:BATCH]
    labels = train_peer.idx(mnist, "train-labels-idx1-ubyte")[:BATCH].astype(np.int64)

    result = subprocess.run([train, "--net", str(net), "--init", str(work / "init.safetensors"), "--data", mnist,
                             "--train-limit", str(BATCH), "--batch", str(BATCH), "--test-limit", "10", "--epochs", str(STEPS),
                             "--optimizer", "momentum", "--nesterov", "--weight-decay", str(DECAY), "--label-smoothing", str(SMOOTHING),
                             "--lr", str(LR), "--no-standardize", "--json",
                             "--out", str(work / "glnet.safetensors")], capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit("glnet_train failed: " + result.stderr.strip().splitlines()[-1])
    glnet_losses = [epoch["train_loss"] for epoch in json.loads(result.stdout)["epochs"]]

    x = torch.from_numpy(images.astype(np.float32) / 255).unsqueeze(1)
    y = torch.from_numpy(labels)
    groups = [{"params": [p for p in model.parameters() if p.dim() >= 2], "weight_decay": DECAY},
              {"params": [p for p in model.parameters() if p.dim() < 2], "weight_decay": 0.0}]
    optimizer = torch.optim.SGD(groups, lr=LR, momentum=0.9, nesterov=True)
    model.train()
    torch_losses = []
    for _ in range(STEPS):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y, label_smoothing=SMOOTHING)
        loss.backward()
        optimizer.step()
        torch_losses.append(loss.item())

    failures = compare_losses(glnet_losses, torch_losses, STEPS)
    trained, _ = read_safetensors(work / "glnet.safetensors")
    expected = glnet_names(model)
    if set(trained) != set(expected):
        sys.exit(f"glnet's model has tensors {sorted(set(trained) ^ set(expected))} that PyTorch's lacks or the reverse")
    for name, value in expected.items():
        difference = np.abs(trained[name] - value) - (1e-4 + 1e-3 * np.abs(value))
        if difference.max() > 0:
            failures += 1
            print(f"{name}: max |glnet - PyTorch| {np.abs(trained[name] - value).max():.3g} beyond the tolerance")
    print(f"{len(expected)} tensors compared after {STEPS} steps")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main(*sys.argv[1:])
