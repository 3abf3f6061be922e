#!/usr/bin/env python3
"""Per-node GPU times of two glnet_run --profile logs of one model side by side.

usage: bench/profile_diff.py BEFORE.txt AFTER.txt [--match TEXT] [--top N]

Prints one line per node found in both logs, most improved first: after - before, before and after (ms), the node's
name and the end of its line in AFTER (output shape and dispatch labels), then the sum of the differences over the
lines printed. --match keeps the nodes whose AFTER line contains TEXT; --top keeps the first N lines.
"""
import argparse
import re

NODE = re.compile(r"\s+([\d.]+) ms\s+[\d.]+%\s+(\S+)\s+(.*)$")


def node_times(path):
    times = {}
    with open(path) as log:
        for line in log:
            found = NODE.match(line)
            if found:
                times[found.group(2)] = (float(found.group(1)), re.sub(r"\s+", " ", found.group(3)))
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--match", default="")
    parser.add_argument("--top", type=int, default=0)
    args = parser.parse_args()
    before, after = node_times(args.before), node_times(args.after)
    rows = sorted((after[name][0] - before[name][0], before[name][0], after[name][0], name, after[name][1])
                  for name in before if name in after and args.match in after[name][1])
    if args.top:
        rows = rows[:args.top]
    for row in rows:
        print("%+.3f %.3f %.3f %s %s" % row)
    print("sum of the differences above: %+.3f ms" % sum(row[0] for row in rows))


if __name__ == "__main__":
    main()
