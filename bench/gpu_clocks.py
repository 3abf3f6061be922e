"""The GPUs' SM clocks while each benchmark run was busy, from nvidia-smi's samples.

python3 bench/gpu_clocks.py CLOCKS_CSV RUNS_TSV [GPU]
CLOCKS_CSV: nvidia-smi --query-gpu=timestamp,index,clocks.sm,utilization.gpu --format=csv,noheader -lms 100 (UTC clock).
RUNS_TSV: one line per run, "NAME<TAB>START<TAB>END" in seconds since the epoch (date +%s.%N).
Prints a Markdown table: per run, the samples of GPU (default 0) with utilization above 0, their median SM clock and
the share of them at 1900 MHz or more (the H100's boost clock is 1980 MHz, its idle clock 345 MHz).
"""
import calendar
import csv
import statistics
import sys
from datetime import datetime


def seconds(stamp):
    moment = datetime.strptime(stamp.strip(), "%Y/%m/%d %H:%M:%S.%f")
    return calendar.timegm(moment.timetuple()) + moment.microsecond / 1e6


def main():
    clocks_path, runs_path = sys.argv[1:3]
    gpu = sys.argv[3] if len(sys.argv) > 3 else "0"
    samples = []
    for row in csv.reader(open(clocks_path), skipinitialspace=True):
        if len(row) < 4 or row[1].strip() != gpu or not row[2].strip()[:1].isdigit():
            continue
        samples.append((seconds(row[0]), int(row[2].split()[0]), int(row[3].split()[0])))
    print(f"| run | busy samples of GPU {gpu} | median SM clock while busy (MHz) | busy samples at ≥ 1900 MHz |")
    print("|---|---|---|---|")
    for line in open(runs_path):
        name, start, end = line.rstrip("\n").split("\t")
        busy = [mhz for t, mhz, use in samples if float(start) <= t <= float(end) and use > 0]
        if not busy:
            print(f"| {name} | 0 | — | — |")
            continue
        high = sum(mhz >= 1900 for mhz in busy) / len(busy)
        print(f"| {name} | {len(busy)} | {statistics.median(busy):.0f} | {100 * high:.0f} % |")


if __name__ == "__main__":
    main()
