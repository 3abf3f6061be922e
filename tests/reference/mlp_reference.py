#!/usr/bin/python3
"""An independent float64 NumPy implementation of glnet's MLP inference, used to check the commands end to end.

It writes its own safetensors model and PNG files and parses the IDX files itself, so nothing of glnet's C++
is shared with what it checks.

  mlp_reference.py eval    --eval BIN --data DIR --work DIR [--arch 784-128-10] [--seed N]
  mlp_reference.py predict --predict BIN --data DIR --work DIR
"""
import argparse
import json
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np


def write_safetensors(path, tensors, metadata):
    header, blobs, offset = {"__metadata__": metadata}, [], 0
    for name, array in tensors.items():
        data = np.ascontiguousarray(array, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    Path(path).write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def random_model(sizes, seed):
    rng = np.random.default_rng(seed)
    tensors = {}
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:]), start=1):
        bound = 1.0 / np.sqrt(fan_in)
        tensors[f"fc{i}.weight"] = rng.uniform(-bound, bound, (fan_out, fan_in)).astype(np.float32)
        tensors[f"fc{i}.bias"] = rng.uniform(-bound, bound, fan_out).astype(np.float32)
    return tensors


def read_idx(path):
    data = Path(path).read_bytes()
    rank = data[3]
    dims = struct.unpack(">" + "I" * rank, data[4:4 + 4 * rank])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * rank).reshape(dims)


def logits(tensors, pixels):
    x = pixels.reshape(len(pixels), -1).astype(np.float64) / 255.0
    layers = len(tensors) // 2
    for i in range(1, layers + 1):
        x = x @ tensors[f"fc{i}.weight"].astype(np.float64).T + tensors[f"fc{i}.bias"].astype(np.float64)
        if i < layers:
            x = np.maximum(x, 0.0)
    return x


def softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def write_png(path, image):
    height, width = image.shape
    raw = b"".join(b"\x00" + image[row].astype(np.uint8).tobytes() for row in range(height))

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    Path(path).write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
                           + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def check_eval(args):
    sizes = [int(s) for s in args.arch.split("-")]
    tensors = random_model(sizes, args.seed)
    model = Path(args.work) / "reference-model.safetensors"
    write_safetensors(model, tensors, {"architecture": args.arch, "activation": "relu"})
    predictions_file = Path(args.work) / "predictions.txt"
    subprocess.run([args.eval, "--model", str(model), "--data", args.data, "--batch", "999",
                    "--predictions", str(predictions_file), "--json"], check=True, stdout=subprocess.DEVNULL)
    gpu = np.array([int(line) for line in predictions_file.read_text().split()])
    images = read_idx(Path(args.data) / "t10k-images-idx3-ubyte")
    z = logits(tensors, images)
    reference = z.argmax(axis=1)
    top2 = np.sort(z, axis=1)[:, -2:]
    # fp32 against float64: a flip is acceptable only where the two best logits are within 1e-4 of each other.
    near_tie = (top2[:, 1] - top2[:, 0]) < 1e-4 * np.maximum(1.0, np.abs(top2[:, 1]))
    assert len(gpu) == len(reference), f"{len(gpu)} predictions for {len(reference)} images"
    differ = gpu != reference
    unexplained = np.flatnonzero(differ & ~near_tie)
    print(f"{len(reference)} images: {differ.sum()} predictions differ from float64, {near_tie.sum()} near ties, "
          f"{len(unexplained)} unexplained")
    if len(unexplained):
        sys.exit(f"predictions differ from the float64 reference at {unexplained[:10].tolist()}")


def check_predict(args):
    tensors = random_model([784, 64, 10], 7)
    model = Path(args.work) / "predict-model.safetensors"
    write_safetensors(model, tensors, {"architecture": "784-64-10"})
    images = read_idx(Path(args.data) / "t10k-images-idx3-ubyte")
    paths = []
    for index in (0, 1, 2):
        path = Path(args.work) / f"digit{index}.png"
        write_png(path, images[index])
        paths.append(str(path))
    output = subprocess.run([args.predict, "--model", str(model), "--json", *paths, "--mnist-index", "3", "--data",
                             args.data], check=True, capture_output=True, text=True).stdout
    results = json.loads(output)
    assert len(results) == 4, output
    expected = softmax(logits(tensors, images[:4]))
    for i, result in enumerate(results):
        assert result["class"] == int(expected[i].argmax()), (i, result["class"], expected[i])
        error = np.abs(np.array(result["probabilities"]) - expected[i]).max()
        assert error <= 1e-5, f"image {i}: probabilities differ from float64 by {error}"
    assert results[3]["label"] == int(read_idx(Path(args.data) / "t10k-labels-idx1-ubyte")[3])
    print("glnet_predict matches the float64 reference on PNG files and --mnist-index")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    e = sub.add_parser("eval")
    e.add_argument("--eval", required=True)
    e.add_argument("--arch", default="784-128-10")
    e.add_argument("--seed", type=int, default=3)
    p = sub.add_parser("predict")
    p.add_argument("--predict", required=True)
    for s in (e, p):
        s.add_argument("--data", required=True)
        s.add_argument("--work", required=True)
    args = parser.parse_args()
    Path(args.work).mkdir(parents=True, exist_ok=True)
    check_eval(args) if args.command == "eval" else check_predict(args)


if __name__ == "__main__":
    main()
