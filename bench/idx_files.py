"""IDX files (MNIST's and Fashion-MNIST's format), plain or gzipped, as NumPy arrays: shared by the bench scripts."""
import gzip
import os

import numpy as np


def idx(directory, name):
    path = os.path.join(directory, name)
    data = gzip.open(path + ".gz").read() if os.path.exists(path + ".gz") else open(path, "rb").read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * dims).reshape(shape)
