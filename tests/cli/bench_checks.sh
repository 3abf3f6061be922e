#!/bin/sh
# bench_checks.sh APPS_DIR SCRIPTS_DIR: glnet_bench's correctness checks on small sizes, its CSV and JSON
# formats, and the charts made from them. No timing is asserted.
set -u
apps=$1 scripts=$2
here=$(dirname "$0")
. "$here/common.sh"

"$apps/glnet_bench" --batches 1,7,33 --runs 2 --warmup 1 --elementwise 4099 --training-batch 5 --training-steps 3 --csv "$work/b.csv" --json-out "$work/b.json" >"$work/out.txt" 2>&1 \
  || { cat "$work/out.txt"; fail "glnet_bench reported failed checks or an error"; }
grep -q "all results checked against the CPU: ok" "$work/out.txt" || fail "no correctness verdict"
[ "$(head -1 "$work/b.csv")" = "section,batch,stage,median_ms,p10_ms,p90_ms,runs,device,date" ] || fail "CSV header is not the documented one"
/usr/bin/python3 - "$work/b.csv" "$work/b.json" <<'PY' || fail "CSV or JSON content"
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
stages = {(r["section"], r["batch"], r["stage"]) for r in rows}
for batch in ("1", "7", "33"):
    for stage in ("upload", "issue", "gpu", "fence wait", "readback getBufferSubData", "naive: sync and read every dispatch",
                  "chained, read by getBufferSubData", "chained, read by mapBufferRange", "round trip: upload, run, read"):
        assert ("inference", batch, stage) in stages, (batch, stage)
assert any(r["section"] == "inference dispatch" for r in rows)
assert ("training", "5", "step gpu") in stages and ("training", "5", "step, loss read every 3 steps") in stages
assert all(("dispatch", "100", stage) in stages for stage in ("gpu per dependent dispatch", "gpu per dependent dispatch, two programs alternating", "gpu per independent dispatch (no barriers)"))
assert ("elementwise", "4099", "fused gpu") in stages and ("elementwise", "4099", "3 dispatches gpu") in stages
assert all(float(r["p10_ms"]) <= float(r["median_ms"]) <= float(r["p90_ms"]) for r in rows)
assert all(r["device"] and len(r["date"]) == 10 for r in rows)
report = json.load(open(sys.argv[2]))
assert report["failures"] == [] and report["rows"] and "context creation" in report["cold_start_ms"], report.keys()
# Independent dispatches share barriers: fewer than one per dispatch, and at least the leading one.
assert 1 <= report["training_barriers"] <= report["training_dispatches"], report
PY
if /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
  /usr/bin/python3 "$scripts/plot-bench" "$work/b.csv" "$work/plots" >/dev/null || fail "plot-bench"
  for png in stages.png naive-vs-chained.png training.png; do
    head -c 8 "$work/plots/$png" | od -An -c | grep -q "P   N   G" || fail "$png is not a PNG"
  done
else
  fail "python3-matplotlib is missing (scripts/setup installs it)"
fi
# The GEMM benchmark: each result checked against float64, its JSON, and GLNET_GEMM_CONFIG.
"$apps/glnet_bench" --gemm --gemm-filter "M64 K128 N10" --runs 1 --warmup 0 --json-out "$work/g.json" >"$work/g.txt" 2>&1 \
  || { cat "$work/g.txt"; fail "glnet_bench --gemm reported failed checks or an error"; }
grep -q "checked against float64 on 66 sampled elements each: ok" "$work/g.txt" || fail "no GEMM verdict"
/usr/bin/python3 - "$work/g.json" <<'PY' || fail "GEMM JSON content"
import json, sys
rows = json.load(open(sys.argv[1]))["gemm"]
assert {r["layout"] for r in rows} == {"dense X.W^T", "dense dX=dY.W", "dense dW=dY^T.X"}, rows
assert all(r["passed"] and r["median_ms"] > 0 and r["flops"] == 2 * r["rows"] * r["columns"] * r["depth"] for r in rows)
PY
GLNET_GEMM_CONFIG=256x16 "$apps/glnet_bench" --gemm --gemm-filter "dense X.W^T M64 K128 N10" --runs 1 --warmup 0 >"$work/g.txt" 2>&1 \
  || fail "glnet_bench --gemm with GLNET_GEMM_CONFIG=256x16"
grep -q "dense none 256x16" "$work/g.txt" || fail "GLNET_GEMM_CONFIG=256x16 was not used"
GLNET_GEMM_CONFIG=huge "$here/expect" 1 "error: unknown GEMM configuration 'huge'; GLNET_GEMM_CONFIG takes one of 128x128" -- "$apps/glnet_bench" --gemm || failures=$((failures + 1))
# GEMM tuning (--tune) of an ONNX model's plan: the table written beside the program cache, read by every later plan
# (a hand-written entry shows in the dispatch labels), results still float64's, bad tables and flags refused or skipped.
/usr/bin/python3 - "$work" <<'PY' || fail "making the ONNX model for the tuning checks"
import sys
import numpy as np
from onnx import helper, numpy_helper, save, TensorProto
work, rng = sys.argv[1], np.random.default_rng(5)
w1, b1, w2 = rng.uniform(-1, 1, (29, 37)).astype(np.float32), rng.uniform(-1, 1, 29).astype(np.float32), rng.uniform(-1, 1, (29, 11)).astype(np.float32)
nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1), helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("MatMul", ["r", "w2"], ["y"])]
graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 37])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 11])],
                          [numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (b1, "b1"), (w2, "w2"))])
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), f"{work}/t.onnx")
x = rng.uniform(-1, 1, (64, 37)).astype(np.float32)
np.save(f"{work}/tx.npy", x)
np.save(f"{work}/tref.npy", np.maximum(x.astype(np.float64) @ w1.T.astype(np.float64) + b1, 0) @ w2.astype(np.float64))
PY
tuned_close() {  # tuned_close FILE: glnet_run's output within float32 sums' rounding of the float64 reference
  /usr/bin/python3 -c "import numpy as np, sys; y, r = np.load(sys.argv[1]), np.load(sys.argv[2]); sys.exit(0 if y.shape == r.shape and np.all(np.abs(y - r) <= 1e-5 + 1e-4 * np.abs(r)) else 1)" "$1" "$work/tref.npy"
}
GLNET_CACHE_DIR="$work/cache" "$apps/glnet_bench" --model "$work/t.onnx" --batches 64 --runs 2 --warmup 0 --tune --json-out "$work/t.json" >"$work/t.txt" 2>&1 \
  || { cat "$work/t.txt"; fail "glnet_bench --tune"; }
grep -q "GEMM tuning (before the runs above): 2 shapes under [0-9]* candidates in .*kept in $work/cache/gemm-tuning-[0-9a-f]*.txt" "$work/t.txt" \
  || fail "no tuning report: $(grep -i tuning "$work/t.txt")"
/usr/bin/python3 - "$work/t.json" <<'PY' || fail "tuning JSON content"
import json, os, sys
t = json.load(open(sys.argv[1]))["batches"][0]["gemm_tuning"]
assert t["shapes"] == 2 and t["candidates"] >= 2 and 0 <= t["changed"] <= 2 and t["tuned_gemm_ms"] <= t["rule_gemm_ms"] and os.path.isfile(t["path"]), t
assert t["rule_total_ms"] > 0 and t["tuned_total_ms"] > 0 and t["reverted"] in (True, False), t
# Dropped changes leave the shapes to the rule: the table then holds none of them.
assert not t["reverted"] or "64x29x37" not in open(t["path"]).read(), t
PY
table=$(ls "$work/cache"/gemm-tuning-*.txt)
GLNET_CACHE_DIR="$work/cache" "$apps/glnet_run" --model "$work/t.onnx" --input "$work/tx.npy" --output "$work/ty.npy" >/dev/null 2>&1 || fail "glnet_run after tuning"
tuned_close "$work/ty.npy" || fail "glnet_run after tuning differs from float64"
printf '64x29x37 loaded splittable = 128x32 whole\n64x11x29 loaded splittable = 64x32 whole\n' >"$table"
GLNET_CACHE_DIR="$work/cache" "$apps/glnet_bench" --model "$work/t.onnx" --batches 64 --runs 1 --warmup 0 --verbose >"$work/t.txt" 2>&1 || fail "glnet_bench on a written table"
grep -q "dense relu 128x32" "$work/t.txt" && grep -q "dense none 64x32" "$work/t.txt" || fail "the tuning table was not read: $(grep dense "$work/t.txt")"
GLNET_CACHE_DIR="$work/cache" "$apps/glnet_info" 2>/dev/null | grep -q "^GEMM tuning: 2 shapes measured on this device ($table)" || fail "glnet_info does not show the tuning"
GLNET_TUNE=0 GLNET_CACHE_DIR="$work/cache" "$apps/glnet_info" 2>/dev/null | grep -q "^GEMM tuning: not read (GLNET_TUNE=0)" || fail "glnet_info with GLNET_TUNE=0"
GLNET_TUNE=0 GLNET_CACHE_DIR="$work/cache" "$apps/glnet_bench" --model "$work/t.onnx" --batches 64 --runs 1 --warmup 0 --verbose >"$work/t.txt" 2>&1 || fail "glnet_bench with GLNET_TUNE=0"
grep -q "dense relu 128x32" "$work/t.txt" && fail "GLNET_TUNE=0 still read the tuning table"
GLNET_CACHE_DIR="$work/cache" "$apps/glnet_run" --model "$work/t.onnx" --input "$work/tx.npy" --output "$work/ty.npy" >/dev/null 2>&1 || fail "glnet_run on a written table"
tuned_close "$work/ty.npy" || fail "glnet_run under a written tuning differs from float64"
printf 'garbage\n64x29x37 loaded splittable = 999x1 whole\n64x11x29 loaded splittable = 64x32 whole\n' >"$table"
GLNET_CACHE_DIR="$work/cache" "$apps/glnet_run" --model "$work/t.onnx" --input "$work/tx.npy" --output "$work/ty.npy" >/dev/null 2>"$work/t.err" || fail "glnet_run on a damaged table"
grep -q "warning: .*gemm-tuning-.*: 2 lines are not GEMM tunings; they are ignored" "$work/t.err" || fail "no warning for a damaged table: $(cat "$work/t.err")"
tuned_close "$work/ty.npy" || fail "glnet_run under a damaged tuning differs from float64"
# --tune of a glnet model (the default MLP): its training step's GEMMs, kept in the same table; a later training step
# runs a hand-written entry (a sum cut in 2), its checks still passing.
GLNET_CACHE_DIR="$work/tcache" "$apps/glnet_bench" --tune --batches 1 --runs 2 --warmup 0 --training-batch 8 --training-steps 1 --elementwise 1000 \
  --json-out "$work/tt.json" >"$work/tt.txt" 2>&1 || { cat "$work/tt.txt"; fail "glnet_bench --tune of a training step"; }
grep -q "GEMM tuning (before the runs above): 5 shapes under [0-9]* candidates in .*kept in $work/tcache/gemm-tuning-[0-9a-f]*.txt" "$work/tt.txt" \
  || fail "no training tuning report: $(grep -i tuning "$work/tt.txt")"
grep -q "all results checked against the CPU: ok" "$work/tt.txt" || fail "the tuned training step's checks"
/usr/bin/python3 - "$work/tt.json" <<'PY' || fail "training tuning JSON content"
import json, os, sys
t = json.load(open(sys.argv[1]))["gemm_tuning"]
assert t["shapes"] == 5 and t["candidates"] >= 2 and 0 <= t["changed"] <= 5 and t["tuned_gemm_ms"] <= t["rule_gemm_ms"] and os.path.isfile(t["path"]), t
PY
printf '8x128x784 loaded splittable = 128x32 split 2\n' >"$(ls "$work/tcache"/gemm-tuning-*.txt)"
GLNET_CACHE_DIR="$work/tcache" "$apps/glnet_bench" --batches 1 --runs 1 --warmup 0 --training-batch 8 --training-steps 1 --elementwise 1000 >"$work/tt.txt" 2>&1 \
  || { cat "$work/tt.txt"; fail "glnet_bench on a training tuning"; }
grep -q "1 dense relu 128x32 split-K" "$work/tt.txt" && grep -q "all results checked against the CPU: ok" "$work/tt.txt" \
  || fail "the training step did not run the tuned entry: $(grep 'dense relu' "$work/tt.txt")"
GLNET_TUNE=0 "$here/expect" 2 "error: --tune with GLNET_TUNE=0" -- "$apps/glnet_bench" --model "$work/t.onnx" --tune || failures=$((failures + 1))
GLNET_GEMM_CONFIG=64x64 "$here/expect" 2 "error: --tune with GLNET_GEMM_CONFIG set" -- "$apps/glnet_bench" --model "$work/t.onnx" --tune || failures=$((failures + 1))
# A cache folder that cannot be made is refused before any measuring.
GLNET_CACHE_DIR="$work/t.onnx/cache" "$here/expect" 1 "error: .*t.onnx/cache/gemm-tuning-[0-9a-f]*.txt: cannot write \\(no directory" -- \
  "$apps/glnet_bench" --model "$work/t.onnx" --batches 64 --tune || failures=$((failures + 1))
expect 2 "error: no GEMM case matches" -- "$apps/glnet_bench" --gemm --gemm-filter nothing-like-this
expect 2 "error: --batches takes sizes" -- "$apps/glnet_bench" --batches 0
expect 2 "error: --training-batch" -- "$apps/glnet_bench" --training-batch 0
expect 1 "error: .*nope.safetensors: no such file" -- "$apps/glnet_bench" --model "$work/nope.safetensors"
finish bench
