#!/usr/bin/env python3
"""bench/make_shapes_folder.py DIR [--train N] [--test N] [--size S] [--seed K]: a CIFAR-10-sized image-folder task for
vision transformers, written as glnet_train's --dataset folder layout (DIR/train/CLASS/NNNNN.png, DIR/test/...): ten
classes of shapes (circle, square, triangle, diamond, plus, cross, ring, frame, horizontal bar, vertical bar), each drawn
in a random colour, size and place over a random background colour, with pixel noise; S x S RGB (default 32, 5 000
training and 1 000 test images per class at the defaults of 50 000 and 10 000, as CIFAR-10 has)."""
import argparse
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

CLASSES = ["circle", "square", "triangle", "diamond", "plus", "cross", "ring", "frame", "hbar", "vbar"]


def colours(random):
    """A background and a shape colour at least 120 apart in sum over the channels, so that every shape shows."""
    while True:
        back, front = random.integers(0, 256, 3), random.integers(0, 256, 3)
        if np.abs(back - front).sum() >= 120:
            return tuple(int(v) for v in back), tuple(int(v) for v in front)


def draw(kind, size, random):
    back, front = colours(random)
    image = Image.new("RGB", (size, size), back)
    pen = ImageDraw.Draw(image)
    extent = random.uniform(0.35, 0.7) * size
    cx, cy = (random.uniform(extent / 2, size - extent / 2) for _ in range(2))
    r = extent / 2
    box = [cx - r, cy - r, cx + r, cy + r]
    width = max(2, int(extent / 6))
    if kind == "circle":
        pen.ellipse(box, fill=front)
    elif kind == "square":
        pen.rectangle(box, fill=front)
    elif kind == "triangle":
        pen.polygon([(cx, cy - r), (cx + r, cy + r), (cx - r, cy + r)], fill=front)
    elif kind == "diamond":
        pen.polygon([(cx, cy - r), (cx + r, cy), (cx, cy + r), (cx - r, cy)], fill=front)
    elif kind == "plus":
        pen.line([(cx - r, cy), (cx + r, cy)], fill=front, width=width)
        pen.line([(cx, cy - r), (cx, cy + r)], fill=front, width=width)
    elif kind == "cross":
        pen.line([(cx - r, cy - r), (cx + r, cy + r)], fill=front, width=width)
        pen.line([(cx - r, cy + r), (cx + r, cy - r)], fill=front, width=width)
    elif kind == "ring":
        pen.ellipse(box, outline=front, width=width)
    elif kind == "frame":
        pen.rectangle(box, outline=front, width=width)
    elif kind == "hbar":
        pen.rectangle([cx - r, cy - width, cx + r, cy + width], fill=front)
    else:
        pen.rectangle([cx - width, cy - r, cx + width, cy + r], fill=front)
    noisy = np.asarray(image).astype(np.int16) + random.integers(-20, 21, (size, size, 3))
    return Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory")
    parser.add_argument("--train", type=int, default=50000)
    parser.add_argument("--test", type=int, default=10000)
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.size < 8:
        parser.error("--size must be at least 8")
    random = np.random.default_rng(args.seed)
    for split, count in (("train", args.train), ("test", args.test)):
        for k in range(count):
            kind = CLASSES[k % len(CLASSES)]
            folder = Path(args.directory) / split / kind
            folder.mkdir(parents=True, exist_ok=True)
            draw(kind, args.size, random).save(folder / f"{k:05d}.png")


if __name__ == "__main__":
    main()
