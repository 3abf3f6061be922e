#!/usr/bin/env python3
"""depthwise_switch_table.py DIR BATCHES TAG [TAG ...] [--label WORD]: markdown tables of the depthwise nodes in the
glnet_run --profile --verbose logs DIR/MODEL-BATCH-TAG.txt, one column per TAG (ms), and the memory speed that the
nodes' input and output bytes give under the first and second TAG (a stride-1 layer reads as many as it writes).
bench/depthwise-switch-gpu writes the tags off, on and off-again; bench/profile-gpu names them after its builds.
--label: the word a measurement patch's switch puts into the dispatch's label ("nc4hw4", "half"): nodes the second
TAG ran without it are marked as not switched, and the sums count only the switched ones. BATCHES: e.g. 64,1."""
import argparse, os, re

from profile_diff import node_times

MODELS = ["mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0"]
SHAPE_AND_LABEL = re.compile(r".*?\[(\d+), (\d+), (\d+), (\d+)\]\s+\[(depthwise[^\]]*)\]")


def nodes(path):
    """The depthwise nodes of a log: name -> (ms, output shape, dispatch label)."""
    found = {}
    for name, (ms, rest) in node_times(path).items():
        m = SHAPE_AND_LABEL.match(rest)
        if m:
            found[name] = (ms, tuple(int(m.group(i)) for i in range(1, 5)), m.group(5))
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dir")
    parser.add_argument("batches")
    parser.add_argument("tags", nargs="+")
    parser.add_argument("--label")
    args = parser.parse_args()
    first, second = args.tags[0], args.tags[1]
    for batch in args.batches.split(","):
        for model in MODELS:
            runs = {tag: os.path.join(args.dir, f"{model}-{batch}-{tag}.txt") for tag in args.tags}
            if not all(os.path.exists(path) for path in runs.values()):
                continue
            times = {tag: nodes(path) for tag, path in runs.items()}
            print(f"## {model}, batch {batch}\n")
            print("| node | output | " + " | ".join(f"{tag} (ms)" for tag in args.tags) + f" | {first}: memory speed | {second}: memory speed |")
            print("|---|---|" + "---|" * (len(args.tags) + 2))
            sums = {tag: 0.0 for tag in args.tags}
            for name, (t, shape, _) in sorted(times[first].items(), key=lambda kv: -kv[1][0]):
                n, c, h, w = shape
                moved = 2 * n * c * h * w * 4
                switched = args.label is None or args.label in times[second][name][2]
                cells = [f"{times[tag][name][0]:.3f}" + ("" if switched or tag != second else " (not switched)") for tag in args.tags]
                print(f"| {name} | {list(shape)} | " + " | ".join(cells) +
                      f" | {moved / t / 1e9:.2f} TB/s | {moved / times[second][name][0] / 1e9:.2f} TB/s |")
                if switched:
                    for tag in args.tags:
                        sums[tag] += times[tag][name][0]
            print("| " + ("the switched layers" if args.label else "all depthwise layers") + ", summed | | " +
                  " | ".join(f"{sums[tag]:.3f}" for tag in args.tags) + " | | |\n")


if __name__ == "__main__":
    main()
