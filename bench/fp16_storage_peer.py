#!/usr/bin/env python3
"""fp16_storage_peer.py [--inputs N] [MODEL ...]: what storing weights and activations as half (math in fp32) would do
to torchvision's classifiers' outputs, measured in PyTorch on this machine's GPU (issue 27's `--precision fp16`).

Each model (random weights, seeded as bench/vision_peer.py's, with its BatchNorms' statistics then taken from 128
random inputs, so that activations neither vanish nor blow up as they do through random weights with the initial
statistics: mobilenet_v3_small's output is then about 1e-9, below half's range) runs twice on the same N inputs (randn, seeded, batches
of 50): in fp32 (TF32 off), and with every parameter and buffer rounded to half and back, the input rounded, and the
output of every leaf module rounded the same way, which is what packHalf2x16 storage between kernels does. glnet would
round fewer tensors (a convolution's BatchNorm and activation are fused into it, so only the fused output is stored),
so this is the pessimistic side. Prints a markdown table: top-1 agreement, the largest difference relative to the
largest |output|, and how many distinct top-1 classes the fp32 run gives (whether the inputs move the random-weight
model at all).
"""
import argparse, copy
import torch
import torchvision

from vision_peer import MODELS, build  # also turns TF32 off


def calibrated(model, device):
    batch_norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    for m in batch_norms:
        m.reset_running_stats()
        m.momentum = None  # a plain average over the batches below
    model.train()
    generator = torch.Generator().manual_seed(128)
    with torch.no_grad():
        for _ in range(4 if batch_norms else 0):
            model(torch.randn(32, 3, 224, 224, generator=generator).to(device))
    return model.eval()


def rounded(t):
    return t.half().float() if torch.is_tensor(t) and t.is_floating_point() else t


def with_half_storage(model):
    half = copy.deepcopy(model)
    with torch.no_grad():
        for tensor in list(half.parameters()) + list(half.buffers()):
            if tensor.is_floating_point():
                tensor.copy_(rounded(tensor))
    for module in half.modules():
        if not list(module.children()):
            module.register_forward_hook(lambda _m, _i, out: rounded(out) if torch.is_tensor(out) else out)
    return half


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--inputs", type=int, default=1000)
    parser.add_argument("models", nargs="*", default=MODELS)
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    where = torch.cuda.get_device_name() if device == "cuda" else "the CPU"
    print(f"torch {torch.__version__}, torchvision {torchvision.__version__}, {where}; {args.inputs} inputs")
    print()
    print("| model | top-1 agreement | max abs diff / max abs output | distinct fp32 top-1 classes |")
    print("|---|---|---|---|")
    for name in args.models:
        full = calibrated(build(name).to(device), device)
        half = with_half_storage(full)
        agree, worst, classes = 0, 0.0, set()
        generator = torch.Generator().manual_seed(2026)
        for start in range(0, args.inputs, 50):
            x = torch.randn(min(50, args.inputs - start), 3, 224, 224, generator=generator).to(device)
            with torch.no_grad():
                y, z = full(x), half(rounded(x))
            agree += int((y.argmax(1) == z.argmax(1)).sum())
            worst = max(worst, float((y - z).abs().max() / y.abs().max()))
            classes.update(y.argmax(1).tolist())
        print(f"| {name} | {agree}/{args.inputs} | {worst:.2e} | {len(classes)} |", flush=True)


if __name__ == "__main__":
    main()
