#!/usr/bin/env python3
"""gemm_report.py GLNET_GEMM.json [TORCH_GEMM.json] OUT.md: glnet_bench --gemm beside torch_peer.py gemm.

The table has, per case, glnet's configuration (the rule's choice), ms and TFLOP/s, PyTorch's, and the
ratio PyTorch ms / glnet ms (above 1: glnet is faster). When glnet ran with --gemm-every-config, a second
table gives every configuration's time and how far the rule's choice is from the best one."""
import json
import sys
from pathlib import Path


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    glnet = json.loads(Path(sys.argv[1]).read_text())
    torch = json.loads(Path(sys.argv[2]).read_text()) if len(sys.argv) == 4 else None
    out = Path(sys.argv[-1])
    peer = torch["gemm"] if torch else {}
    lines = [f"## GEMM core on {glnet['device']}", ""]
    if torch:
        lines += [f"PyTorch {torch['torch']} on {torch['device']} (TF32 off, cudnn.benchmark on), same cases, same run.", ""]
    lines += ["| case | GEMM rows×columns×depth | glnet dispatches | glnet ms | glnet TFLOP/s | PyTorch ms | PyTorch TFLOP/s | ratio |",
              "|---|---|---|---|---|---|---|---|"]
    rule = [r for r in glnet["gemm"] if not r["forced"]]
    for r in rule:
        shape = f"{r['rows']}×{r['columns']}×{r['depth']}"
        p = peer.get(r["name"])
        theirs = f"{p['median_ms']:.4f} | {p['tflops']:.3g} | {p['median_ms'] / r['median_ms']:.2f}" if p else "– | – | –"
        lines.append(f"| {r['name']} | {shape} | {r['dispatches']} | {r['median_ms']:.4f} | {r['tflops']:.3g} | {theirs} |")
    forced = [r for r in glnet["gemm"] if r["forced"]]
    if forced:
        configs = list(dict.fromkeys(r["forced"] for r in forced))
        lines += ["", "Every configuration forced (ms; the rule's choice runs as 'rule'):", "",
                  "| case | rule | " + " | ".join(configs) + " | best | rule / best |",
                  "|---|---|" + "---|" * len(configs) + "---|---|"]
        for r in rule:
            times = {f["forced"]: f["median_ms"] for f in forced if f["name"] == r["name"]}
            best = min(times, key=times.get)
            cells = " | ".join(f"{times[c]:.4f}" if c in times else "–" for c in configs)
            lines.append(f"| {r['name']} | {r['median_ms']:.4f} | {cells} | {best} | {r['median_ms'] / times[best]:.2f} |")
    failed = [r["name"] for r in glnet["gemm"] if not r["passed"]]
    lines += ["", "float64 check of 66 sampled elements per result: " + ("ok" if not failed else "FAILED: " + ", ".join(failed))]
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
