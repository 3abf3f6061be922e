#!/bin/sh
# onnx_checks.sh APPS_DIR: glnet_run on ONNX models built here with python3-onnx the way torch.onnx.export
# writes them (an MLP of Gemm nodes with transB, a CNN of Conv, Relu, MaxPool, Flatten and Gemm, an MLP of
# MatMul and Add behind a Reshape, a Gemm with a BatchNormalization folded into it, a reshape through folded
# shape arithmetic and a Softmax; weights as initializers and as external data), each with a dynamic batch,
# compared with a float64 NumPy evaluation of the same model; glnet_info on a model; then the refusals:
# unsupported ops named with their node, files that are not models, and inputs of the wrong shape.
set -u
apps=$1
here=$(dirname "$0")
. "$here/common.sh"

/usr/bin/python3 - "$work" <<'PY' || { fail "building the ONNX models"; finish onnx; }
import os, sys
import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto
work = sys.argv[1]
rng = np.random.default_rng(7)

def weights(*shape):
    return (rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))).astype(np.float32)

def save(name, nodes, inputs, output_shape, initializers, opset=17, external=None):
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, inputs)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, output_shape)],
                              [numpy_helper.from_array(v, k) for k, v in initializers.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="glnet-tests")
    if external:
        onnx.save_model(model, os.path.join(work, name + ".onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
                        location=external, size_threshold=0)
    else:
        onnx.save(model, os.path.join(work, name + ".onnx"))

relu = lambda v: np.maximum(v, 0)

# MLP: Gemm(transB=1) as nn.Linear exports, Relu, Gemm.
w1, b1, w2, b2 = weights(37, 29), weights(37), weights(10, 37), weights(10)
save("mlp", [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], name="/fc1/Gemm", transB=1),
             helper.make_node("Relu", ["h"], ["r"], name="/relu/Relu"),
             helper.make_node("Gemm", ["r", "w2", "b2"], ["y"], name="/fc2/Gemm", alpha=1.0, beta=1.0, transB=1)],
     ["N", 29], ["N", 10], {"w1": w1, "b1": b1, "w2": w2, "b2": b2})
x = rng.standard_normal((5, 29)).astype(np.float32)
np.save(os.path.join(work, "mlp-x.npy"), x)
x64 = x.astype(np.float64)
np.save(os.path.join(work, "mlp-y.npy"), relu(x64 @ w1.T.astype(np.float64) + b1) @ w2.T.astype(np.float64) + b2)

# CNN: Conv (same padding) + Relu + MaxPool twice, Flatten, Gemm + Relu, Gemm; weights in one external file.
c1, cb1, c2, cb2 = weights(4, 1, 5, 5), weights(4), weights(6, 4, 3, 3), weights(6)
f1, fb1, f2, fb2 = weights(16, 6 * 3 * 3), weights(16), weights(7, 16), weights(7)
save("cnn", [helper.make_node("Conv", ["x", "c1", "cb1"], ["a"], name="/conv1/Conv", kernel_shape=[5, 5], pads=[2, 2, 2, 2], strides=[1, 1], dilations=[1, 1], group=1),
             helper.make_node("Relu", ["a"], ["b"], name="/relu1/Relu"),
             helper.make_node("MaxPool", ["b"], ["c"], name="/pool1/MaxPool", kernel_shape=[2, 2], strides=[2, 2], pads=[0, 0, 0, 0], ceil_mode=0),
             helper.make_node("Conv", ["c", "c2", "cb2"], ["d"], name="/conv2/Conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["d"], ["e"], name="/relu2/Relu"),
             helper.make_node("MaxPool", ["e"], ["f"], name="/pool2/MaxPool", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["f"], ["g"], name="/flatten/Flatten", axis=1),
             helper.make_node("Gemm", ["g", "f1", "fb1"], ["h"], name="/fc1/Gemm", transB=1),
             helper.make_node("Relu", ["h"], ["i"], name="/relu3/Relu"),
             helper.make_node("Gemm", ["i", "f2", "fb2"], ["y"], name="/fc2/Gemm", transB=1)],
     ["batch", 1, 13, 13], ["batch", 7], {"c1": c1, "cb1": cb1, "c2": c2, "cb2": cb2, "f1": f1, "fb1": fb1, "f2": f2, "fb2": fb2},
     external="cnn.weights")

def conv(x, w, b, pad):
    n, c, h, wd = x.shape
    k = w.shape[2]
    padded = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    out = np.zeros((n, w.shape[0], h + 2 * pad - k + 1, wd + 2 * pad - k + 1))
    for i in range(out.shape[2]):
        for j in range(out.shape[3]):
            out[:, :, i, j] = np.einsum("nckl,ockl->no", padded[:, :, i:i + k, j:j + k], w)
    return out + b[None, :, None, None]

def pool(x):
    n, c, h, w = x.shape
    x = x[:, :, :h // 2 * 2, :w // 2 * 2]
    return x.reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))

x = rng.standard_normal((3, 1, 13, 13)).astype(np.float32)
np.save(os.path.join(work, "cnn-x.npy"), x)
d = lambda v: v.astype(np.float64)
h = pool(relu(conv(pool(relu(conv(d(x), d(c1), d(cb1), 2))), d(c2), d(cb2), 1))).reshape(3, -1)
np.save(os.path.join(work, "cnn-y.npy"), relu(h @ d(f1).T + d(fb1)) @ d(f2).T + d(fb2))

# MatMul + Add behind a Reshape to [batch, features], as x.view(x.size(0), -1) and x @ W + b export; opset 11.
m, mb = weights(12, 5), weights(5)
save("matmul", [helper.make_node("Reshape", ["x", "shape"], ["flat"], name="/Reshape"),
                helper.make_node("MatMul", ["flat", "m"], ["p"], name="/MatMul"),
                helper.make_node("Add", ["p", "mb"], ["q"], name="/Add"),
                helper.make_node("Tanh", ["q"], ["y"], name="/Tanh")],
     ["N", 3, 4], ["N", 5], {"shape": np.array([0, -1], np.int64), "m": m.T.copy().T, "mb": mb}, opset=11)
x = rng.standard_normal((4, 3, 4)).astype(np.float32)
np.save(os.path.join(work, "matmul-x.npy"), x)
np.save(os.path.join(work, "matmul-y.npy"), np.tanh(d(x).reshape(4, -1) @ d(m) + d(mb)))

# Softmax rows after a Gemm and a BatchNormalization (folded into the Gemm), the batch from shape arithmetic.
mean, var, scale, shift = weights(37), np.abs(weights(37)) + 0.5, weights(37) + 1, weights(37)
save("softmax", [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], name="/fc1/Gemm", transB=1),
                 helper.make_node("BatchNormalization", ["h", "scale", "shift", "mean", "var"], ["n"], name="/bn/BatchNormalization", epsilon=1e-3),
                 helper.make_node("Shape", ["n"], ["s"], name="/Shape"),
                 helper.make_node("Gather", ["s", "zero"], ["rows"], name="/Gather", axis=0),
                 helper.make_node("Unsqueeze", ["rows", "axes"], ["rows1"], name="/Unsqueeze"),
                 helper.make_node("Concat", ["rows1", "minus1"], ["target"], name="/Concat", axis=0),
                 helper.make_node("Reshape", ["n", "target"], ["r"], name="/Reshape"),
                 helper.make_node("Softmax", ["r"], ["y"], name="/softmax/Softmax", axis=1)],
     ["N", 29], ["N", 37], {"w1": w1, "b1": b1, "scale": scale, "shift": shift, "mean": mean, "var": var,
                           "zero": np.array(0, np.int64), "axes": np.array([0], np.int64), "minus1": np.array([-1], np.int64)})
z = (d(np.load(os.path.join(work, "mlp-x.npy"))) @ d(w1).T + d(b1) - d(mean)) / np.sqrt(d(var) + 1e-3) * d(scale) + d(shift)
z = np.exp(z - z.max(axis=1, keepdims=True))
np.save(os.path.join(work, "softmax-x.npy"), np.load(os.path.join(work, "mlp-x.npy")))
np.save(os.path.join(work, "softmax-y.npy"), z / z.sum(axis=1, keepdims=True))

# A strided convolution with its LeakyRelu fused, against float64.
save("strided", [helper.make_node("Conv", ["x", "c1"], ["a"], name="/conv/Conv", kernel_shape=[5, 5], strides=[2, 2], pads=[1, 2, 0, 1]),
                 helper.make_node("LeakyRelu", ["a"], ["y"], name="/act/LeakyRelu", alpha=0.1)],
     ["N", 1, 13, 13], ["N", 4, 5, 6], {"c1": c1})
x = d(np.load(os.path.join(work, "cnn-x.npy")))
padded = np.pad(x, ((0, 0), (0, 0), (1, 0), (2, 1)))
out = np.zeros((x.shape[0], 4, 5, 6))
for i in range(5):
    for j in range(6):
        out[:, :, i, j] = np.einsum("nchw,ochw->no", padded[:, :, 2 * i:2 * i + 5, 2 * j:2 * j + 5], d(c1))
np.save(os.path.join(work, "strided-x.npy"), np.load(os.path.join(work, "cnn-x.npy")))
np.save(os.path.join(work, "strided-y.npy"), np.where(out >= 0, out, 0.1 * out))

# Functions the convolutions store themselves: a 3x3 Conv read by a Sigmoid and the Mul of both (SiLU as exported),
# then a 1x1 Conv and a Clip (ReLU6).
c3, c4, cb4 = weights(3, 1, 3, 3), weights(5, 3, 1, 1), weights(5)
save("silu", [helper.make_node("Conv", ["x", "c3"], ["a"], name="/conv1/Conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
              helper.make_node("Sigmoid", ["a"], ["s"], name="/act1/Sigmoid"),
              helper.make_node("Mul", ["a", "s"], ["b"], name="/act1/Mul"),
              helper.make_node("Conv", ["b", "c4", "cb4"], ["c"], name="/conv2/Conv", kernel_shape=[1, 1]),
              helper.make_node("Clip", ["c", "low", "high"], ["y"], name="/act2/Clip")],
     ["N", 1, 13, 13], ["N", 5, 13, 13], {"c3": c3, "c4": c4, "cb4": cb4, "low": np.array(0, np.float32), "high": np.array(0.3, np.float32)})
x = d(np.load(os.path.join(work, "cnn-x.npy")))
padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
a = np.zeros((x.shape[0], 3, 13, 13))
for i in range(3):
    for j in range(3):
        a += np.einsum("nchw,oc->nohw", padded[:, :, i:i + 13, j:j + 13], d(c3)[:, :, i, j])
b = a / (1 + np.exp(-a))
c = np.einsum("nchw,oc->nohw", b, d(c4)[:, :, 0, 0]) + d(cb4)[None, :, None, None]
np.save(os.path.join(work, "silu-x.npy"), np.load(os.path.join(work, "cnn-x.npy")))
np.save(os.path.join(work, "silu-y.npy"), np.clip(c, 0, 0.3))

# A residual block's end: Conv, then Add of its input (either order), then Relu, as one op.
c5, cb5 = weights(1, 1, 3, 3), weights(1)
save("residual", [helper.make_node("Conv", ["x", "c5", "cb5"], ["a"], name="/conv/Conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
                  helper.make_node("Add", ["x", "a"], ["s"], name="/Add"),
                  helper.make_node("Relu", ["s"], ["y"], name="/relu/Relu")],
     ["N", 1, 13, 13], ["N", 1, 13, 13], {"c5": c5, "cb5": cb5})
x = d(np.load(os.path.join(work, "cnn-x.npy")))
padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
a = np.zeros(x.shape) + d(cb5)[0]
for i in range(3):
    for j in range(3):
        a += padded[:, :, i:i + 13, j:j + 13] * d(c5)[0, 0, i, j]
np.save(os.path.join(work, "residual-x.npy"), np.load(os.path.join(work, "cnn-x.npy")))
np.save(os.path.join(work, "residual-y.npy"), np.maximum(a + x, 0))
# A pre-activation block's order (Add, then a BatchNormalization no layer absorbs, then Relu): the Relu must run after
# the BatchNormalization (its negative scale makes the order show), not inside the convolution.
save("preact", [helper.make_node("Conv", ["x", "c5", "cb5"], ["a"], name="/conv/Conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
                helper.make_node("Add", ["a", "x"], ["s"], name="/Add"),
                helper.make_node("BatchNormalization", ["s", "bn_scale", "bn_bias", "bn_mean", "bn_var"], ["n"], name="/bn/BatchNormalization", epsilon=1e-5),
                helper.make_node("Relu", ["n"], ["y"], name="/relu/Relu")],
     ["N", 1, 13, 13], ["N", 1, 13, 13], {"c5": c5, "cb5": cb5, "bn_scale": np.array([-0.7], np.float32), "bn_bias": np.array([0.2], np.float32),
                                          "bn_mean": np.array([0.1], np.float32), "bn_var": np.array([1.5], np.float32)})
np.save(os.path.join(work, "preact-x.npy"), np.load(os.path.join(work, "cnn-x.npy")))
np.save(os.path.join(work, "preact-y.npy"), np.maximum((a + x - d(np.float32(0.1))) / np.sqrt(d(np.float32(1.5)) + 1e-5) * d(np.float32(-0.7)) + d(np.float32(0.2)), 0))

# Two inputs and two outputs: y = a + b (b broadcast), z = relu(y) * a.
graph = helper.make_graph([helper.make_node("Add", ["a", "b"], ["y"], name="/add"), helper.make_node("Relu", ["y"], ["r"], name="/relu"),
                           helper.make_node("Mul", ["r", "a"], ["z"], name="/mul")], "two",
                          [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 3]), helper.make_tensor_value_info("b", TensorProto.FLOAT, [3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3]), helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", 3])])
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), os.path.join(work, "two.onnx"))
a, b = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
np.save(os.path.join(work, "two-a.npy"), a)
np.save(os.path.join(work, "two-b.npy"), b)
np.save(os.path.join(work, "two-y-y.npy"), d(a) + d(b))
np.save(os.path.join(work, "two-z-y.npy"), np.maximum(d(a) + d(b), 0) * d(a))

# Refusals: an op glnet does not run, an attribute it does not take, a computed tensor where axes must be constant.
save("computed-axes", [helper.make_node("Unsqueeze", ["x", "x"], ["y"], name="/Unsqueeze")], ["N", 29], ["N", 1, 29], {})
save("resize", [helper.make_node("Resize", ["x", "", "scales"], ["y"], name="/up/Resize", mode="nearest")], ["N", 1, 13, 13], ["N", 1, 26, 26],
     {"scales": np.array([1, 1, 2, 2], np.float32)})
save("conv3d", [helper.make_node("Conv", ["x", "k3"], ["y"], name="/conv/Conv", kernel_shape=[1, 3, 3])],
     ["N", 1, 3, 13, 13], ["N", 2, 3, 11, 11], {"k3": np.ones((2, 1, 1, 3, 3), np.float32)})
np.save(os.path.join(work, "wrong-x.npy"), np.zeros((2, 30), np.float32))
np.save(os.path.join(work, "unbatched-x.npy"), np.zeros((1, 13, 13), np.float32))  # one CNN image without its batch axis
# float16 inputs, as NumPy and PyTorch save half tensors: widened exactly to float32 on load.
x16 = rng.standard_normal((3, 29)).astype(np.float16)
np.save(os.path.join(work, "half-x.npy"), x16)
np.save(os.path.join(work, "half-y.npy"), relu(x16.astype(np.float64) @ w1.T.astype(np.float64) + b1) @ w2.T.astype(np.float64) + b2)
# PyTorch's Identity nodes, on a shared weight (folded) and on a computed tensor, under a name longer than any column.
save("identity", [helper.make_node("Identity", ["w1"], ["shared"], name="/shared/Identity"),
                  helper.make_node("Identity", ["x"], ["i"], name="/features_block_with_a_long_name/ident/Identity"),
                  helper.make_node("Gemm", ["i", "shared", "b1"], ["y"], name="/fc1/Gemm", transB=1)], ["N", 29], ["N", 37], {"w1": w1, "b1": b1})
np.save(os.path.join(work, "int-x.npy"), np.zeros((2, 29), np.int64))
# Token ids (int64) and a mask (bool), both [batch, sequence]: held as exact floats on the GPU, where a real cast to an
# integer truncates (toward zero), integers divide truncating, and a number cast to bool tests for nonzero.
graph = helper.make_graph([helper.make_node("Cast", ["ids"], ["f"], name="/ids/Cast", to=TensorProto.FLOAT),
                           helper.make_node("Cast", ["mask"], ["m"], name="/mask/Cast", to=TensorProto.FLOAT),
                           helper.make_node("Mul", ["f", "m"], ["fm"], name="/masked"),
                           helper.make_node("Mul", ["fm", "three_quarters"], ["p"], name="/scaled"),
                           helper.make_node("Cast", ["p"], ["i"], name="/truncated", to=TensorProto.INT64),
                           helper.make_node("Div", ["i", "two"], ["q"], name="/halved"),
                           helper.make_node("Cast", ["q"], ["qf"], name="/q/Cast", to=TensorProto.FLOAT),
                           helper.make_node("Cast", ["fm"], ["b"], name="/nonzero", to=TensorProto.BOOL),
                           helper.make_node("Cast", ["b"], ["bf"], name="/b/Cast", to=TensorProto.FLOAT),
                           helper.make_node("Add", ["qf", "bf"], ["y"], name="/sum")],
                          "tokens", [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "sequence"]),
                                     helper.make_tensor_value_info("mask", TensorProto.BOOL, ["batch", "sequence"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "sequence"])],
                          [numpy_helper.from_array(np.array(0.75, np.float32), "three_quarters"), numpy_helper.from_array(np.array(2, np.int64), "two")])
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), os.path.join(work, "tokens.onnx"))
for rows, length in (2, 7), (1, 12):
    ids = rng.integers(-50, 50, (rows, length), dtype=np.int64)
    mask = rng.integers(0, 2, (rows, length)).astype(bool)
    name = f"tokens{rows}x{length}"
    np.save(os.path.join(work, name + "-ids.npy"), ids)
    np.save(os.path.join(work, name + "-mask.npy"), mask)
    masked = ids * mask
    np.save(os.path.join(work, name + "-y.npy"), np.trunc(np.trunc(masked * 0.75) / 2) + (masked != 0))
np.save(os.path.join(work, "tokens-long-mask.npy"), np.ones((2, 9), bool))
# Conv, Relu, BatchNormalization: the ReLU runs in the convolution's kernel, so the normalization must not fold into the
# convolution's weights (it would act before the ReLU).
cw, cb = weights(3, 2, 3, 3), weights(3)
bn = {"g": np.array([1.5, -0.5, 2.0], np.float32), "beta": np.array([0.1, 0.2, -0.3], np.float32),
      "mu": np.array([0.05, -0.1, 0.2], np.float32), "var": np.array([0.5, 2.0, 1.0], np.float32)}
save("conv_relu_bn", [helper.make_node("Conv", ["x", "cw", "cb"], ["c"], name="/conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
                      helper.make_node("Relu", ["c"], ["r"], name="/relu"),
                      helper.make_node("BatchNormalization", ["r", "g", "beta", "mu", "var"], ["y"], name="/bn", epsilon=1e-5)],
     ["N", 2, 6, 6], ["N", 3, 6, 6], {"cw": cw, "cb": cb, **bn})
x = rng.standard_normal((2, 2, 6, 6)).astype(np.float32)
np.save(os.path.join(work, "conv_relu_bn-x.npy"), x)
padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
conv = np.zeros((2, 3, 6, 6)) + cb.astype(np.float64)[None, :, None, None]
for i in range(3):
    for j in range(3):
        conv += np.einsum("nchw,oc->nohw", padded[:, :, i:i + 6, j:j + 6], cw[:, :, i, j].astype(np.float64))
shaped = lambda a: a.astype(np.float64)[None, :, None, None]
np.save(os.path.join(work, "conv_relu_bn-y.npy"), (relu(conv) - shaped(bn["mu"])) / np.sqrt(shaped(bn["var"]) + 1e-5) * shaped(bn["g"]) + shaped(bn["beta"]))
# Attention as exports write it, fused into one op: Q·Kᵀ (K transposed by a Transpose), a scale, Softmax, ·V, where V
# itself is scaled (its scale is V's own, never the softmax's).
graph = helper.make_graph([helper.make_node("Transpose", ["k"], ["kt"], name="/kt", perm=[0, 1, 3, 2]),
                           helper.make_node("MatMul", ["q", "kt"], ["s"], name="/scores"),
                           helper.make_node("Mul", ["s", "scale"], ["ss"], name="/scaled"),
                           helper.make_node("Softmax", ["ss"], ["p"], name="/softmax", axis=-1),
                           helper.make_node("Mul", ["v", "quarter"], ["vs"], name="/v_scaled"),
                           helper.make_node("MatMul", ["p", "vs"], ["y"], name="/weighted")],
                          "attention", [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N", 2, 5, 4]) for n in "qkv"],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2, 5, 4])],
                          [numpy_helper.from_array(np.array(0.5, np.float32), "scale"), numpy_helper.from_array(np.array(0.25, np.float32), "quarter")])
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), os.path.join(work, "attention.onnx"))
q, k, v = (rng.standard_normal((3, 2, 5, 4)).astype(np.float32) for _ in range(3))
for n, a in zip("qkv", (q, k, v)):
    np.save(os.path.join(work, f"attention-{n}.npy"), a)
scores = 0.5 * q.astype(np.float64) @ k.astype(np.float64).transpose(0, 1, 3, 2)
weights = np.exp(scores - scores.max(-1, keepdims=True))
np.save(os.path.join(work, "attention-y.npy"), (weights / weights.sum(-1, keepdims=True)) @ (0.25 * v.astype(np.float64)))
np.save(os.path.join(work, "tokens-huge-ids.npy"), np.full((2, 7), 1 << 25, np.int64))
np.save(os.path.join(work, "tokens-float-ids.npy"), np.zeros((2, 7), np.float32))
# uint8 pixels that the model converts itself (Cast, Div), read from a uint8 .npy.
graph = helper.make_graph([helper.make_node("Cast", ["x"], ["f"], name="/cast", to=TensorProto.FLOAT),
                           helper.make_node("Div", ["f", "scale"], ["y"], name="/div")],
                          "bytes", [helper.make_tensor_value_info("x", TensorProto.UINT8, ["N", 2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2, 3])], [numpy_helper.from_array(np.array([255.0], np.float32), "scale")])
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), os.path.join(work, "bytes.onnx"))
x = rng.integers(0, 256, (3, 2, 3), dtype=np.uint8)
np.save(os.path.join(work, "bytes-x.npy"), x)
np.save(os.path.join(work, "bytes-y.npy"), x.astype(np.float64) / 255)
open(os.path.join(work, "garbage.onnx"), "wb").write(b"\x08\x07garbage that is no protobuf \xff\xff\xff")
open(os.path.join(work, "empty.onnx"), "wb").close()

# Hostile files (issue 44), each refused alike by glnet_info, glnet_run and glnet_train --net: a graph ONNX's checker
# rejects, weights nothing can run, external data that leads out of the model's folder.
def hostile(name, nodes, initializers=(), inputs=None, outputs=None, opset=17):
    inputs = inputs if inputs is not None else [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])]
    outputs = outputs if outputs is not None else [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    initializers = [numpy_helper.from_array(i[1], i[0]) if isinstance(i, tuple) else i for i in initializers]
    graph = helper.make_graph(nodes, name, inputs, outputs, initializers)
    # Serialized as built: onnx.save would not check it either, but nothing here may depend on that.
    open(os.path.join(work, "hostile-" + name + ".onnx"), "wb").write(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString())

ones = lambda *shape: np.ones(shape, np.float32)
image = lambda c: [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", c, 5, 5])]
hostile("scalar-input", [helper.make_node("Relu", ["x"], ["y"], name="/relu")], inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, [])])
hostile("empty-conv", [helper.make_node("Conv", ["x", "w"], ["y"], name="/conv")], {"w": np.zeros((0, 4, 3, 3), np.float32)}.items(), image(4))
hostile("cycle", [helper.make_node("Relu", ["b"], ["a"], name="/r1"), helper.make_node("Relu", ["a"], ["b"], name="/r2"),
                  helper.make_node("Add", ["x", "a"], ["y"], name="/add")])
hostile("two-producers", [helper.make_node("Relu", ["x"], ["y"], name="/r1"), helper.make_node("Sigmoid", ["x"], ["y"], name="/s1")])
hostile("two-initializers", [helper.make_node("Add", ["x", "b"], ["y"], name="/add")],
        [numpy_helper.from_array(ones(4), "b"), numpy_helper.from_array(2 * ones(4), "b")])
hostile("two-inputs", [helper.make_node("Add", ["x", "x"], ["y"], name="/add")], inputs=2 * [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])])
hostile("float-strides", [helper.make_node("Conv", ["x", "w"], ["y"], name="/conv", strides=[1.5, 1.5])], {"w": ones(1, 1, 3, 3)}.items(), image(1))
hostile("string-strides", [helper.make_node("Conv", ["x", "w"], ["y"], name="/conv", strides="1")], {"w": ones(1, 1, 3, 3)}.items(), image(1))
hostile("kernel-shape", [helper.make_node("Conv", ["x", "w"], ["y"], name="/conv", kernel_shape=[5, 5])], {"w": ones(1, 1, 3, 3)}.items(), image(1))
hostile("split", [helper.make_node("Split", ["x", "s"], ["y", "z"], name="/split", axis=1)], {"s": np.array([2, 2], np.int64)}.items(),
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 5])], [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in "yz"])
hostile("concat", [helper.make_node("Concat", ["x", "x"], ["y"], name="/concat")])
hostile("unsqueeze", [helper.make_node("Unsqueeze", ["x", "a"], ["y"], name="/unsqueeze")], {"a": np.array([1, 1], np.int64)}.items())
hostile("slice", [helper.make_node("Slice", ["x", "s", "e", "a"], ["y"], name="/slice")],
        {"s": np.array([0, 1], np.int64), "e": np.array([2, 3], np.int64), "a": np.array([1, 1], np.int64)}.items())
hostile("reduce", [helper.make_node("ReduceSum", ["x", "a"], ["y"], name="/reduce")], {"a": np.array([1, -1], np.int64)}.items())
hostile("no-outputs", [helper.make_node("Gemm", ["x", "w"], ["y"], name="/fc", transB=1)], {"w": ones(3, 4)}.items(), outputs=[])
hostile("batchnorm", [helper.make_node("Conv", ["x", "w"], ["c"], name="/conv"),
                      helper.make_node("BatchNormalization", ["c", "g", "b", "m", "v"], ["y"], name="/bn")],
        {"w": ones(2, 2, 3, 3), "g": ones(2), "b": ones(2), "m": ones(2), "v": -ones(2)}.items(), image(2))
hostile("nan-weight", [helper.make_node("Gemm", ["x", "w"], ["y"], name="/fc", transB=1)], {"w": np.full((3, 4), np.nan, np.float32)}.items())
hostile("inf-weight", [helper.make_node("Gemm", ["x", "w"], ["y"], name="/fc", transB=1)], {"w": np.full((3, 4), np.inf, np.float32)}.items())
# A constant of arithmetic may be infinite: an attention mask's -inf before a softmax.
hostile("mask", [helper.make_node("Add", ["x", "m"], ["s"], name="/mask"), helper.make_node("Softmax", ["s"], ["y"], name="/softmax", axis=1)],
        {"m": np.array([0, -np.inf, 0, 0], np.float32)}.items())
hostile("pool-pads", [helper.make_node("MaxPool", ["x"], ["y"], name="/pool", kernel_shape=[2, 2], pads=[2, 2, 2, 2])], inputs=image(1))
hostile("gather", [helper.make_node("Gather", ["x", "i"], ["y"], name="/gather", axis=1)], {"i": np.array([[0, 1], [2, 4]], np.int64)}.items())
# Indices of any shape gather on the GPU (negatives from the end).
hostile("gather2d", [helper.make_node("Gather", ["x", "i"], ["y"], name="/gather", axis=1)], {"i": np.array([[3, 1], [0, -4]], np.int64)}.items())
# External data named as a file beside the model, which is a symbolic link to a file elsewhere.
linked = numpy_helper.from_array(np.zeros(4, np.float32), "b")
linked.ClearField("raw_data")
linked.data_location = TensorProto.EXTERNAL
for key, value in (("location", "link_passwd"), ("offset", "0"), ("length", "16")):
    entry = linked.external_data.add()
    entry.key, entry.value = key, value
hostile("link", [helper.make_node("Add", ["x", "b"], ["y"], name="/add")], [linked])
os.symlink("/etc/passwd", os.path.join(work, "link_passwd"))
np.save(os.path.join(work, "x4.npy"), np.ones((2, 4), np.float32))
np.save(os.path.join(work, "ramp4.npy"), np.arange(8, dtype=np.float32).reshape(2, 4))
np.save(os.path.join(work, "x5.npy"), np.ones((2, 5), np.float32))
np.save(os.path.join(work, "x1.npy"), np.ones((2, 1, 5, 5), np.float32))
np.save(os.path.join(work, "x2.npy"), np.ones((2, 2, 5, 5), np.float32))
np.save(os.path.join(work, "x4x5x5.npy"), np.ones((2, 4, 5, 5), np.float32))
np.save(os.path.join(work, "scalar.npy"), np.ones((1,), np.float32))
# NaN in gives NaN out (an Add passes it on); a float64 value float32 cannot hold is the file's, not the model's.
hostile("add", [helper.make_node("Add", ["x", "b"], ["y"], name="/add")], {"b": ones(4)}.items())
np.save(os.path.join(work, "nan-x.npy"), np.array([[1, np.nan, 1, 1], [1, 1, 1, 1]], np.float32))
np.save(os.path.join(work, "huge-x.npy"), np.array([[1, 1e300, 1, 1], [1, 1, 1, 1]], np.float64))
PY

# compare NAME: glnet_run's output against the float64 NumPy one, |glnet − ref| ≤ 1e-5 + 1e-4·|ref| (float32 sums).
compare() {
  /usr/bin/python3 -c "
import numpy as np, sys
got, want = np.load(sys.argv[1]), np.load(sys.argv[2])
assert got.dtype == np.float32 and got.shape == want.shape, (got.dtype, got.shape, want.shape)
bad = np.abs(got - want) > 1e-5 + 1e-4 * np.abs(want)
assert not bad.any(), f'{bad.sum()} of {bad.size} values differ, worst {np.abs(got - want).max()}'
" "$work/$1-out.npy" "$work/$1-y.npy" || fail "$1: glnet_run differs from the float64 reference"
}
for model in mlp cnn matmul softmax strided silu residual preact bytes; do
  expect 0 "ran .*$model.onnx .* wrote" -- "$apps/glnet_run" --model "$work/$model.onnx" --input "x=$work/$model-x.npy" --output "$work/$model-out.npy" --check
  compare $model
done
# NaN in gives NaN out (issue 44): a NaN pixel of the first image through Conv, Relu and MaxPool reaches its scores
# (before, Relu and MaxPool dropped it and the scores were numbers); the other images' scores stay numbers, and the
# float64 check, which propagates the NaN the same way, agrees.
/usr/bin/python3 -c "
import numpy as np, sys
x = np.load(sys.argv[1]); x[0, 0, 5, 6] = np.nan; np.save(sys.argv[2], x)" "$work/cnn-x.npy" "$work/cnn-nan-x.npy" || fail "writing the NaN input"
expect 0 "warning: .*cnn.onnx: input x holds NaN or infinite values \(the first at element 71\); output y holds NaN or infinite values too" -- \
  "$apps/glnet_run" --model "$work/cnn.onnx" --input "$work/cnn-nan-x.npy" --output "$work/cnn-nan-out.npy" --check
expect 0 "float64 check: largest difference [0-9.]+e-0[5-9]" -- \
  "$apps/glnet_run" --model "$work/cnn.onnx" --input "$work/cnn-nan-x.npy" --output "$work/cnn-nan-out.npy" --check
/usr/bin/python3 -c "
import numpy as np, sys
y = np.load(sys.argv[1])
assert np.isnan(y[0]).all() and np.isfinite(y[1:]).all(), y
" "$work/cnn-nan-out.npy" || fail "a NaN pixel does not reach its image's scores alone"
# Several inputs and outputs, by name in any order, or by position.
expect 0 "wrote .*two-z-out.npy, .*two-y-out.npy" -- "$apps/glnet_run" --model "$work/two.onnx" --input "b=$work/two-b.npy" --input "a=$work/two-a.npy" \
  --output "z=$work/two-z-out.npy" --output "y=$work/two-y-out.npy" --check
compare two-z
compare two-y
expect 0 "wrote" -- "$apps/glnet_run" --model "$work/two.onnx" --input "$work/two-a.npy" --input "$work/two-b.npy" --output "$work/two-y-out.npy"
compare two-y
expect 2 "error: the model has 2 inputs; give each with --input" -- "$apps/glnet_run" --model "$work/two.onnx" --input "$work/two-a.npy" --output "$work/o.npy"
expect 2 "error: the model's outputs are y, z, not w" -- "$apps/glnet_run" --model "$work/two.onnx" --input "$work/two-a.npy" --input "$work/two-b.npy" --output "w=$work/o.npy"
# A dynamic batch larger than the file: its rows repeat.
expect 0 "on 8 rows" -- "$apps/glnet_run" --model "$work/mlp.onnx" --input "$work/mlp-x.npy" --output "$work/mlp8.npy" --batch 8 --time --repeat 3
/usr/bin/python3 -c "
import numpy as np, sys
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
assert a.shape == (8, 10) and np.array_equal(a[5:], a[:3]) and np.allclose(a[:5], b, rtol=1e-4, atol=1e-5)
" "$work/mlp8.npy" "$work/mlp-y.npy" || fail "--batch 8 on 5 rows"

# glnet_info describes a model without a device: every node, the op it becomes, shapes and multiply-adds.
"$apps/glnet_info" --model "$work/cnn.onnx" --batch 4 --json >"$work/info.json" || fail "glnet_info --model"
/usr/bin/python3 -c "
import json, sys
m = json.load(open(sys.argv[1]))
assert m['input']['shape'] == [4, 1, 13, 13] and m['output']['shape'] == [4, 7] and m['dynamic_batch'], m
# Conv, Relu and the 2x2 MaxPool as one op that pools as it stores: 4 of the 13x13 outputs per pooled one (odd edges dropped).
assert m['nodes'][0]['glnet'] == 'conv + max pool' and [n['glnet'] for n in m['nodes']][1:3] == ['fused', 'fused'] and m['nodes'][6]['output_shape'] == [4, 54], m['nodes']
assert m['multiply_adds'] == 4 * 4 * 4 * 6 * 6 * 25 + 4 * 6 * 6 * 6 * 4 * 9 + 4 * 16 * 54 + 4 * 7 * 16, m['multiply_adds']
assert m['parameter_bytes'] == 4 * (100 + 4 + 216 + 6 + 864 + 16 + 112 + 7)
" "$work/info.json" || fail "glnet_info --model content"
# With --plan, glnet_info builds the plan on the device and counts what one run issues: as glnet_bench does.
"$apps/glnet_info" --model "$work/cnn.onnx" --batch 4 --plan --json >"$work/info-plan.json" || fail "glnet_info --model --plan"
"$apps/glnet_bench" --model "$work/cnn.onnx" --batches 4 --runs 1 --warmup 0 >"$work/bench-plan.txt" 2>&1 || fail "glnet_bench --model cnn.onnx"
/usr/bin/python3 -c "
import json, re, sys
plan = json.load(open(sys.argv[1]))['plan']
bench = re.search(r'(\d+) dispatches, (\d+) barriers', open(sys.argv[2]).read())
assert bench and plan['dispatches'] == int(bench.group(1)) > 0 and plan['barriers'] == int(bench.group(2)), (plan, bench and bench.groups())
" "$work/info-plan.json" "$work/bench-plan.txt" || fail "glnet_info --plan counts what glnet_bench counts"
expect 0 "dispatches per run" -- "$apps/glnet_info" --model "$work/cnn.onnx" --plan
expect 2 "error: --plan goes with --model" -- "$apps/glnet_info" --plan
# SiLU's Sigmoid and Mul, and the Clip, run inside the convolutions before them.
"$apps/glnet_info" --model "$work/silu.onnx" --json >"$work/info-silu.json" || fail "glnet_info --model silu.onnx"
/usr/bin/python3 -c "
import json, sys
m = json.load(open(sys.argv[1]))
assert [n['glnet'] for n in m['nodes']] == ['conv', 'fused', 'fused', 'conv', 'fused'], m['nodes']
" "$work/info-silu.json" || fail "glnet_info: SiLU and Clip fused into the convolutions"
"$apps/glnet_info" --model "$work/residual.onnx" --json >"$work/info-residual.json" || fail "glnet_info --model residual.onnx"
/usr/bin/python3 -c "
import json, sys
m = json.load(open(sys.argv[1]))
assert [n['glnet'] for n in m['nodes']] == ['conv + residual', 'fused', 'fused'], m['nodes']
" "$work/info-residual.json" || fail "glnet_info: the residual Add and its Relu fused into the convolution"
# glnet_info's table: every column starts where its heading does, whatever the names; an Identity of a constant is folded.
"$apps/glnet_info" --model "$work/identity.onnx" >"$work/info-identity.txt" && "$apps/glnet_info" --model "$work/cnn.onnx" >>"$work/info-identity.txt" ||
  fail "glnet_info --model identity.onnx"
/usr/bin/python3 -c "
import sys
lines = open(sys.argv[1]).read().split('\n')
tables = [i for i, line in enumerate(lines) if line.startswith('node ')]
assert len(tables) == 2, lines
for start in tables:
    heading = lines[start]
    columns = [heading.index(title) for title in ('ONNX op', 'glnet', 'output shape')]
    rows = lines[start + 1:lines.index('', start)]
    for row in rows:
        assert all(row[c - 2:c] == '  ' and row[c] != ' ' for c in columns), (heading, row)
assert [r.split()[2] for r in lines[tables[0] + 1:tables[0] + 4]] == ['folded', 'identity', 'dense'], lines
" "$work/info-identity.txt" || fail "glnet_info --model: the table's columns or the Identity nodes"
expect 1 "resize.onnx: node '/up/Resize' \(Resize, opset 17\)" -- "$apps/glnet_info" --model "$work/resize.onnx"
expect 1 "resize.onnx: node '/up/Resize' \(Resize, opset 17\): the op Resize is not supported yet" \
  -- "$apps/glnet_run" --model "$work/resize.onnx" --input "$work/cnn-x.npy" --output "$work/o.npy"
expect 1 "conv3d.onnx: node '/conv/Conv' \(Conv, opset 17\): W must be a constant \[out_c, in_c/group, \(kh,\) kw\]: glnet runs 1-D and 2-D convolutions" \
  -- "$apps/glnet_run" --model "$work/conv3d.onnx" --input "$work/mlp-x.npy" --output "$work/o.npy"
expect 1 "computed-axes.onnx: node '/Unsqueeze' \(Unsqueeze, opset 17\): input 1 must be a constant" \
  -- "$apps/glnet_run" --model "$work/computed-axes.onnx" --input "$work/mlp-x.npy" --output "$work/o.npy"
expect 1 "garbage.onnx: not an ONNX model" -- "$apps/glnet_run" --model "$work/garbage.onnx" --input "$work/mlp-x.npy" --output "$work/o.npy"
# What a command printed before failing comes before its error line, also into a file (stdout fully buffered there).
"$apps/glnet_run" --model "$work/garbage.onnx" --input "$work/mlp-x.npy" --output "$work/o.npy" >"$work/order.txt" 2>&1
grep -q "^device [0-9]*: .*" "$work/order.txt" && tail -1 "$work/order.txt" | grep -q "^glnet_run: error: " ||
  fail "the device line after the error line: $(cat "$work/order.txt")"
expect 1 "error: /dev/zero: not a regular file" -- "$apps/glnet_run" --model /dev/zero --input "$work/mlp-x.npy" --output "$work/o.npy"
expect 1 "wrong-x.npy: got \[2, 30\]; expected \[N, 29\] for input x$" -- "$apps/glnet_run" --model "$work/mlp.onnx" --input "$work/wrong-x.npy" --output "$work/o.npy"
expect 1 "unbatched-x.npy: got \[1, 13, 13\]; expected \[N, 1, 13, 13\] for input x \(the batch axis is missing" \
  -- "$apps/glnet_run" --model "$work/cnn.onnx" --input "$work/unbatched-x.npy" --output "$work/o.npy"
expect 0 "ran .*mlp.onnx .* on 3 rows" -- "$apps/glnet_run" --model "$work/mlp.onnx" --input "$work/half-x.npy" --output "$work/half-out.npy"
compare half
expect 1 "int-x.npy: input x takes float32; this file holds int64" -- "$apps/glnet_run" --model "$work/mlp.onnx" --input "$work/int-x.npy" --output "$work/o.npy"
expect 0 "wrote" -- "$apps/glnet_run" --model "$work/conv_relu_bn.onnx" --input "$work/conv_relu_bn-x.npy" --output "$work/conv_relu_bn-out.npy"
compare conv_relu_bn
expect 0 "attention \(fused" -- "$apps/glnet_info" --model "$work/attention.onnx"
expect 0 "wrote" -- "$apps/glnet_run" --model "$work/attention.onnx" --input "$work/attention-q.npy" --input "$work/attention-k.npy" \
  --input "$work/attention-v.npy" --output "$work/attention-out.npy"
compare attention
# int64 and bool inputs, each symbolic dimension (batch, sequence) taking the files' lengths: one file, two shapes.
for shape in 2x7 1x12; do
  expect 0 "wrote" -- "$apps/glnet_run" --model "$work/tokens.onnx" --input "$work/tokens$shape-ids.npy" --input "mask=$work/tokens$shape-mask.npy" \
    --output "$work/tokens$shape-out.npy"
  compare "tokens$shape"
done
expect 1 "tokens.onnx: input mask's dimension 1 \(sequence\) is 9, but another input's sequence is 7" \
  -- "$apps/glnet_run" --model "$work/tokens.onnx" --input "$work/tokens2x7-ids.npy" --input "$work/tokens-long-mask.npy" --output "$work/o.npy"
expect 1 "tokens-huge-ids.npy: the int64 value at element 0 is beyond ±16777216 \(glnet holds integers as float32" \
  -- "$apps/glnet_run" --model "$work/tokens.onnx" --input "$work/tokens-huge-ids.npy" --input "$work/tokens2x7-mask.npy" --output "$work/o.npy"
expect 1 "tokens-float-ids.npy: input ids takes int64 \(token ids, indices\); this file holds float32" \
  -- "$apps/glnet_run" --model "$work/tokens.onnx" --input "$work/tokens-float-ids.npy" --input "$work/tokens2x7-mask.npy" --output "$work/o.npy"
expect 1 "tokens2x7-ids.npy: input mask takes bool; this file holds int64 values other than 0 and 1" \
  -- "$apps/glnet_run" --model "$work/tokens.onnx" --input "$work/tokens2x7-ids.npy" --input "mask=$work/tokens2x7-ids.npy" --output "$work/o.npy"
expect 2 "error: the model's input is named x, not images" -- "$apps/glnet_run" --model "$work/mlp.onnx" --input "images=$work/mlp-x.npy" --output "$work/o.npy"
expect 2 "error: --input: empty input name before '='" -- "$apps/glnet_run" --model "$work/mlp.onnx" --input "=$work/mlp-x.npy" --output "$work/o.npy"
expect 2 "error: --output: empty output name before '='" -- "$apps/glnet_run" --model "$work/mlp.onnx" --input "$work/mlp-x.npy" --output "=$work/o.npy"
expect 1 "mlp-x.npy: input x is uint8 \(the model converts its pixels itself\); this file holds float32" -- "$apps/glnet_run" --model "$work/bytes.onnx" --input "$work/mlp-x.npy" --output "$work/o.npy"
expect 1 "bytes-x.npy: input x takes float32; this file holds uint8" -- "$apps/glnet_run" --model "$work/mlp.onnx" --input "$work/bytes-x.npy" --output "$work/o.npy"
expect 2 "error: --output is required" -- "$apps/glnet_run" --model "$work/mlp.onnx" --input "$work/mlp-x.npy"
expect 1 "empty.onnx: the file is empty" -- "$apps/glnet_info" --model "$work/empty.onnx"
# Hostile files: the same one-line refusal from every command that loads ONNX (the checks live in the engine's reader).
hostile() {  # NAME INPUT REGEX
  expect 1 "hostile-$1.onnx: $3" -- "$apps/glnet_info" --model "$work/hostile-$1.onnx"
  expect 1 "hostile-$1.onnx: $3" -- "$apps/glnet_run" --model "$work/hostile-$1.onnx" --input "$work/$2" --output "$work/o.npy"
}
hostile scalar-input scalar.npy "the first input x is a scalar \(shape \[\]\); its first dimension must be the batch"
hostile empty-conv x4x5x5.npy "node '/conv' \(Conv, opset 17\): W \[0, 4, 3, 3\] is empty"
hostile cycle x4.npy "node '/r1' \(Relu, opset 17\): input 'b' is made by this node or a later one; ONNX nodes come in topological order, without cycles"
hostile two-producers x4.npy "node '/s1' \(Sigmoid, opset 17\): its output 'y' is already defined \(by another node\)"
hostile two-initializers x4.npy "two initializers are named 'b'"
hostile two-inputs x4.npy "two graph inputs are named 'x'"
hostile float-strides x1.npy "node '/conv' \(Conv, opset 17\): attribute strides must be a list of integers, not a list of floats"
hostile string-strides x1.npy "node '/conv' \(Conv, opset 17\): attribute strides must be a list of integers, not a string"
hostile kernel-shape x1.npy "node '/conv' \(Conv, opset 17\): kernel_shape \[5, 5\] differs from the weight \[1, 1, 3, 3\]"
hostile split x5.npy "node '/split' \(Split, opset 17\): split sizes \[2, 2\] sum to 4, not axis 1's 5"
hostile concat x4.npy "node '/concat' \(Concat, opset 17\): the required attribute axis is missing"
hostile unsqueeze x4.npy "node '/unsqueeze' \(Unsqueeze, opset 17\): axis 1 is listed twice"
hostile slice x4.npy "node '/slice' \(Slice, opset 17\): axis 1 is listed twice"
hostile reduce x4.npy "node '/reduce' \(ReduceSum, opset 17\): axis 1 is listed twice"
hostile no-outputs x4.npy "the model has no output"
hostile batchnorm x2.npy "node '/bn' \(BatchNormalization, opset 17\): var \+ epsilon is not positive for channel 0"
hostile nan-weight x4.npy "tensor /fc.weight holds NaN values"
hostile inf-weight x4.npy "tensor /fc.weight holds infinite values"
expect 0 "wrote .*mask-y.npy" -- "$apps/glnet_run" --model "$work/hostile-mask.onnx" --input "$work/x4.npy" --output "$work/mask-y.npy" --check
/usr/bin/python3 -c "
import numpy as np, sys
y = np.load(sys.argv[1])
assert (y[:, 1] == 0).all() and np.allclose(y[:, [0, 2, 3]], 1 / 3), y
" "$work/mask-y.npy" || fail "an attention mask's -inf does not mask"
hostile pool-pads x1.npy "node '/pool' \(MaxPool, opset 17\): max pool 2x2: pads 2 and 2 must be smaller than the kernel"
hostile gather x4.npy "node '/gather' \(Gather, opset 17\): index 4 is outside an axis of 4"
expect 0 "wrote .*gather2d-y.npy" -- "$apps/glnet_run" --model "$work/hostile-gather2d.onnx" --input "$work/ramp4.npy" --output "$work/gather2d-y.npy" --check
/usr/bin/python3 -c "
import numpy as np, sys
x, y = np.load(sys.argv[1]), np.load(sys.argv[2])
assert y.shape == (x.shape[0], 2, 2) and (y == x[:, [[3, 1], [0, 0]]]).all(), y
" "$work/ramp4.npy" "$work/gather2d-y.npy" || fail "Gather with 2-D indices does not gather"
hostile link x4.npy "tensor b names external data 'link_passwd', which leads outside the model's folder"
# Fine-tuning reads through the same checks: a cycle would lose its nodes, a negative variance would train and export.
for name in cycle two-producers batchnorm no-outputs; do
  expect 1 "hostile-$name.onnx: " -- "$apps/glnet_train" --net "$work/hostile-$name.onnx" --out "$work/tuned.safetensors"
done
expect 1 "hostile-batchnorm.onnx: node '/bn' \(BatchNormalization\): var \+ epsilon is not positive for channel 0" \
  -- "$apps/glnet_train" --net "$work/hostile-batchnorm.onnx" --out "$work/tuned.safetensors"
expect 1 "hostile-cycle.onnx: node '/r1' \(Relu, opset 17\): input 'b' is made by this node or a later one" \
  -- "$apps/glnet_train" --net "$work/hostile-cycle.onnx" --out "$work/tuned.safetensors"
# NaN in gives NaN out, with a warning naming the input; a float64 input float32 cannot hold is named as such.
expect 0 "warning: .*add.onnx: input x holds NaN or infinite values \(the first at element 1\); output y holds NaN or infinite values too" \
  -- "$apps/glnet_run" --model "$work/hostile-add.onnx" --input "$work/nan-x.npy" --output "$work/nan-y.npy"
/usr/bin/python3 -c "
import numpy as np, sys
y = np.load(sys.argv[1])
assert np.isnan(y[0, 1]) and (np.delete(y.ravel(), 1) == 2).all(), y
" "$work/nan-y.npy" || fail "NaN in gives NaN out"
expect 1 "huge-x.npy: the float64 value 1e\+300 at element 1 is beyond float32's range" \
  -- "$apps/glnet_run" --model "$work/hostile-add.onnx" --input "$work/huge-x.npy" --output "$work/o.npy"
# glnet_bench on an ONNX model: the split per batch size, every node's GPU time, the JSON with both batches.
expect 0 "GPU time .* ms in .* dispatches \(.* barriers\) of .* nodes" -- "$apps/glnet_bench" --model "$work/cnn.onnx" --batches 1,3 --runs 2 --warmup 1 --json-out "$work/bench.json"
/usr/bin/python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))
assert [b['batch'] for b in r['batches']] == [1, 3], r['batches']
for b in r['batches']:
    nodes = {n['node']: n for n in b['profile']['nodes']}
    assert {'/conv1/Conv', '/conv2/Conv', '/fc1/Gemm', '/fc2/Gemm'} <= set(nodes), sorted(nodes)
    assert b['end_to_end_ms']['median'] > 0 and b['profile']['dispatches'] >= len(nodes), b
    assert 1 <= b['profile']['barriers'] <= b['profile']['dispatches'] + 1, b
" "$work/bench.json" || fail "glnet_bench --model cnn.onnx: JSON report"
rm -f "$work/cnn.weights"
expect 1 "cnn.weights: no such file" -- "$apps/glnet_run" --model "$work/cnn.onnx" --input "$work/cnn-x.npy" --output "$work/o.npy"
[ -e "$work/o.npy" ] && fail "a refused run wrote its output"
finish onnx
