#!/usr/bin/env python3
"""report.py GLNET_BENCH.json GLNET_TRAIN.json TORCH.json HEADER.txt OUT.md: the dated Markdown table of glnet
against PyTorch on the same GPU, with their ratios (PyTorch time / glnet time: above 1 means glnet is faster)."""
import json
import sys


def main():
    bench, train, torch, header_file, out = sys.argv[1:6]
    g = json.load(open(bench))
    t = json.load(open(train))
    p = json.load(open(torch))

    def row(section, batch, stage):
        for r in g["rows"]:
            if r["section"] == section and r["batch"] == batch and r["stage"] == stage:
                return r["median_ms"]
        return None

    epochs = t["epochs"]
    glnet_epoch = min(e["seconds"] for e in epochs) * 1000
    fused_torch = p["elementwise"]["fused_compiled"]
    lines = [
        ("one dependent dispatch / kernel launch", p["dispatch"]["per_launch_ms"], row("dispatch", 100, "gpu per dependent dispatch"),
         "PyTorch: wall per launch in a synchronised chain of 100; glnet: GPU time per dispatch in a chain of 100 with barriers", "≤ 3 µs"),
        ("single image 784-128-10, upload + run + read", p["predict1"]["round_trip"]["median_ms"],
         row("inference", 1, "round trip: upload, run, read"), "wall, host to host", "≤ 25 µs"),
        ("10k test images 784-128-10, data resident", p["eval"]["resident"]["median_ms"], row("inference", 10000, "gpu"),
         "PyTorch: wall of model + argmax + sync; glnet: GPU time of the plan", "≤ 60 µs"),
        ("10k test images 784-128-10, data resident, with the predictions read", p["eval"]["resident"]["median_ms"],
         row("inference", 10000, "chained, read by getBufferSubData"), "PyTorch as above (no read); glnet: wall of run + read", ""),
        ("10k test images incl. upload and readback", p["eval"]["with_upload"]["median_ms"],
         row("inference", 10000, "round trip: upload, run, read"), "PyTorch: float upload; glnet: uint8 upload", "≤ 0.6 ms"),
        ("one training epoch 784-128-10, batch 64, SGD (eager)", p["train"]["eager"]["median_ms"], glnet_epoch,
         "glnet: fastest epoch of glnet_train (937 steps)", "≤ 60 ms"),
        ("one training epoch 784-128-10, batch 64, SGD (CUDA graph)", p["train"]["cuda_graph"]["median_ms"], glnet_epoch, "", "≤ 60 ms"),
        ("normalize·weigh·tanh on 1M floats (3 kernels / 3 dispatches)", p["elementwise"]["three_kernels"]["median_ms"],
         row("elementwise", 1000000, "3 dispatches gpu"), "PyTorch: wall, synchronised; glnet: GPU time", ""),
        ("normalize·weigh·tanh on 1M floats (fused)",
         fused_torch["median_ms"] if isinstance(fused_torch, dict) else None, row("elementwise", 1000000, "fused gpu"),
         "PyTorch: torch.compile" + ("" if isinstance(fused_torch, dict) else f" {fused_torch}"), "≤ 10 µs"),
    ]
    text = open(header_file).read().rstrip() + "\n\n"
    text += "| work | PyTorch (ms) | glnet (ms) | PyTorch / glnet | glnet target | how measured |\n|---|---|---|---|---|---|\n"
    for name, torch_ms, glnet_ms, how, target in lines:
        ratio = f"{torch_ms / glnet_ms:.2f}" if torch_ms and glnet_ms else "—"
        fmt = lambda v: f"{v:.4f}" if v is not None else "absent"  # noqa: E731
        text += f"| {name} | {fmt(torch_ms)} | {fmt(glnet_ms)} | {ratio} | {target} | {how} |\n"
    text += "\nglnet test accuracy after each epoch: " + ", ".join(f"{100 * e['test_accuracy']:.2f} %" for e in epochs) + "\n"
    text += "\nglnet cold start (ms):\n\n" + "\n".join(f"- {k}: {v:.2f}" for k, v in g["cold_start_ms"].items()) + "\n"
    text += f"\nglnet training step: {g['training_dispatches']} dispatches; persistent maps: {g['persistent_maps']}.\n"
    open(out, "w").write(text)
    print(out)


if __name__ == "__main__":
    main()
