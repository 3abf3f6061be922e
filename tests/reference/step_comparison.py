"""What the step-by-step comparisons with PyTorch share (torch_training.py, torch_finetune.py): reading glnet's model
file, and the per-step loss table with its tolerance (a relative 1e-4: float32 on both sides in different summation
orders, which batch normalization amplifies to about 1e-6 per step)."""
import json
import struct
import sys
from pathlib import Path

import numpy as np


def read_safetensors(path):
    """The float32 tensors of a glnet model file (optimizer state left out) and its metadata."""
    data = Path(path).read_bytes()
    size = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + size])
    metadata = header.pop("__metadata__", {})
    tensors = {name: np.frombuffer(data[8 + size + e["data_offsets"][0]:8 + size + e["data_offsets"][1]], "<f4").reshape(e["shape"])
               for name, e in header.items() if not name.startswith("optimizer.")}
    return tensors, metadata


def compare_losses(glnet_losses, torch_losses, steps):
    """Prints both losses step by step; returns how many differ by more than 1e-4 relative (exits when glnet reported
    another number of steps)."""
    failures = 0
    print("step  glnet loss   PyTorch loss")
    for step, (g, t) in enumerate(zip(glnet_losses, torch_losses), 1):
        ok = abs(g - t) <= 1e-4 * abs(t)
        failures += not ok
        print(f"{step:4d}  {g:.7f}  {t:.7f}{'' if ok else '  MISMATCH'}")
    if len(glnet_losses) != steps:
        sys.exit(f"glnet_train reported {len(glnet_losses)} steps, not {steps}")
    return failures
