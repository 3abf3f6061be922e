#!/usr/bin/python3
"""torchvision_models.py OUT_DIR [--size S] [--batch B] [--opset N] [--dynamo] [MODEL ...]: torchvision's image
classifiers with random weights in eval mode (seeded), exported by torch.onnx.export with a dynamic batch, each as
MODEL.onnx with a random input MODEL-x.npy [B, 3, S, S] and PyTorch's CPU output for it, MODEL-y.npy. The default
models are the eight glnet is checked on; vgg11 needs S = 224 (its AdaptiveAvgPool2d(7) exports only for sizes that
7 divides after five halvings). --dynamo uses torch.onnx.export(dynamo=True) where the installed PyTorch has it.
tests/cli/torch_checks.sh runs it at 64x64, batch 2 on the CPU; bench/onnx-gpu at 224x224 on the GPU machine.
"""
import argparse, os, time, warnings
import numpy as np
import torch
import torchvision
from torch_export import export_torchscript

warnings.filterwarnings("ignore")
parser = argparse.ArgumentParser(usage=__doc__)
parser.add_argument("out")
parser.add_argument("models", nargs="*", default=["resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0",
                                                  "vgg11", "squeezenet1_1", "densenet121"])
parser.add_argument("--size", type=int, default=64)
parser.add_argument("--batch", type=int, default=2)
parser.add_argument("--opset", type=int, default=17)
parser.add_argument("--dynamo", action="store_true")
args = parser.parse_args()

for name in args.models:
    torch.manual_seed(7)
    model = getattr(torchvision.models, name)(weights=None).eval()
    x = torch.randn(args.batch, 3, args.size, args.size)
    path = os.path.join(args.out, name + ".onnx")
    start = time.time()
    if args.dynamo:
        batch = torch.export.Dim("batch", min=1, max=1024)
        torch.onnx.export(model, (x,), path, dynamo=True, opset_version=max(args.opset, 18), input_names=["x"], output_names=["y"],
                          dynamic_shapes={"x": {0: batch}}, external_data=False)
    else:
        export_torchscript(model, x, path, opset_version=args.opset, input_names=["x"], output_names=["y"],
                           dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    np.save(os.path.join(args.out, name + "-x.npy"), x.numpy())
    with torch.no_grad():
        np.save(os.path.join(args.out, name + "-y.npy"), model(x).numpy())
    print(f"{name}: exported in {time.time() - start:.1f} s", flush=True)
