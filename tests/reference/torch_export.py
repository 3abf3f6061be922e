"""torch.onnx.export through PyTorch's TorchScript exporter on every PyTorch the tests meet: Debian's 1.13 has only that
one; from 2.9 the default is the torch.export-based exporter, which writes opset 18 and fails converting some of the
tests' models to 17 (the GPU machine's 2.11)."""
import inspect

import torch


def export_torchscript(*args, **kwargs):
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kwargs["dynamo"] = False
    torch.onnx.export(*args, **kwargs)
