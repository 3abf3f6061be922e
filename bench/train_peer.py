#!/usr/bin/env python3
"""bench/train_peer.py NET.json DATA [options]: the PyTorch peer of glnet_train, on the GPU machine. Builds the network the
description gives (the same layers, PyTorch's default initialisation), keeps the data set on the GPU as uint8 (IDX
files, or an image folder DATA/train/CLASS/*.png and DATA/test/... read as glnet reads one: RGB planes, classes in name
order; or the token ids of glnet's ids data set, DATA/train-ids.npy and the rest, as int64), standardizes images per
channel with the training set's mean and deviation as glnet does,
gathers, augments (shifts with zeros uncovered and flips, drawn per image and epoch before the epoch) and normalises each
batch there, and runs each training step (forward, loss, backward, SGD/momentum/Adam/AdamW update with the same
schedule) as one captured CUDA graph. fp32, TF32 off. Prints one JSON line per epoch (seconds of the steps alone, train
loss, test accuracy with the running statistics) and a last line with the median epoch time and, for comparison, the
time of an epoch of the same steps run eagerly (measured on up to 200 steps after the run)."""
import argparse, json, math, os, sys, time
import numpy as np
import torch
from torch import nn
from idx_files import idx

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


class SelfAttention(nn.MultiheadAttention):
    """glnet's attention layer: MultiheadAttention over the second-to-last axis of [N, ..., S, E], its own queries,
    keys and values, optionally causal."""

    def __init__(self, width, heads, causal):
        super().__init__(width, heads, batch_first=True)
        self.causal = causal

    def forward(self, x, key_mask=None):
        rows = x.reshape(-1, x.shape[-2], x.shape[-1])
        mask = torch.triu(torch.ones(x.shape[-2], x.shape[-2], dtype=torch.bool, device=x.device), 1) if self.causal else None
        # glnet's mask layer gives 0 or -inf per key: PyTorch's boolean key_padding_mask is True where it is -inf.
        padding = torch.isinf(key_mask).reshape(-1, x.shape[-2]) if key_mask is not None else None
        return super().forward(rows, rows, rows, need_weights=False, attn_mask=mask, key_padding_mask=padding)[0].reshape(x.shape)


class Embedding(nn.Embedding):
    """glnet's embedding layer: token ids (held as floats or integers) to learned rows, N(0, 1) at first."""

    def forward(self, ids):
        return super().forward(ids.long())


class PaddingMask(nn.Module):
    """glnet's mask layer: -inf where the id is the padding id, 0 elsewhere."""

    def __init__(self, pad):
        super().__init__()
        self.pad = pad

    def forward(self, ids):
        return torch.where(ids == self.pad, float("-inf"), 0.0).to(torch.get_default_dtype())


class First(nn.Module):
    """glnet's first layer: the first position's features, [N, ..., S, E] → [N, ..., E]."""

    def forward(self, x):
        return x[..., 0, :]


class Tokens(nn.Module):
    """glnet's tokens layer: [N, C, H, W] → [N, H·W, C]."""

    def forward(self, x):
        return x.flatten(2).transpose(1, 2)


class Position(nn.Module):
    """glnet's position layer: a learned [S, E] added (zeros at first); a shorter sequence takes the first rows."""

    def __init__(self, positions, width):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(positions, width))

    def forward(self, x):
        return x + self.weight[:x.shape[-2]]


class Described(nn.Module):
    """The layers of a glnet network description, evaluated in order by name."""

    def __init__(self, description):
        super().__init__()
        self.layers = description["layers"]
        shapes = {"input": list(description["input"])}
        self.modules_ = nn.ModuleDict()
        previous = "input"
        act = {"relu": nn.ReLU(), "tanh": nn.Tanh(), "sigmoid": nn.Sigmoid(), "silu": nn.SiLU(), "gelu": nn.GELU(),
               "hardswish": nn.Hardswish(), "none": nn.Identity()}
        for layer in self.layers:
            layer.setdefault("inputs", [previous])
            shape = shapes[layer["inputs"][0]]
            kind, key = layer["kind"], layer["name"].replace(".", "_")
            if kind == "conv":
                k, s = layer["kernel"], layer.get("stride", 1)
                p = layer.get("padding", (k - 1) // 2)
                module = nn.Sequential(nn.Conv2d(shape[0], layer["outputs"], k, s, p, groups=layer.get("groups", 1)),
                                       act[layer.get("activation", "none")])
                shape = [layer["outputs"], (shape[1] + 2 * p - k) // s + 1, (shape[2] + 2 * p - k) // s + 1]
            elif kind == "dense":
                module = nn.Sequential(nn.Flatten(), nn.Linear(int(np.prod(shape)), layer["outputs"]), act[layer.get("activation", "none")])
                shape = [layer["outputs"]]
            elif kind == "linear":
                module = nn.Sequential(nn.Linear(shape[-1], layer["outputs"]), act[layer.get("activation", "none")])
                shape = shape[:-1] + [layer["outputs"]]
            elif kind == "attention":
                module = SelfAttention(shape[-1], layer["heads"], layer.get("causal", False))
            elif kind == "batchnorm":
                bn = nn.BatchNorm2d if len(shape) == 3 else nn.BatchNorm1d
                module = bn(shape[0], eps=layer.get("epsilon", 1e-5), momentum=layer.get("momentum", 0.1))
            elif kind == "layernorm":
                module = nn.LayerNorm(shape[-1], eps=layer.get("epsilon", 1e-5))
            elif kind == "gelu":
                module = nn.GELU(approximate=layer.get("approximate", "none"))
            elif kind in act:
                module = act[kind]
            elif kind == "add":
                module = None
            elif kind in ("maxpool", "avgpool"):
                k = layer["kernel"]
                s, p = layer.get("stride", k), layer.get("padding", 0)
                module = nn.MaxPool2d(k, s, p) if kind == "maxpool" else nn.AvgPool2d(k, s, p, count_include_pad=False)
                shape = [shape[0], (shape[1] + 2 * p - k) // s + 1, (shape[2] + 2 * p - k) // s + 1]
            elif kind == "globalavgpool":
                module = nn.AdaptiveAvgPool2d(1)
                shape = [shape[0], 1, 1]
            elif kind == "tokens":
                module = Tokens()
                shape = [shape[1] * shape[2], shape[0]]
            elif kind == "position":
                module = Position(shape[-2], shape[-1])
            elif kind == "flatten":
                module = nn.Flatten()
                shape = [int(np.prod(shape))]
            elif kind == "embedding":
                module = Embedding(layer["vocabulary"], layer["outputs"])
                shape = shape + [layer["outputs"]]
            elif kind == "mask":
                module = PaddingMask(layer.get("pad", 0))
            elif kind == "first":
                module = First()
                shape = shape[:-2] + shape[-1:]
            else:
                sys.exit(f"unknown kind {kind}")
            if module is not None:
                self.modules_[key] = module
            shapes[layer["name"]] = shape
            previous = layer["name"]

    def forward(self, x):
        outputs = {"input": x}
        for layer in self.layers:
            inputs = [outputs[name] for name in layer["inputs"]]
            if layer["kind"] == "add":
                y = inputs[0] + inputs[1]
            elif layer["kind"] == "attention":
                y = self.modules_[layer["name"].replace(".", "_")](*inputs)
            else:
                y = self.modules_[layer["name"].replace(".", "_")](inputs[0])
            outputs[layer["name"]] = y
        return y


def load_images(data):
    """(train images, train labels, test images, test labels) as NumPy arrays, images uint8 [N, C, H, W]: IDX files
    (one channel), or an image folder DATA/train/CLASS/* and DATA/test/CLASS/* (RGB, classes in name order, files in
    name order, as glnet reads them; the images must already be the network's size)."""
    if not os.path.isdir(os.path.join(data, "train")):
        return (idx(data, "train-images-idx3-ubyte")[:, None].copy(), idx(data, "train-labels-idx1-ubyte").astype(np.int64),
                idx(data, "t10k-images-idx3-ubyte")[:, None].copy(), idx(data, "t10k-labels-idx1-ubyte").astype(np.int64))
    from PIL import Image
    classes = sorted(d for d in os.listdir(os.path.join(data, "train")) if os.path.isdir(os.path.join(data, "train", d)))
    result = []
    for split in ("train", "test"):
        images, labels = [], []
        for label, name in enumerate(classes):
            folder = os.path.join(data, split, name)
            for file in sorted(os.listdir(folder)):
                with Image.open(os.path.join(folder, file)) as image:
                    images.append(np.asarray(image.convert("RGB")).transpose(2, 0, 1))
                labels.append(label)
        result += [np.stack(images), np.array(labels, np.int64)]
    return tuple(result)


def schedule(args, steps_per_epoch):
    total = args.epochs * steps_per_epoch
    warmup = round(args.warmup_epochs * steps_per_epoch)

    def at(step):  # from 1, as glnet's LearningRateSchedule
        if args.schedule == "onecycle":
            up = max(0.3 * total - 1, 1.0)
            s = step - 1
            cos = lambda a, b, done, length: b + (a - b) * (1 + math.cos(math.pi * min(done / max(length, 1.0), 1.0))) / 2
            return cos(args.lr / 25, args.lr, s, up) if s <= up else cos(args.lr, args.lr / 25 / 1e4, s - up, total - 1 - up)
        if step <= warmup:
            return args.lr * step / warmup
        if args.schedule == "cosine":
            return args.lr * (1 + math.cos(math.pi * (step - warmup - 1) / max(total - warmup, 1))) / 2
        if args.schedule == "step":
            return args.lr * args.step_gamma ** ((step - 1) // max(round(args.step_epochs * steps_per_epoch), 1))
        return args.lr
    return at


def main():
    parser = argparse.ArgumentParser()
    for name, kind, default in (("epochs", int, 5), ("batch", int, 128), ("lr", float, 0.1), ("optimizer", str, "momentum"),
                                ("weight-decay", float, 0.0), ("schedule", str, "constant"), ("warmup-epochs", float, 0.0),
                                ("step-epochs", float, 30.0), ("step-gamma", float, 0.1), ("augment-shift", int, 0), ("seed", int, 0),
                                ("label-smoothing", float, 0.0)):
        parser.add_argument("--" + name, type=kind, default=default)
    parser.add_argument("--nesterov", action="store_true")
    parser.add_argument("--augment-flip", action="store_true")
    parser.add_argument("net")
    parser.add_argument("data")
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    device = torch.device("cuda")
    tokens = os.path.exists(os.path.join(args.data, "train-ids.npy"))
    if tokens:
        load = lambda name: torch.from_numpy(np.load(os.path.join(args.data, name)).astype(np.int64)).to(device)
        train_x, train_y, test_x, test_y = (load(f"{split}-{part}.npy") for split in ("train", "test") for part in ("ids", "labels"))
        prepare = lambda ids: ids
    else:
        train_x, train_y, test_x, test_y = (torch.from_numpy(a).to(device) for a in load_images(args.data))
        # glnet_train's standardization: each channel's mean and (population) deviation over the training images.
        pixels = train_x.double() / 255
        mean = pixels.mean(dim=(0, 2, 3), keepdim=True).float()
        std = pixels.std(dim=(0, 2, 3), unbiased=False, keepdim=True).float()
        prepare = lambda images: (images.float() / 255 - mean) / std
    model = Described(json.load(open(args.net))).to(device)
    decayed = [p for p in model.parameters() if p.dim() >= 2]
    others = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decayed, "weight_decay": args.weight_decay}, {"params": others, "weight_decay": 0.0}]
    lr = torch.tensor(args.lr, device=device)
    if args.optimizer in ("sgd", "momentum"):
        # torch.optim.SGD reads a tensor learning rate back to the host, which a CUDA graph cannot capture: the same
        # update (PyTorch's SGD with momentum 0.9, dampening 0, optional Nesterov), written out with the rate on the GPU.
        momentum = 0.9 if args.optimizer == "momentum" else 0.0
        buffers = [torch.zeros_like(p) for p in model.parameters()]

        class ManualSgd:
            state = {}

            def zero_grad(self, set_to_none=False):
                for p in model.parameters():
                    if p.grad is not None:
                        p.grad.zero_()

            @torch.no_grad()
            def step(self):
                # Multi-tensor (foreach) kernels, as torch.optim.SGD's default implementation uses.
                params = list(model.parameters())
                grads = [p.grad for p in params]
                decays = [group["weight_decay"] for group in groups for _ in group["params"]]
                order = [id(p) for group in groups for p in group["params"]]
                decay_of = {pid: d for pid, d in zip(order, decays)}
                decayed = [i for i, p in enumerate(params) if decay_of[id(p)]]
                if decayed:
                    torch._foreach_add_([grads[i] for i in decayed], [params[i] for i in decayed], alpha=decay_of[id(params[decayed[0]])])
                updates = grads
                if momentum:
                    torch._foreach_mul_(buffers, momentum)
                    torch._foreach_add_(buffers, grads)
                    updates = torch._foreach_add(grads, buffers, alpha=momentum) if args.nesterov else buffers
                torch._foreach_sub_(params, torch._foreach_mul(updates, lr))

            def reset(self):
                for buf in buffers:
                    buf.zero_()
        optimizer = ManualSgd()
    else:
        kind = torch.optim.AdamW if args.optimizer == "adamw" else torch.optim.Adam
        optimizer = kind(groups, lr=lr, capturable=True)
    loss_fn = nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)
    n, b = train_x.shape[0], args.batch
    steps = n // b
    at = schedule(args, steps)
    h, w = train_x.shape[-2], train_x.shape[-1]
    static_index = torch.zeros(b, dtype=torch.int64, device=device)
    static_shift = torch.zeros(b, 3, dtype=torch.int64, device=device)  # dx, dy, flip
    rows = torch.arange(h, device=device).view(1, 1, h, 1)
    cols = torch.arange(w, device=device).view(1, 1, 1, w)

    def batch():
        images = train_x[static_index]  # [b, C, h, w] uint8, or [b, S] ids
        if args.augment_shift or args.augment_flip:
            c = images.shape[1]
            dx, dy, flip = (static_shift[:, k].view(b, 1, 1, 1) for k in range(3))
            x = torch.where(flip == 1, w - 1 - cols, cols) - dx
            y = rows - dy
            inside = (x >= 0) & (x < w) & (y >= 0) & (y < h)
            flat = (y.clamp(0, h - 1) * w + x.clamp(0, w - 1)).view(b, 1, -1).expand(b, c, -1)
            moved = torch.gather(images.view(b, c, -1), 2, flat).view(b, c, h, w)
            images = torch.where(inside, moved, torch.zeros_like(images))
        return prepare(images)

    def step():
        optimizer.zero_grad(set_to_none=False)
        loss = loss_fn(model(batch()), train_y[static_index])
        loss.backward()
        optimizer.step()
        return loss

    model.train()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    # Warm-up steps changed the weights: start again from the same initial weights, with fresh optimizer state.
    torch.manual_seed(args.seed)
    fresh = Described(json.load(open(args.net))).to(device)
    with torch.no_grad():
        for p, q in zip(model.state_dict().values(), fresh.state_dict().values()):
            p.copy_(q)
    if hasattr(optimizer, "reset"):
        optimizer.reset()
    for state in optimizer.state.values():
        for value in state.values():
            if torch.is_tensor(value):
                value.zero_()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_loss = step()
    generator = np.random.default_rng(args.seed)
    times = []
    done = 0
    for epoch in range(1, args.epochs + 1):
        order = torch.from_numpy(generator.permutation(n)).to(device)
        span = 2 * args.augment_shift + 1
        draws = torch.from_numpy(np.stack([generator.integers(0, span, n) - args.augment_shift, generator.integers(0, span, n) - args.augment_shift,
                                           generator.integers(0, 2, n) if args.augment_flip else np.zeros(n, np.int64)], 1)).to(device)
        total = torch.zeros((), device=device)
        torch.cuda.synchronize()
        start = time.perf_counter()
        for s in range(steps):
            done += 1
            lr.fill_(at(done))
            static_index.copy_(order[s * b:(s + 1) * b])
            static_shift.copy_(draws[s * b:(s + 1) * b])
            graph.replay()
            total += static_loss
        torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        times.append(seconds)
        model.eval()
        with torch.no_grad():
            correct = sum((model(prepare(test_x[i:i + 1000])).argmax(1) == test_y[i:i + 1000]).sum().item()
                          for i in range(0, test_x.shape[0], 1000))
        model.train()
        print(json.dumps({"epoch": epoch, "seconds": seconds, "train_loss": total.item() / steps, "test_accuracy": correct / test_x.shape[0]}), flush=True)
    # The same step eager (each op launched from Python, as a training loop without CUDA graphs runs), after the run so
    # that it leaves the trajectory above alone: up to 200 steps after 10 unmeasured ones, scaled to an epoch's steps.
    # On the warm-up's stream, where the parameters' gradient accumulators were made: on another, PyTorch warns that
    # their streams differ and may add waits between the streams.
    eager_steps = min(steps, 200)
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for s in range(10 + eager_steps):
            if s == 10:
                torch.cuda.synchronize()
                start = time.perf_counter()
            static_index.copy_(order[(s % steps) * b:(s % steps + 1) * b])
            step()
    torch.cuda.synchronize()
    eager_epoch = (time.perf_counter() - start) / eager_steps * steps
    print(json.dumps({"median_epoch_seconds": float(np.median(times)), "eager_epoch_seconds": eager_epoch,
                      "device": torch.cuda.get_device_name(), "torch": torch.__version__}))


if __name__ == "__main__":
    main()
