#!/usr/bin/python3
"""Ten training steps of two small networks in glnet_train and in Debian's PyTorch (python3-torch, CPU), each from
the same initial weights (PyTorch's, handed to glnet_train --init) on the same batch (the first 64 MNIST training
images, x/255, all of them each step: no shuffle or augmentation can differ), label smoothing 0.1:
- a residual network with batch normalization, SGD with Nesterov momentum, weight decay on the weights alone;
- two transformers on the images' rows as positions (one with causal attention) and one on 4x4 patches (a vision
  transformer's shape), their ONNX exports then run by glnet_run against PyTorch's float64;
- a BERT-like encoder on token ids (embedding, position table, a padding mask on the attention's keys, the first
  position as the summary), from the ids data set of glnet_train, its export run by glnet_run, where changing a padded
  id must change nothing and changing a real one must change the output;
- a network with layer normalization (over the last axis, its scale and shift drawn away from 1 and 0; after a tanh,
  since a row's constant shift, such as a convolution's bias right before, has no gradient through it, which Adam
  would turn into steps of noise), GELU and a residual sum, AdamW (decoupled weight decay on the weights alone) with a linear warm-up of 3 steps and a cosine decay.
Checks every step's loss and the parameters and running statistics after the last step.

Tolerance: both sides compute in float32 with different summation orders (cuDNN-free CPU kernels here, llvmpipe's
shaders there); normalization divides by deviations, which turns those last-bit differences into relative differences
of about 1e-6 per step, and the optimizers carry them on. Ten steps stay within a relative 1e-4 on the losses and
1e-4 + 1e-3·|value| on the parameters; a wrong gradient (a missing term of a normalization's backward, a stride off by
one) moves them by 1e-2 or more within these steps.

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

RESNET = {"name": "tiny-resnet", "input": [1, 28, 28], "layers": [
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
LAYERNORM = {"name": "tiny-layernorm", "input": [1, 28, 28], "layers": [
    {"name": "stem", "kind": "conv", "outputs": 6, "kernel": 3, "stride": 2, "activation": "tanh"},
    {"name": "stem.ln", "kind": "layernorm"},
    {"name": "stem.gelu", "kind": "gelu"},
    {"name": "block.conv", "kind": "conv", "outputs": 6, "kernel": 3, "activation": "tanh"},
    {"name": "block.ln", "kind": "layernorm", "epsilon": 1e-3},
    {"name": "block.add", "kind": "add", "inputs": ["block.ln", "stem.gelu"]},
    {"name": "pool", "kind": "maxpool", "kernel": 2},
    {"name": "fc", "kind": "dense", "outputs": 10}]}
# Each image's 28 rows as 28 positions of 28 features: a pre-norm transformer block (causal attention and GPT-2's tanh
# form of GELU in one run, not in the other) and a classifier on the flattened positions.
TRANSFORMER = {"name": "row-transformer", "input": [1, 28, 28], "layers": [
    {"name": "embed", "kind": "linear", "outputs": 16},
    {"name": "ln1", "kind": "layernorm"},
    {"name": "attn", "kind": "attention", "heads": 4},
    {"name": "res1", "kind": "add", "inputs": ["attn", "embed"]},
    {"name": "ln2", "kind": "layernorm"},
    {"name": "mlp1", "kind": "linear", "outputs": 32},
    {"name": "mlp.gelu", "kind": "gelu"},
    {"name": "mlp2", "kind": "linear", "outputs": 16, "activation": "tanh"},
    {"name": "res2", "kind": "add", "inputs": ["mlp2", "res1"]},
    {"name": "fc", "kind": "dense", "outputs": 10}]}
CAUSAL_TRANSFORMER = json.loads(json.dumps(TRANSFORMER).replace('"heads": 4', '"heads": 2, "causal": true')
                                .replace('"kind": "gelu"', '"kind": "gelu", "approximate": "tanh"'))
CAUSAL_TRANSFORMER["name"] = "causal-row-transformer"
# A vision transformer's shape: 4x4 patches by a strided convolution, 49 positions of 16 features. Its MLP uses tanh,
# not ReLU: a unit a few inputs barely reach gets gradients of rounding noise, which Adam's normalised steps magnify.
PATCH_TRANSFORMER = {"name": "patch-transformer", "input": [1, 28, 28], "layers": [
    {"name": "patches", "kind": "conv", "outputs": 16, "kernel": 4, "stride": 4, "padding": 0},
    {"name": "tokens", "kind": "tokens"},
    {"name": "position", "kind": "position"},
    {"name": "ln1", "kind": "layernorm"},
    {"name": "attn", "kind": "attention", "heads": 2},
    {"name": "res1", "kind": "add", "inputs": ["attn", "position"]},
    {"name": "ln2", "kind": "layernorm"},
    {"name": "mlp1", "kind": "linear", "outputs": 32, "activation": "tanh"},
    {"name": "mlp2", "kind": "linear", "outputs": 16},
    {"name": "res2", "kind": "add", "inputs": ["mlp2", "res1"]},
    {"name": "fc", "kind": "dense", "outputs": 10}]}
# Sequences of SEQUENCE ids below VOCABULARY, PAD after each sequence's 3 to SEQUENCE real ids.
SEQUENCE, VOCABULARY, PAD = 12, 50, 0
ENCODER = {"name": "text-encoder", "input": [SEQUENCE], "layers": [
    {"name": "embed", "kind": "embedding", "vocabulary": VOCABULARY, "outputs": 16},
    {"name": "position", "kind": "position"},
    {"name": "mask", "kind": "mask", "pad": PAD, "inputs": ["input"]},
    {"name": "ln1", "kind": "layernorm", "inputs": ["position"]},
    {"name": "attn", "kind": "attention", "heads": 2, "inputs": ["ln1", "mask"]},
    {"name": "res1", "kind": "add", "inputs": ["attn", "position"]},
    {"name": "ln2", "kind": "layernorm"},
    {"name": "mlp1", "kind": "linear", "outputs": 32, "activation": "tanh"},
    {"name": "mlp2", "kind": "linear", "outputs": 16},
    {"name": "res2", "kind": "add", "inputs": ["mlp2", "res1"]},
    {"name": "norm", "kind": "layernorm"},
    {"name": "summary", "kind": "first"},
    {"name": "fc", "kind": "dense", "outputs": 4}]}
STEPS, BATCH, SMOOTHING = 10, 64, 0.1
SGD_LR, SGD_DECAY = 0.05, 1e-3
ADAMW_LR, ADAMW_DECAY, WARMUP = 0.003, 0.01, 3


def cosine_with_warmup(step):
    """glnet's --schedule cosine --warmup-epochs 3 at one step per epoch (model/Schedule.h), step from 1."""
    if step <= WARMUP:
        return ADAMW_LR * step / WARMUP
    return ADAMW_LR * (1 + np.cos(np.pi * (step - WARMUP - 1) / (STEPS - WARMUP))) / 2


def glnet_module(model, layer):
    """The PyTorch module holding a described layer's tensors, or None."""
    key = layer["name"].replace(".", "_")
    if key not in model.modules_:
        return None
    module = model.modules_[key]
    return module[0] if layer["kind"] in ("conv", "linear") else module[1] if layer["kind"] == "dense" else module


def glnet_names(model, description):
    """PyTorch's tensors of the described model under glnet's names (conv1.weight, bn.running_mean, ...)."""
    tensors = {}
    for layer in description["layers"]:
        module = glnet_module(model, layer)
        if module is None:
            continue
        for key, value in module.state_dict().items():
            if key != "num_batches_tracked":
                tensors[layer["name"] + "." + key] = value.detach().numpy().copy()
    return tensors


def mnist_batch(mnist):
    """The first BATCH MNIST training images as x/255 [N, 1, 28, 28], their labels, and glnet_train's data flags."""
    images = train_peer.idx(mnist, "train-images-idx3-ubyte")[:BATCH]
    labels = train_peer.idx(mnist, "train-labels-idx1-ubyte")[:BATCH].astype(np.int64)
    x = torch.from_numpy(images.astype(np.float32) / 255).unsqueeze(1)
    return x, torch.from_numpy(labels), ["--data", mnist, "--no-standardize"]


def token_batch(work):
    """BATCH padded sequences of random ids and labels below 4, written as glnet_train's ids data set in `work` (the
    same as training and test set), and its data flags."""
    random = np.random.default_rng(5)
    ids = random.integers(1, VOCABULARY, (BATCH, SEQUENCE))
    lengths = random.integers(3, SEQUENCE + 1, BATCH)
    ids[np.arange(SEQUENCE)[None, :] >= lengths[:, None]] = PAD
    labels = random.integers(0, 4, BATCH)
    work.mkdir(parents=True, exist_ok=True)
    for split in ("train", "test"):
        np.save(work / f"{split}-ids.npy", ids)
        np.save(work / f"{split}-labels.npy", labels)
    return torch.from_numpy(ids), torch.from_numpy(labels), ["--dataset", "ids", "--data", str(work)]


def compare(train, work, description, flags, make_optimizer, learning_rate, data, export=False):
    """Trains `description` for STEPS steps on both sides on `data` (inputs, labels, glnet_train's flags); returns the
    number of mismatches. `export`: glnet_train also writes the model as ONNX, which glnet_run must run as PyTorch
    does."""
    print(f"{description['name']}: glnet_train {' '.join(flags)}")
    work.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(3)
    model = train_peer.Described(json.loads(json.dumps(description)))
    for module in model.modules():
        if isinstance(module, train_peer.Position):
            torch.nn.init.uniform_(module.weight, -0.5, 0.5)
        if isinstance(module, torch.nn.LayerNorm):
            torch.nn.init.uniform_(module.weight, 0.5, 1.5)
            torch.nn.init.uniform_(module.bias, -0.5, 0.5)
    net = work / "net.json"
    net.write_text(json.dumps(description))
    write_safetensors(work / "init.safetensors", glnet_names(model, description), {"network": json.dumps(description)})
    x, y, data_flags = data

    result = subprocess.run([train, "--net", str(net), "--init", str(work / "init.safetensors")] + data_flags +
                            ["--train-limit", str(BATCH), "--batch", str(BATCH), "--test-limit", "10", "--epochs", str(STEPS),
                             "--label-smoothing", str(SMOOTHING), "--json",
                             "--out", str(work / "glnet.safetensors")] + flags +
                            (["--export-onnx", str(work / "glnet.onnx")] if export else []), capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit("glnet_train failed: " + result.stderr.strip().splitlines()[-1])
    glnet_losses = [epoch["train_loss"] for epoch in json.loads(result.stdout)["epochs"]]

    optimizer = make_optimizer(model)
    model.train()
    torch_losses = []
    for step in range(1, STEPS + 1):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step)
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y, label_smoothing=SMOOTHING)
        loss.backward()
        optimizer.step()
        torch_losses.append(loss.item())

    failures = compare_losses(glnet_losses, torch_losses, STEPS)
    trained, _ = read_safetensors(work / "glnet.safetensors")
    expected = glnet_names(model, description)
    if set(trained) != set(expected):
        sys.exit(f"glnet's model has tensors {sorted(set(trained) ^ set(expected))} that PyTorch's lacks or the reverse")
    for name, value in expected.items():
        if name.endswith(".in_proj_bias"):
            # The keys' bias adds q·b to every score of a query's row, which softmax ignores: its gradient is 0 but for
            # rounding, which Adam's normalised steps turn into moves of up to the learning rate on either side.
            width = value.shape[0] // 3
            trained[name], value = np.delete(trained[name], np.s_[width:2 * width]), np.delete(value, np.s_[width:2 * width])
        difference = np.abs(trained[name] - value) - (1e-4 + 1e-3 * np.abs(value))
        if difference.max() > 0:
            failures += 1
            print(f"{name}: max |glnet - PyTorch| {np.abs(trained[name] - value).max():.3g} beyond the tolerance")
    print(f"{len(expected)} tensors compared after {STEPS} steps")
    if export:
        failures += compare_export(train, work, description, x[:8])
    return failures


def run_export(train, work, inputs):
    """glnet_run's logits of the exported model on `inputs` (saved as float32)."""
    run = Path(train).parent / "glnet_run"
    np.save(work / "inputs.npy", inputs.numpy().astype(np.float32))
    result = subprocess.run([str(run), "--model", str(work / "glnet.onnx"), "--input", str(work / "inputs.npy"), "--output",
                             str(work / "logits.npy")], capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit("glnet_run failed on the exported model: " + result.stderr.strip().splitlines()[-1])
    return np.load(work / "logits.npy")


def padding_matters(train, work, model, ids):
    """The exported encoder's logits of padded sequences are PyTorch's float64 of each sequence cut to its real ids
    (no padding at all), and move when a real id (not the first) changes."""
    base = run_export(train, work, ids)
    with torch.no_grad():
        unpadded = np.concatenate([model(row[row != PAD][None]).numpy() for row in ids])
    padding_error = np.abs(base - unpadded).max()
    real = ids.clone()
    real[:, 1] = torch.where(real[:, 1] == 9, 10, 9)
    real_change = np.abs(run_export(train, work, real) - base).max(axis=1).min()
    ok = padding_error <= 1e-4 * np.abs(unpadded).max() and real_change > 1e-3 * np.abs(base).max()
    print(f"padding mask: padded against unpadded sequences {padding_error:.3g}; a real id changed moves each sequence's logits "
          f"by at least {real_change:.3g}{'' if ok else ' (padding must change nothing, a real id something)'}")
    return 0 if ok else 1


def compare_export(train, work, description, images):
    """The trained model as glnet_train exported it, run by glnet_run, against PyTorch's float64 on glnet's trained
    weights."""
    model = train_peer.Described(json.loads(json.dumps(description)))
    trained, _ = read_safetensors(work / "glnet.safetensors")
    for layer in description["layers"]:
        module = glnet_module(model, layer)
        if module is not None and list(module.state_dict()):
            module.load_state_dict({key: torch.from_numpy(trained[layer["name"] + "." + key].copy()) for key in module.state_dict()
                                    if key != "num_batches_tracked"}, strict=False)
    logits = run_export(train, work, images)
    with torch.no_grad():
        expected = model.double().eval()(images.double()).numpy()
    difference = np.abs(logits - expected).max()
    ok = difference <= 1e-4 * np.abs(expected).max()
    print(f"exported ONNX through glnet_run: max |glnet - PyTorch float64| {difference:.3g}{'' if ok else ' beyond 1e-4 of the largest'}")
    # The attention is written op by op in the form the importer fuses back into one kernel.
    info = subprocess.run([str(Path(train).parent / "glnet_info"), "--model", str(work / "glnet.onnx")], capture_output=True, text=True)
    fused = info.stdout.count("attention (fused")
    attentions = sum(layer["kind"] == "attention" for layer in description["layers"])
    print(f"glnet_info: {fused} of {attentions} attention layers fused")
    failures = (0 if ok else 1) + (fused != attentions)
    if any(layer["kind"] == "mask" for layer in description["layers"]):
        failures += padding_matters(train, work, model, images)
    return failures


def decay_groups(model, decay):
    """Weight decay on the weights (rank 2 and more) alone, as glnet applies it."""
    return [{"params": [p for p in model.parameters() if p.dim() >= 2], "weight_decay": decay},
            {"params": [p for p in model.parameters() if p.dim() < 2], "weight_decay": 0.0}]


def make_adamw(model):
    return torch.optim.AdamW(decay_groups(model, ADAMW_DECAY), lr=ADAMW_LR, betas=(0.9, 0.999), eps=1e-8)


def main(train, mnist, work):
    work = Path(work)
    images = mnist_batch(mnist)
    failures = compare(train, work / "resnet", RESNET,
                       ["--optimizer", "momentum", "--nesterov", "--weight-decay", str(SGD_DECAY), "--lr", str(SGD_LR)],
                       lambda model: torch.optim.SGD(decay_groups(model, SGD_DECAY), lr=SGD_LR, momentum=0.9, nesterov=True),
                       lambda step: SGD_LR, images)
    adamw = ["--optimizer", "adamw", "--weight-decay", str(ADAMW_DECAY), "--lr", str(ADAMW_LR), "--schedule", "cosine",
             "--warmup-epochs", str(WARMUP)]
    failures += compare(train, work / "layernorm", LAYERNORM, adamw, make_adamw, cosine_with_warmup, images)
    for description in (TRANSFORMER, CAUSAL_TRANSFORMER, PATCH_TRANSFORMER):
        failures += compare(train, work / description["name"], description, adamw, make_adamw, cosine_with_warmup, images, export=True)
    failures += compare(train, work / "text-encoder", ENCODER, adamw, make_adamw, cosine_with_warmup, token_batch(work / "text-encoder"),
                        export=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main(*sys.argv[1:])
