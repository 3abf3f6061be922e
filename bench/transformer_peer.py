#!/usr/bin/env python3
"""transformer_peer.py time|compare|table OUT ...: the PyTorch side of bench/transformers-gpu, on the GPU machine.
The models and their inputs are those tests/reference/transformer_models.py exported (--size full) into
OUT/models-1 and OUT/models-64 (batch 1 and 64; text at sequence 128, images at 224x224); NAME is the name it
gave them (MODEL-ts|dynamo[-eager|sdpa]).

  time OUT NAME ...                  JSON: PyTorch on the GPU (fp32, TF32 off, the same seeded random weights and the
                                     same inputs) eager and as a CUDA graph, the median wall time of RUNS calls
                                     after WARMUP unmeasured ones (a synchronize after each; RUNS about 2 s of eager
                                     runs, 20 to 300, WARMUP about 1 s, 5 to 100: glnet_bench gets the same counts),
                                     and the peak memory of one forward beyond the weights and inputs, per NAME/BATCH
  compare OUT NAME BATCH GLNET.npy   one line: glnet's output against PyTorch's float64 one (max |diff| / max
                                     |PyTorch|, at most 1e-4) and, for logits, the same argmax
  table OUT NAME ...                 the markdown table of bench/transformers-gpu's run in OUT
"""
import json, os, re, sys, time, warnings

import numpy as np

from cuda_timing import captured, median_ms

warnings.filterwarnings("ignore")
BATCHES = (1, 64)
TOLERANCE = 1e-4


def parse_name(name):
    """MODEL-EXPORTER[-ATTENTION] as transformer_models.py writes it: (model, attention or None)."""
    parts = name.split("-")
    if len(parts) not in (2, 3) or parts[1] not in ("ts", "dynamo") or (len(parts) == 3) != parts[0].startswith("hf_"):
        raise SystemExit(f"transformer_peer.py: {name} is not a name transformer_models.py gives (MODEL-ts|dynamo[-eager|sdpa])")
    return parts[0], parts[2] if len(parts) == 3 else None


def exported(out, name, batch):
    """transformer_models.py's record of NAME at BATCH: its inputs in order, or a SystemExit naming why there is none."""
    report = json.load(open(os.path.join(out, f"models-{batch}", "export.json")))
    if name not in report:
        raise SystemExit(f"transformer_peer.py: {name} was not exported at batch {batch}")
    return report[name]


def is_logits(model):
    """Outputs over classes or a vocabulary, where the argmax means something (not hidden states)."""
    return model.startswith("tv_") or model.endswith(("_cls", "_lm"))


def compare(out, name, batch, glnet):
    model, _ = parse_name(name)
    got, want = np.load(glnet), np.load(os.path.join(out, f"models-{batch}", f"{name}-y.npy"))
    if got.shape != want.shape:
        print(f"shape {list(got.shape)}, PyTorch's {list(want.shape)}: DIFFERS")
        return
    ratio = np.abs(got - want).max() / max(np.abs(want).max(), 1e-30)
    line = f"vs PyTorch (CPU float64): max|diff| = {ratio:.2e} x max|out|{' OK' if ratio <= TOLERANCE else f' OVER {TOLERANCE:g}'}"
    if is_logits(model):
        same = (got.argmax(-1) == want.argmax(-1)).mean()
        line += f", argmax {'same' if same == 1 else f'DIFFERS ({100 * (1 - same):.1f}% of rows)'}"
    print(line)


def timed(run):
    """(median ms, warmup, runs): about 1 s of unmeasured calls (5 to 100), then about 2 s of measured ones (20 to 300),
    a synchronize after each."""
    import torch
    start = time.perf_counter()
    for _ in range(3):
        run()
    torch.cuda.synchronize()
    once = max((time.perf_counter() - start) * 1e3 / 3, 1e-3)
    warmup, runs = int(min(100, max(5, 1000 / once))), int(min(300, max(20, 2000 / once)))
    return median_ms(run, warmup, runs), warmup, runs


def build(name, inputs):
    """The model transformer_models.py exported as NAME (taking INPUTS, by name), built again (seed 7, full size) in
    eval mode."""
    import torch
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
    import transformer_models
    transformer_models.configure([os.devnull, "--size", "full"])
    model, attention = parse_name(name)
    torch.manual_seed(7)
    if attention is None:
        return transformer_models.FirstOutput(transformer_models.torchvision_model(model).eval(), None).eval()
    base = transformer_models.hugging_face_model(model, attention).eval()
    return transformer_models.FirstOutput(base, inputs).eval()


def timings(out, names):
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    result = {"torch": torch.__version__, "device": torch.cuda.get_device_name()}
    for name in names:
        first = exported(out, name, 1)
        if "error" in first:
            result.update({f"{name}/{batch}": {"error": "export failed: " + first["error"]} for batch in BATCHES})
            continue
        model = build(name, first["inputs"]).cuda()
        for batch in BATCHES:
            record = exported(out, name, batch)
            if "error" in record:
                result[f"{name}/{batch}"] = {"error": "export failed: " + record["error"]}
                continue
            inputs = [torch.from_numpy(np.load(os.path.join(out, f"models-{batch}", f"{name}-{key}.npy"))).cuda() for key in record["inputs"]]
            entry = {}
            with torch.no_grad():
                entry["eager_ms"], entry["warmup"], entry["runs"] = timed(lambda: model(*inputs))
                try:
                    graph = captured(lambda: model(*inputs))
                    entry["graph_ms"] = median_ms(graph.replay, entry["warmup"], entry["runs"])
                    del graph
                except Exception as e:  # a model with a host sync in its forward cannot be captured: say so in the table
                    entry["graph_error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:200]
                    torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            with torch.no_grad():
                model(*inputs)
            torch.cuda.synchronize()
            entry["peak_activation_bytes"] = int(torch.cuda.max_memory_allocated() - base)
            result[f"{name}/{batch}"] = entry
            print(f"{name}/{batch}: {entry}", file=sys.stderr, flush=True)
        del model
        torch.cuda.empty_cache()
    print(json.dumps(result, indent=1))


def table(out, names):
    """One row per model and batch from OUT: NAME-BATCH-compare.txt (glnet_run against PyTorch), NAME-BATCH-bench.json
    (glnet_bench --json-out) and torch.json (this file's `time`)."""
    path = os.path.join(out, "torch.json")
    torch_times = json.load(open(path)) if os.path.exists(path) else {}

    def read(file):
        file = os.path.join(out, file)
        return open(file).read().strip() if os.path.exists(file) else ""

    def ms(value):
        return f"{value:.3f}" if isinstance(value, (int, float)) else "-"

    def mib(value):
        return f"{value / 2**20:.1f}" if isinstance(value, int) else "-"

    def ratio(a, b):
        return f"{a / b:.2f}" if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b > 0 else "-"

    print("| model | batch | input | max\\|diff\\| / max\\|out\\| | argmax | glnet end to end ms | glnet GPU ms | PyTorch eager ms | "
          "PyTorch CUDA graph ms | glnet GPU / eager | glnet GPU / CUDA graph | glnet activation MiB | PyTorch peak MiB | notes |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in names:
        model, _ = parse_name(name)
        for batch in BATCHES:
            notes = []
            compared = read(f"{name}-{batch}-compare.txt")
            diff = re.search(r"max\|diff\| = ([0-9.e+-]+)", compared)
            argmax = "same" if ", argmax same" in compared else ("DIFFERS" if "argmax DIFFERS" in compared else "-")
            t = torch_times.get(f"{name}/{batch}", {})
            if not diff and "error" not in t:
                notes.append((read(f"{name}-{batch}-run.txt").splitlines() or compared.splitlines() or ["glnet_run: not run"])[-1])
            bench = {}
            if os.path.exists(os.path.join(out, f"{name}-{batch}-bench.json")):
                bench = json.load(open(os.path.join(out, f"{name}-{batch}-bench.json")))["batches"][0]
            elif diff and read(f"{name}-{batch}-bench.txt"):  # (where glnet_run failed, glnet_bench did for the same reason)
                notes.append(read(f"{name}-{batch}-bench.txt").splitlines()[-1])
            end = bench.get("end_to_end_ms", {}).get("median")
            gpu = bench.get("gpu_ms", {}).get("median")
            memory = bench.get("activation_bytes")
            if "error" in t:
                notes.append(f"PyTorch: {t['error']}")
            if "graph_error" in t:
                notes.append(f"PyTorch CUDA graph: {t['graph_error']}")
            shape = "224x224" if model.startswith(("tv_", "hf_vit")) else "128 tokens"
            peak = t.get("peak_activation_bytes")
            print(f"| {name} | {batch} | {shape} | {diff.group(1) if diff else '-'} | {argmax if is_logits(model) else 'n/a'} | {ms(end)} | "
                  f"{ms(gpu)} | {ms(t.get('eager_ms'))} | {ms(t.get('graph_ms'))} | {ratio(gpu, t.get('eager_ms'))} | "
                  f"{ratio(gpu, t.get('graph_ms'))} | {mib(memory)} | {mib(peak)} | {'; '.join(n.replace('|', '/') for n in notes)} |")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    command, out, rest = sys.argv[1], sys.argv[2], sys.argv[3:]
    if command == "time":
        timings(out, rest)
    elif command == "compare" and len(rest) == 3:
        compare(out, rest[0], int(rest[1]), rest[2])
    elif command == "table":
        table(out, rest)
    else:
        sys.exit(__doc__)
