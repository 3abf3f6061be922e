#!/usr/bin/env python3
"""PyTorch peer of glnet's workloads on the same GPU (CUDA when present, TF32 off), printed as JSON.

  torch_peer.py eval --data data/mnist [--runs 50]
      784-128-10 on the 10k MNIST test images: resident (float input already on the GPU, logits and argmax,
      synchronised) and with upload (uint8 → float on the host, copy, run, copy the predictions back).
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


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("workload", choices=["eval"])
    parser.add_argument("--data", default="data/mnist")
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    result = {"device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu", "torch": torch.__version__}
    result.update(bench_eval(args, device))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
