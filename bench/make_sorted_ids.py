#!/usr/bin/env python3
"""bench/make_sorted_ids.py DIR [--train N] [--test N] [--length S] [--seed K]: a synthetic text task for transformer
classifiers, written as glnet_train's ids data set (DIR/train-ids.npy [N, S], train-labels.npy [N], test-...): is the
sequence sorted? Each sequence is id 1 (a [CLS] token) and then 4 to S - 1 numbers, each 0 to 99 as ids 2 to 101,
padded with id 0; half are sorted, the other half the same kind of numbers in an order that is not sorted (whose
descents may be anywhere). Vocabulary 102."""
import argparse
from pathlib import Path

import numpy as np

PAD, CLS, FIRST_NUMBER, NUMBERS = 0, 1, 2, 100


def make(count, length, random):
    ids = np.full((count, length), PAD, np.int64)
    labels = np.zeros(count, np.int64)
    for i in range(count):
        n = int(random.integers(4, length))
        numbers = np.sort(random.integers(0, NUMBERS, n))
        if random.random() < 0.5:
            labels[i] = 1
        else:
            while np.all(numbers[:-1] <= numbers[1:]):  # numbers all alike have no unsorted order: draw again
                numbers = random.permutation(numbers if numbers.min() < numbers.max() else random.integers(0, NUMBERS, n))
        ids[i, 0] = CLS
        ids[i, 1:n + 1] = numbers + FIRST_NUMBER
    return ids, labels


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory")
    parser.add_argument("--train", type=int, default=50000)
    parser.add_argument("--test", type=int, default=5000)
    parser.add_argument("--length", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.length < 5:
        parser.error("--length must be at least 5 (the [CLS] id and at least 4 numbers)")
    random = np.random.default_rng(args.seed)
    out = Path(args.directory)
    out.mkdir(parents=True, exist_ok=True)
    for split, count in (("train", args.train), ("test", args.test)):
        ids, labels = make(count, args.length, random)
        np.save(out / f"{split}-ids.npy", ids)
        np.save(out / f"{split}-labels.npy", labels)


if __name__ == "__main__":
    main()
