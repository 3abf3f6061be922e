#!/usr/bin/env python3
"""PyTorch peer of glnet's workloads on the same GPU (CUDA when present, TF32 off), printed as JSON.

  torch_peer.py eval --data data/mnist [--runs 50]
      784-128-10 on the 10k MNIST test images: resident (float input already on the GPU, logits and argmax,
      synchronised) and with upload (uint8 → float on the host, copy, run, copy the predictions back).
  torch_peer.py all --data data/mnist
      every workload below, as one JSON object (what bench/run-gpu uses).
  torch_peer.py dispatch
      100 dependent one-element kernels (x = x + y), per launch.
  torch_peer.py predict1 --data data/mnist
      one image through 784-128-10: float upload, run, argmax, copy back.
  torch_peer.py elementwise
      normalize (÷255), weigh (× weights), tanh on 1M floats resident on the GPU: 3 kernels, and the same
      expression fused by torch.compile when it works (reported as absent otherwise).
  torch_peer.py train --data data/mnist [--arch 784-128-10 --batch 64 --lr 0.1]
      one epoch of an MLP (ReLU between layers), SGD, data resident on the GPU: eager, and the whole step
      captured in a CUDA graph.
  torch_peer.py cnn --data data/mnist
      the MNIST CNN (conv5x5x32-pool-conv5x5x64-pool-fc512-fc10, cuDNN fp32, TF32 off): one training epoch at
      batch 100 (SGD with momentum 0.9, lr 0.02; eager and CUDA graph) and 10k test images resident.
  torch_peer.py check-model MODEL --data data/mnist --predictions FILE
      loads a glnet safetensors model (MLP or CNN) into torch modules and compares its test-set predictions
      with glnet_eval --predictions FILE.
  torch_peer.py gemm --cases GLNET_GEMM.json [--runs 50]
      the cases of glnet_bench --gemm (read from its JSON, so both run the same list): F.linear, dY·W, dYᵀ·X,
      F.conv2d and its input and weight gradients (torch.nn.grad), GPU time per call by CUDA events, with
      cudnn.benchmark on so cuDNN picks its fastest algorithm.
  torch_peer.py export-cnn MODEL
      writes a freshly initialised PyTorch CNN's state_dict as safetensors (PyTorch's names and layouts), for
      glnet_eval to load.
"""
import argparse
import json
import statistics
import struct
import time
from pathlib import Path

import numpy as np
import torch


def read_idx(path):
    data = Path(path).read_bytes()
    rank = data[3]
    dims = struct.unpack(">" + "I" * rank, data[4:4 + 4 * rank])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * rank).reshape(dims)


def timed(function, runs, device):
    for _ in range(5):
        function()
    samples = []
    for _ in range(runs):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        function()
        if device.type == "cuda":
            torch.cuda.synchronize()
        samples.append((time.perf_counter() - start) * 1e3)
    return {"median_ms": statistics.median(samples), "min_ms": min(samples)}


def bench_eval(args, device):
    images = read_idx(Path(args.data) / "t10k-images-idx3-ubyte").reshape(-1, 784)
    model = torch.nn.Sequential(torch.nn.Linear(784, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).to(device).eval()
    resident = torch.from_numpy(images.astype(np.float32) / 255.0).to(device)

    @torch.no_grad()
    def run_resident():
        return model(resident).argmax(dim=1)

    @torch.no_grad()
    def run_with_upload():
        x = torch.from_numpy(images.astype(np.float32) / 255.0).to(device)
        return model(x).argmax(dim=1).cpu()

    return {"workload": "eval 784-128-10 10k", "resident": timed(run_resident, args.runs, device),
            "with_upload": timed(run_with_upload, args.runs, device)}


def read_safetensors(path):
    data = Path(path).read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    metadata = header.pop("__metadata__", {})
    tensors = {name: torch.from_numpy(np.frombuffer(data, dtype="<f4", count=int(np.prod(entry["shape"])),
                                                    offset=8 + length + entry["data_offsets"][0]).reshape(entry["shape"]).copy())
               for name, entry in header.items()}
    return tensors, metadata


def mlp(sizes):
    layers = torch.nn.ModuleDict({f"fc{i + 1}": torch.nn.Linear(a, b) for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:]))})

    class Mlp(torch.nn.Module):
        def __init__(self):
            super().__init__()
            for name, layer in layers.items():
                setattr(self, name, layer)

        def forward(self, x):
            for i in range(len(layers)):
                x = getattr(self, f"fc{i + 1}")(x)
                if i + 1 < len(layers):
                    x = torch.relu(x)
            return x

    return Mlp()


def epoch_timings(args, device, model, optimizer, batch, runs):
    """One epoch of MNIST training with the data resident: (eager timing, CUDA-graph timing or None)."""
    images = read_idx(Path(args.data) / "train-images-idx3-ubyte").reshape(-1, 784)
    labels = read_idx(Path(args.data) / "train-labels-idx1-ubyte")
    x_all = torch.from_numpy(images.astype(np.float32) / 255.0).to(device)
    y_all = torch.from_numpy(labels.astype(np.int64)).to(device)
    steps = len(images) // batch
    loss_function = torch.nn.CrossEntropyLoss()

    def step(x, y):
        optimizer.zero_grad(set_to_none=False)
        loss_function(model(x), y).backward()
        optimizer.step()

    def epoch_eager():
        order = torch.randperm(len(images), device=device)
        for s in range(steps):
            index = order[s * batch:(s + 1) * batch]
            step(x_all[index], y_all[index])

    eager = timed(epoch_eager, runs, device)
    graph = timed(graph_epoch(step, x_all, y_all, batch, steps, device), runs, device) if device.type == "cuda" else None
    return eager, graph


def graph_epoch(step, x_all, y_all, batch, steps, device):
    """One epoch with the whole training step captured in a CUDA graph and replayed per shuffled batch."""
    static_x, static_y = x_all[:batch].clone(), y_all[:batch].clone()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            step(static_x, static_y)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step(static_x, static_y)

    def epoch():
        order = torch.randperm(len(x_all), device=device)
        for s in range(steps):
            index = order[s * batch:(s + 1) * batch]
            static_x.copy_(x_all[index])
            static_y.copy_(y_all[index])
            graph.replay()

    return epoch


class Cnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 32, 5, padding=2)
        self.conv2 = torch.nn.Conv2d(32, 64, 5, padding=2)
        self.fc1 = torch.nn.Linear(64 * 7 * 7, 512)
        self.fc2 = torch.nn.Linear(512, 10)

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(torch.relu(self.conv1(x.view(-1, 1, 28, 28))), 2)
        x = torch.nn.functional.max_pool2d(torch.relu(self.conv2(x)), 2)
        return self.fc2(torch.relu(self.fc1(x.flatten(1))))


def write_safetensors(path, tensors, metadata):
    header, blobs, offset = {"__metadata__": metadata}, [], 0
    for name, tensor in tensors.items():
        data = tensor.detach().cpu().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensor.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    Path(path).write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def bench_cnn(args, device):
    test = read_idx(Path(args.data) / "t10k-images-idx3-ubyte").reshape(-1, 784)
    model = Cnn().to(device)
    eager, graph = epoch_timings(args, device, model, torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9), 100, 3)
    result = {"workload": "cnn", "train_epoch_eager": eager}
    if graph:
        result["train_epoch_cuda_graph"] = graph
    resident = torch.from_numpy(test.astype(np.float32) / 255.0).to(device)

    @torch.no_grad()
    def evaluate():
        return model(resident).argmax(dim=1)

    model.eval()
    result["eval_10k_resident"] = timed(evaluate, args.runs, device)
    return result


def export_cnn(args, device):
    torch.manual_seed(0)
    model = Cnn()
    write_safetensors(args.model, model.state_dict(), {"source": "PyTorch state_dict"})
    return {"workload": "export-cnn", "model": args.model, "tensors": list(model.state_dict())}


def bench_dispatch(args, device):
    x = torch.ones(1, device=device)
    y = torch.zeros(1, device=device)

    def chain():
        nonlocal x
        for _ in range(100):
            x = x + y

    result = timed(chain, args.runs, device)
    return {"workload": "100 dependent kernels", "per_launch_ms": result["median_ms"] / 100, "chain": result}


def bench_predict1(args, device):
    image = read_idx(Path(args.data) / "t10k-images-idx3-ubyte").reshape(-1, 784)[:1]
    model = mlp([784, 128, 10]).to(device).eval()

    @torch.no_grad()
    def run():
        x = torch.from_numpy(image.astype(np.float32) / 255.0).to(device)
        return model(x).argmax(dim=1).cpu()

    return {"workload": "single image 784-128-10 upload+run+read", "round_trip": timed(run, args.runs * 5, device)}


def bench_elementwise(args, device):
    n = 1000000
    rng = np.random.default_rng(1)
    grey = torch.from_numpy(np.floor(rng.uniform(0, 255, n)).astype(np.float32)).to(device)
    weights = torch.from_numpy(rng.normal(0.5, 0.1, n).astype(np.float32)).to(device)

    def three():
        return torch.tanh((grey / 255) * weights)

    result = {"workload": "normalize-weigh-tanh 1M floats resident", "three_kernels": timed(three, args.runs, device)}
    try:
        fused = torch.compile(three)
        fused()
        result["fused_compiled"] = timed(fused, args.runs, device)
    except Exception as error:  # torch.compile needs a working Triton toolchain
        result["fused_compiled"] = f"absent ({type(error).__name__})"
    return result


def bench_all(args, device):
    return {name: function(args, device) for name, function in
            [("dispatch", bench_dispatch), ("predict1", bench_predict1), ("eval", bench_eval),
             ("elementwise", bench_elementwise), ("train", bench_train)]}


def bench_gemm(args, device):
    import torch.nn.functional as F
    torch.backends.cudnn.benchmark = True
    cases = {}
    for case in json.loads(Path(args.cases).read_text())["gemm"]:
        cases.setdefault(case["name"], case)
    results = {}
    for name, case in cases.items():
        layout = case["layout"]
        make = lambda *shape: torch.rand(*shape, device=device) * 2 - 1
        if "dense" in case:
            m, k, n = case["dense"]["rows"], case["dense"]["inputs"], case["dense"]["outputs"]
            if layout == "dense X.W^T":
                x, w, b = make(m, k), make(n, k), make(n)
                call = lambda: F.linear(x, w, b)
            elif layout == "dense dX=dY.W":
                dy, w = make(m, n), make(n, k)
                call = lambda: torch.mm(dy, w)
            else:
                dy, x = make(m, n), make(m, k)
                call = lambda: torch.mm(dy.t(), x)
        else:
            c = case["conv"]
            x_shape = (c["batch"], c["channels"], c["height"], c["width"])
            w_shape = (c["out_channels"], c["channels"], c["kernel"], c["kernel"])
            out = c["height"] + 2 * c["padding"] - c["kernel"] + 1
            y_shape = (c["batch"], c["out_channels"], out, out)
            pad = c["padding"]
            if layout == "conv forward":
                x, w, b = make(*x_shape), make(*w_shape), make(c["out_channels"])
                call = lambda: F.conv2d(x, w, b, padding=pad)
            elif layout == "conv dX":
                dy, w = make(*y_shape), make(*w_shape)
                call = lambda: torch.nn.grad.conv2d_input(x_shape, w, dy, padding=pad)
            else:
                dy, x = make(*y_shape), make(*x_shape)
                call = lambda: torch.nn.grad.conv2d_weight(x, w_shape, dy, padding=pad)
        for _ in range(5):
            call()
        samples = []
        for _ in range(args.runs):
            if device.type == "cuda":
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                call()
                end.record()
                end.synchronize()
                samples.append(start.elapsed_time(end))
            else:
                begin = time.perf_counter()
                call()
                samples.append((time.perf_counter() - begin) * 1e3)
        median = statistics.median(samples)
        results[name] = {"median_ms": median, "tflops": case["flops"] / (median * 1e-3) / 1e12}
    return {"workload": "gemm", "gemm": results}


def bench_train(args, device):
    model = mlp([int(size) for size in args.arch.split("-")]).to(device)
    eager, graph = epoch_timings(args, device, model, torch.optim.SGD(model.parameters(), lr=args.lr), args.batch,
                                 max(1, args.runs // 10))
    result = {"workload": f"train epoch {args.arch} batch {args.batch} sgd", "eager": eager}
    if graph:
        result["cuda_graph"] = graph
    return result


def check_model(args, device):
    tensors, metadata = read_safetensors(args.model)
    if "conv1.weight" in tensors:
        model = Cnn()
    else:
        sizes = [tensors["fc1.weight"].shape[1]] + [tensors[f"fc{i}.weight"].shape[0] for i in range(1, len(tensors) // 2 + 1)]
        model = mlp(sizes)
    model.load_state_dict(tensors)
    model = model.to(device).eval()
    mean, std = float(metadata.get("input_mean", 0)), float(metadata.get("input_std", 1))
    images = read_idx(Path(args.data) / "t10k-images-idx3-ubyte").reshape(-1, 784)
    with torch.no_grad():
        x = (torch.from_numpy(images.astype(np.float32) / 255.0) - mean) / std
        logits = model(x.to(device)).double().cpu().numpy()
    torch_predictions = logits.argmax(axis=1)
    glnet_predictions = np.array([int(line) for line in Path(args.predictions).read_text().split()])
    top2 = np.sort(logits, axis=1)[:, -2:]
    near_tie = (top2[:, 1] - top2[:, 0]) < 1e-4 * np.maximum(1.0, np.abs(top2[:, 1]))
    differ = torch_predictions != glnet_predictions
    return {"workload": "check-model", "model": args.model, "images": len(images), "differ": int(differ.sum()),
            "differ_outside_near_ties": int((differ & ~near_tie).sum()), "same": bool(not (differ & ~near_tie).any())}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("workload", choices=["all", "dispatch", "predict1", "eval", "elementwise", "train", "cnn", "check-model",
                                             "export-cnn", "gemm"])
    parser.add_argument("model", nargs="?")
    parser.add_argument("--data", default="data/mnist")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--predictions")
    parser.add_argument("--arch", default="784-128-10", help="MLP layer sizes (train)")
    parser.add_argument("--batch", type=int, default=64, help="training batch (train)")
    parser.add_argument("--lr", type=float, default=0.1, help="SGD learning rate (train)")
    parser.add_argument("--cases", help="glnet_bench --gemm --json-out output (gemm)")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    result = {"device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu", "torch": torch.__version__}
    workloads = {"all": bench_all, "dispatch": bench_dispatch, "predict1": bench_predict1, "eval": bench_eval,
                 "elementwise": bench_elementwise, "train": bench_train, "cnn": bench_cnn, "check-model": check_model,
                 "export-cnn": export_cnn, "gemm": bench_gemm}
    result.update(workloads[args.workload](args, device))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
