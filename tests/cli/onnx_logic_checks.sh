#!/bin/sh
# onnx_logic_checks.sh APPS_DIR: the logic ops (Equal, Less, LessOrEqual, Greater, GreaterOrEqual, And, Or, Xor, Not,
# IsNaN, IsInf, Mod, Where) in ONNX models built here with python3-onnx: folded at load where all their inputs are
# constants (Mod of int64 shape values with fmod 0 and 1 as Swin's TorchScript export computes them, comparisons and
# logic of the results, IsNaN and IsInf of a float constant with NaN and infinities), and on the GPU where an input is
# computed (masks as BERT and GPT-2 exports make them); each output compared with NumPy in float64. Then refusals:
# a float Mod with fmod 0 and an integer Mod by zero, folded.
set -u
apps=$1
here=$(dirname "$0")
. "$here/common.sh"

/usr/bin/python3 - "$work" <<'PY' || { fail "building the ONNX models"; finish onnx-logic; }
import os, sys
import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto
work = sys.argv[1]
rng = np.random.default_rng(11)
np.seterr(all='ignore')  # NaN and infinities are meant
N = helper.make_node

def save(name, nodes, inputs, outputs, initializers):
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info(k, TensorProto.FLOAT, s) for k, s in inputs],
                              [helper.make_tensor_value_info(k, TensorProto.FLOAT, s) for k, s in outputs],
                              [numpy_helper.from_array(v, k) for k, v in initializers.items()])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="glnet-tests"),
              os.path.join(work, name + ".onnx"))

# Folded: every logic op of constants; the results, cast to float and joined, added to x so that something runs.
a = np.array([[7, -7, 5, 0, -3, 8]], np.int64)
b = np.array([3, 3, -4, 3, 3, -4], np.int64)
f = np.array([np.nan, np.inf, -np.inf, 1.0, 0.0, -2.0], np.float32)
mod, fmod = np.mod(a, b), np.fmod(a, b)
eq, lt = mod == fmod, mod < fmod
folded = [mod, fmod, eq, lt, mod <= fmod, mod > fmod, mod >= fmod, eq & lt, eq | lt, eq ^ ~lt, ~eq,
          np.isnan(f)[None], np.isinf(f)[None], (f == -np.inf)[None], (f == np.inf)[None], np.where(eq, mod, fmod)]
nodes = [N("Mod", ["a", "b"], ["mod"], name="/Mod"), N("Mod", ["a", "b"], ["fmod"], name="/Fmod", fmod=1),
         N("Equal", ["mod", "fmod"], ["eq"], name="/Equal"), N("Less", ["mod", "fmod"], ["lt"], name="/Less"),
         N("LessOrEqual", ["mod", "fmod"], ["le"], name="/LessOrEqual"), N("Greater", ["mod", "fmod"], ["gt"], name="/Greater"),
         N("GreaterOrEqual", ["mod", "fmod"], ["ge"], name="/GreaterOrEqual"), N("And", ["eq", "lt"], ["and"], name="/And"),
         N("Or", ["eq", "lt"], ["or"], name="/Or"), N("Not", ["lt"], ["nlt"], name="/Not1"), N("Xor", ["eq", "nlt"], ["xor"], name="/Xor"),
         N("Not", ["eq"], ["neq"], name="/Not2"), N("IsNaN", ["f"], ["nan0"], name="/IsNaN"), N("IsInf", ["f"], ["inf0"], name="/IsInf"),
         N("IsInf", ["f"], ["ninf0"], name="/IsInfNegative", detect_positive=0),
         N("IsInf", ["f"], ["pinf0"], name="/IsInfPositive", detect_negative=0), N("Where", ["eq", "mod", "fmod"], ["where"], name="/Where")]
for name in ["nan", "inf", "ninf", "pinf"]:
    nodes.append(N("Unsqueeze", [name + "0", "zero"], [name], name="/Unsqueeze_" + name))
parts = ["mod", "fmod", "eq", "lt", "le", "gt", "ge", "and", "or", "xor", "neq", "nan", "inf", "ninf", "pinf", "where"]
for p in parts:
    nodes.append(N("Cast", [p], [p + "_f"], name="/Cast_" + p, to=TensorProto.FLOAT))
nodes += [N("Concat", [p + "_f" for p in parts], ["table"], name="/Concat", axis=1), N("Add", ["x", "table"], ["y"], name="/Add")]
width = 6 * len(parts)
save("folded", nodes, [("x", ["N", width])], [("y", ["N", width])], {"a": a, "b": b, "f": f, "zero": np.array([0], np.int64)})
x = rng.uniform(-2, 2, (3, width)).astype(np.float32)
np.save(os.path.join(work, "folded-x.npy"), x)
np.save(os.path.join(work, "folded-y.npy"), x.astype(np.float64) + np.concatenate(folded, axis=1).astype(np.float64))

# On the GPU: comparisons, logic, Mod and Where of the computed x (whole halves, so that equal pairs occur, and NaN),
# with constants broadcast against it.
x = (np.round(rng.uniform(-3, 3, (4, 3, 5)) * 2) / 2).astype(np.float32)
x[0, 1, 2] = np.nan
x[2, 0, 4] = np.inf
t = np.array([[0.5], [-1.0], [2.0]], np.float32)
m = np.array([np.float32(0.7)], np.float32)
nodes = [N("Equal", ["x", "t"], ["eq"], name="/Equal"), N("Less", ["x", "t"], ["lt"], name="/Less"),
         N("GreaterOrEqual", ["x", "t"], ["ge"], name="/GreaterOrEqual"), N("Greater", ["x", "t"], ["gt"], name="/Greater"),
         N("LessOrEqual", ["x", "t"], ["le"], name="/LessOrEqual"), N("Or", ["eq", "lt"], ["or"], name="/Or"),
         N("And", ["or", "ge"], ["and"], name="/And"), N("Xor", ["gt", "le"], ["xor"], name="/Xor"), N("Not", ["xor"], ["not"], name="/Not"),
         N("IsNaN", ["x"], ["isnan"], name="/IsNaN"), N("IsInf", ["x"], ["isinf"], name="/IsInf", detect_negative=0),
         N("Mod", ["x", "m"], ["fmod"], name="/Mod", fmod=1), N("Where", ["lt", "fmod", "x"], ["where"], name="/Where")]
outputs = {"eq": x == t, "lt": x < t, "ge": x >= t, "and": (x == t) | (x < t) & (x >= t), "not": ~((x > t) ^ (x <= t)),
           "isnan": np.isnan(x), "isinf": x == np.inf, "where": np.where(x < t, np.fmod(x.astype(np.float64), np.float64(m[0])), x)}
outputs["and"] = ((x == t) | (x < t)) & (x >= t)
save("computed", nodes, [("x", ["N", 3, 5])], [(k, ["N", 3, 5]) for k in outputs], {"t": t, "m": m})
np.save(os.path.join(work, "computed-x.npy"), x)
for k, v in outputs.items():
    np.save(os.path.join(work, "computed-" + k + "-y.npy"), v.astype(np.float64))

# Refused: a Mod of float constants with fmod 0 (ONNX takes fmod 1 for floats) and an integer Mod by zero.
for name, left, right, fmod in [("float-mod", np.array([1.5], np.float32), np.array([0.5], np.float32), 0),
                                ("zero-mod", np.array([3], np.int64), np.array([0], np.int64), 0)]:
    nodes = [N("Mod", ["l", "r"], ["q"], name="/Mod", fmod=fmod), N("Cast", ["q"], ["qf"], name="/Cast", to=TensorProto.FLOAT),
             N("Add", ["x", "qf"], ["y"], name="/Add")]
    save(name, nodes, [("x", ["N", 1])], [("y", ["N", 1])], {"l": left, "r": right})
np.save(os.path.join(work, "x1.npy"), np.zeros((2, 1), np.float32))
PY

# Exact: booleans are 0 and 1, Mod of whole numbers is exact; fmod of 0.7 within float32's rounding; NaN where NumPy has it.
compare() {  # GOT WANT
  /usr/bin/python3 -c "
import numpy as np, sys
got, want = np.load(sys.argv[1]), np.load(sys.argv[2])
np.seterr(all='ignore')
assert got.dtype == np.float32 and got.shape == want.shape, (got.dtype, got.shape, want.shape)
same = (got == want) | (np.isnan(got) & np.isnan(want)) | (np.abs(got - want) <= 1e-6)
assert same.all(), f'{(~same).sum()} of {same.size} values differ: got {got[~same][:5]}, want {want[~same][:5]}'
" "$1" "$2" || fail "$(basename "$1"): glnet_run differs from NumPy"
}
expect 0 "wrote" -- "$apps/glnet_run" --model "$work/folded.onnx" --input "$work/folded-x.npy" --output "$work/folded-out.npy"
compare "$work/folded-out.npy" "$work/folded-y.npy"
"$apps/glnet_info" --model "$work/folded.onnx" --json >"$work/folded-info.json" || fail "glnet_info --model folded.onnx"
/usr/bin/python3 -c "
import json, sys
nodes = json.load(open(sys.argv[1]))['nodes']
logic = [n for n in nodes if n['op_type'] != 'Add']
assert logic and all(n['glnet'] == 'folded' for n in logic), [n for n in logic if n['glnet'] != 'folded']
" "$work/folded-info.json" || fail "glnet_info: the logic ops of constants are not all folded"
set --
for k in eq lt ge and not isnan isinf where; do set -- "$@" --output "$k=$work/computed-$k-out.npy"; done
expect 0 "wrote" -- "$apps/glnet_run" --model "$work/computed.onnx" --input "$work/computed-x.npy" "$@"
for k in eq lt ge and not isnan isinf where; do compare "$work/computed-$k-out.npy" "$work/computed-$k-y.npy"; done
expect 1 "float-mod.onnx: node '/Mod' \(Mod, opset 17\): fmod = 0 \(the divisor's sign\) is for integers; a Mod of floats takes fmod = 1" \
  -- "$apps/glnet_run" --model "$work/float-mod.onnx" --input "$work/x1.npy" --output "$work/o.npy"
expect 1 "zero-mod.onnx: node '/Mod' \(Mod, opset 17\): integer division by zero" \
  -- "$apps/glnet_run" --model "$work/zero-mod.onnx" --input "$work/x1.npy" --output "$work/o.npy"
finish onnx-logic
