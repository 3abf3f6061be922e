#!/usr/bin/env python3
"""A training step's GEMM dispatches under each forced GEMM configuration, layer by layer.

usage: bench/config_sweep.py DIR CONFIG [CONFIG ...]

DIR/CONFIG/bench.txt is bench/step-profile's glnet_bench report of one model with GLNET_GEMM_CONFIG=CONFIG (the GPU
machine's part: `for c in 64x64 128x32; do GLNET_GEMM_CONFIG=$c bench/step-profile APPS MODEL DIR/$c 128; done`).
Splits differ between configurations, so dispatches are matched by kind and order: the n-th "conv none" of one run
against the n-th of the others (forward passes, dX and the dW that runs on the GEMM core). Prints a Markdown table:
one row per such dispatch, its time under each configuration (ms) and the fastest, then each run's whole step.
"""
import re
import sys

DISPATCH = re.compile(r"\s+(\d+)\s+(\d+) (.+?)\s{2,}([\d.]+)\s")
# The dispatches a forced configuration changes, by the start of their label.
KINDS = ("conv none", "conv relu", "conv dX", "conv dW", "dense none", "dense dX", "dense dW")


def training_dispatches(path):
    rows, inside = [], False
    with open(path) as report:
        for line in report:
            if line.startswith("training dispatch"):
                inside = True
                continue
            if inside and line.strip() and not line[0].isspace():
                break
            found = DISPATCH.match(line) if inside else None
            if found:
                rows.append((found.group(3).strip(), float(found.group(4))))
    return rows


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__.split("\n\n")[1])
    directory, configs = sys.argv[1], sys.argv[2:]
    runs = {}
    for config in configs:
        path = f"{directory}/{config}/bench.txt"
        try:
            runs[config] = training_dispatches(path)
        except OSError as error:
            sys.exit(f"bench/config_sweep.py: error: cannot read {path}: {error.strerror}")
        if not runs[config]:
            sys.exit(f"bench/config_sweep.py: error: {path} holds no training dispatches")
    print("| dispatch (first configuration's label) | " + " | ".join(configs) + " | fastest |")
    print("|---|" + "---|" * (len(configs) + 1))
    for kind in KINDS:
        of_kind = {config: [row for row in rows if row[0].startswith(kind)] for config, rows in runs.items()}
        for n in range(min(len(rows) for rows in of_kind.values())):
            times = {config: of_kind[config][n][1] for config in configs}
            fastest = min(times, key=times.get)
            print(f"| {kind} #{n + 1}: {of_kind[configs[0]][n][0]} | " + " | ".join(f"{times[c]:.4f}" for c in configs) + f" | {fastest} |")
    print()
    print("whole step (ms, each dispatch timed alone): " + ", ".join(f"{c} {sum(t for _, t in runs[c]):.3f}" for c in configs))


if __name__ == "__main__":
    main()
