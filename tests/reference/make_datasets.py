#!/usr/bin/python3
"""Small learnable data sets in the formats glnet_train reads besides IDX, written from scratch (NumPy, zlib):

  make_datasets.py cifar DIR     CIFAR-10's binary version: data_batch_1.bin, data_batch_2.bin (300 records each) and
                                 test_batch.bin (200): 10 classes, each a colour and a stripe frequency, with noise
  make_datasets.py folder DIR    an ImageFolder tree DIR/{circle,square,cross}/*.png, 40 RGB images each of sizes from
                                 12x12 to 40x30 (to be resized), shapes at random places on noisy backgrounds
"""
import struct
import sys
import zlib
from pathlib import Path

import numpy as np


def png(pixels):
    """An 8-bit RGB PNG of an [H, W, 3] uint8 array."""
    height, width, _ = pixels.shape
    raw = b"".join(b"\x00" + pixels[y].tobytes() for y in range(height))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def cifar_record(label, rng):
    y, x = np.mgrid[0:32, 0:32]
    image = rng.integers(0, 60, (3, 32, 32))
    image[label % 3] += 120
    image += (np.sin(x * (label + 1) * np.pi / 16) > 0).astype(np.int64)[None] * 70
    return bytes([label]) + np.clip(image, 0, 255).astype(np.uint8).tobytes()


def cifar(directory):
    rng = np.random.default_rng(7)
    directory.mkdir(parents=True, exist_ok=True)
    for name, count in (("data_batch_1.bin", 300), ("data_batch_2.bin", 300), ("test_batch.bin", 200)):
        (directory / name).write_bytes(b"".join(cifar_record(int(i % 10), rng) for i in range(count)))


def folder(directory):
    rng = np.random.default_rng(8)
    sizes = [(12, 12), (16, 16), (40, 30), (20, 28)]
    for label, name in enumerate(("circle", "square", "cross")):
        (directory / name).mkdir(parents=True, exist_ok=True)
        for i in range(40):
            width, height = sizes[i % len(sizes)]
            image = rng.integers(0, 50, (height, width, 3))
            y, x = np.mgrid[0:height, 0:width] / np.array([height, width]).reshape(2, 1, 1)
            cy, cx, r = rng.uniform(0.4, 0.6), rng.uniform(0.4, 0.6), rng.uniform(0.25, 0.35)
            if name == "circle":
                mask = (y - cy) ** 2 + (x - cx) ** 2 < r * r
            elif name == "square":
                mask = (abs(y - cy) < r) & (abs(x - cx) < r)
            else:
                mask = ((abs(y - cy) < r / 3) & (abs(x - cx) < r)) | ((abs(x - cx) < r / 3) & (abs(y - cy) < r))
            image[mask] += rng.integers(150, 200, 3)
            (directory / name / f"{i:03d}.png").write_bytes(png(np.clip(image, 0, 255).astype(np.uint8)))


if __name__ == "__main__":
    {"cifar": cifar, "folder": folder}[sys.argv[1]](Path(sys.argv[2]))
