#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz harnesses into tests/fuzz/corpus/ (committed; rerun to regenerate).

Each seed is a small valid input, or one with a single known defect, so that libFuzzer starts from the
formats' structure: safetensors with each dtype and with metadata, IDX images and labels plain and gzip,
images in each format stb decodes, --arch strings, glnet_serve request bodies, tokenizer.json files and texts to
encode.
Usage: tests/fuzz/make_corpus.py [CORPUS_DIR]
"""
import gzip, json, math, os, struct, subprocess, sys, tempfile, zlib

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(harness, name, data):
    os.makedirs(os.path.join(root, harness), exist_ok=True)
    with open(os.path.join(root, harness, name), "wb") as f:
        f.write(data)


def safetensors(tensors, metadata=None):
    header, blobs, offset = {}, [], 0
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def floats(count, fmt="f", size=4):
    if fmt == "bf16":  # bfloat16: float32's upper two bytes (truncated; any bit pattern is a valid seed)
        return b"".join(struct.pack("<f", (i % 7 - 3) / 10)[2:] for i in range(count))
    return b"".join(struct.pack("<" + fmt, (i % 7 - 3) / 10) for i in range(count)) if fmt != "e" else \
        b"".join(struct.pack("<e", (i % 7 - 3) / 10) for i in range(count))


def mlp(inputs, hidden, classes, dtype="F32", fmt="f", metadata=None):
    return safetensors({"fc1.weight": (dtype, [hidden, inputs], floats(hidden * inputs, fmt)),
                        "fc1.bias": (dtype, [hidden], floats(hidden, fmt)),
                        "fc2.weight": (dtype, [classes, hidden], floats(classes * hidden, fmt)),
                        "fc2.bias": (dtype, [classes], floats(classes, fmt))}, metadata)


put("Safetensors", "mlp-f32", mlp(784, 2, 10, metadata={"architecture": "784-2-10", "activation": "tanh",
                                                        "input_mean": "0.1307", "input_std": "0.3081"}))
put("Safetensors", "mlp-f16", mlp(16, 3, 4, "F16", "e"))
put("Safetensors", "mlp-f64", mlp(16, 3, 4, "F64", "d"))
put("Safetensors", "mlp-bf16", mlp(16, 3, 4, "BF16", "bf16"))
put("Safetensors", "bad-metadata", mlp(16, 3, 4, metadata={"input_std": "-1", "activation": "swish"}))
put("Safetensors", "truncated", mlp(16, 3, 4)[:-9])
put("Safetensors", "huge-header-length", struct.pack("<Q", 1 << 40) + b"{}")
put("Safetensors", "cnn-shapes", safetensors({"conv1.weight": ("F32", [2, 1, 5, 5], floats(50)),
                                               "conv1.bias": ("F32", [2], floats(2)),
                                               "fc1.weight": ("F32", [10, 288], floats(2880)),
                                               "fc1.bias": ("F32", [10], floats(10))}))

images = bytes((i * 37) % 256 for i in range(3 * 28 * 28))
idx_images = struct.pack(">IIII", 0x803, 3, 28, 28) + images
idx_labels = struct.pack(">II", 0x801, 3) + bytes([7, 2, 1])
put("Idx", "images", b"\x00" + idx_images)
put("Idx", "images-gz", b"\x00" + gzip.compress(idx_images, mtime=0))
put("Idx", "labels", b"\x01" + idx_labels)
put("Idx", "labels-gz", b"\x01" + gzip.compress(idx_labels, mtime=0))
put("Idx", "images-truncated", b"\x00" + idx_images[:-5])
put("Idx", "labels-huge-count", b"\x01" + struct.pack(">II", 0x801, 0xFFFFFFFF))

digit = [[255 if 8 <= x <= 19 and 4 <= y <= 23 and (x in (8, 19) or y in (4, 23)) else 0 for x in range(28)] for y in range(28)]


def png(rows, color=False):
    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)
    h, w = len(rows), len(rows[0])
    raw = b"".join(b"\x00" + bytes(v for p in row for v in ((p, 255 - p, p) if color else (p,))) for row in rows)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2 if color else 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def bmp(rows):
    h, w = len(rows), len(rows[0])
    stride = (w * 3 + 3) // 4 * 4
    pixels = b"".join(bytes(v for p in row for v in (p, p, p)) + b"\x00" * (stride - w * 3) for row in reversed(rows))
    return (b"BM" + struct.pack("<IHHI", 54 + len(pixels), 0, 0, 54)
            + struct.pack("<IiiHHIIiiII", 40, w, h, 1, 24, 0, len(pixels), 2835, 2835, 0, 0) + pixels)


def pgm(rows):
    return b"P5\n%d %d\n255\n" % (len(rows[0]), len(rows)) + bytes(p for row in rows for p in row)


light = [[255 - p for p in row] for row in digit]


def seven(size=64, width=5.0):
    """A thick "7" in dark ink on light paper, as a phone photo or a drawing program gives it: a top bar and a stroke
    down to the lower left, anti-aliased by distance to the two segments."""
    def distance(px, py, ax, ay, bx, by):
        t = max(0.0, min(1.0, ((px - ax) * (bx - ax) + (py - ay) * (by - ay)) / ((bx - ax) ** 2 + (by - ay) ** 2)))
        return math.hypot(px - ax - t * (bx - ax), py - ay - t * (by - ay))
    rows = []
    for y in range(size):
        row = []
        for x in range(size):
            d = min(distance(x + 0.5, y + 0.5, 0.25 * size, 0.2 * size, 0.75 * size, 0.2 * size),
                    distance(x + 0.5, y + 0.5, 0.75 * size, 0.2 * size, 0.42 * size, 0.82 * size))
            ink = max(0.0, min(1.0, width / 2 + 0.5 - d))
            row.append(round(250 - 230 * ink))
        rows.append(row)
    return rows
put("Image", "digit.png", png(digit))
put("Image", "light-color.png", png([row + row for row in light], color=True))
put("Image", "digit.bmp", bmp(digit))
put("Image", "digit.pgm", pgm(digit))
put("Image", "tiny.pgm", pgm([[0, 255], [255, 0]]))
put("Image", "seven.png", png(seven()))
# JPEG through stb_image_write (Debian libstb-dev): Python has no encoder of its own.
with tempfile.TemporaryDirectory() as work:
    source, program, out = (os.path.join(work, n) for n in ("jpeg.c", "jpeg", "digit.jpg"))
    with open(source, "w") as f:
        f.write('#include <stb/stb_image_write.h>\nint main(int c, char** v) { unsigned char p[28 * 28];\n'
                'for (int i = 0; i < 28 * 28; ++i) p[i] = (unsigned char)((i % 28 > 8 && i % 28 < 19) * 255);\n'
                'return !stbi_write_jpg(v[1], 28, 28, 1, p, 90); }\n')
    subprocess.run(["cc", source, "-o", program, "-l:libstb.a", "-lm"], check=True)
    subprocess.run([program, out], check=True)
    put("Image", "digit.jpg", open(out, "rb").read())

for name, text in (("mlp", "784-128-10"), ("cnn", "cnn"), ("deep", "784-256-100-10"), ("tiny", "1-1"),
                   ("empty-layer", "784--10"), ("huge", "784-65536-65536-10")):
    put("Architecture", name, text.encode())

nets = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "nets")
for name in ("lenet5", "resnet8"):
    put("NetDescription", name, open(os.path.join(nets, name + ".json"), "rb").read())
small = {"input": [2, 6, 6], "layers": [
    {"name": "c", "kind": "conv", "outputs": 3, "kernel": 3, "stride": 2},
    {"name": "b", "kind": "batchnorm", "momentum": 0.5, "epsilon": 0.001},
    {"name": "s", "kind": "conv", "outputs": 3, "kernel": 1, "stride": 2, "inputs": ["input"]},
    {"name": "a", "kind": "add", "inputs": ["b", "s"]},
    {"name": "p", "kind": "avgpool", "kernel": 2, "padding": 1},
    {"name": "g", "kind": "globalavgpool", "inputs": ["a"]},
    {"name": "f", "kind": "dense", "outputs": 4, "activation": "tanh"}]}
put("NetDescription", "small", json.dumps(small).encode())
put("NetDescription", "shape-mismatch", json.dumps({"input": [1, 4, 4], "layers": [
    {"name": "c", "kind": "conv", "outputs": 2, "kernel": 3}, {"name": "a", "kind": "add", "inputs": ["c", "input"]}]}).encode())
put("NetDescription", "unknown-input", b'{"input": [3], "layers": [{"name": "x", "kind": "dense", "outputs": 2, "inputs": ["y"]}]}')
put("NetDescription", "deep", b'{"input": [1], "layers": ' + b"[" * 40 + b"]" * 40 + b"}")
put("NetDescription", "trailing-nul", json.dumps(small).encode() + b"\0garbage")
put("NetDescription", "huge-kernel", b'{"input": [1, 28, 28], "layers": [{"name": "c", "kind": "conv", "outputs": 4, "kernel": 1000}, '
    b'{"name": "fc", "kind": "dense", "outputs": 10}]}')

pixels = json.dumps({"pixels": [(i * 7) % 256 for i in range(784)]}).encode()
put("PredictRequest", "json-pixels", b"\x00" + pixels)
put("PredictRequest", "json-images", b"\x00" + json.dumps({"images": [[0] * 784, [255] * 784]}).encode())
put("PredictRequest", "json-nan", b"\x00" + b'{"pixels": [NaN, 1e999, -1]}')
put("PredictRequest", "png", b"\x01" + png(digit))
put("PredictRequest", "untyped-png", b"\x04" + png(light))
put("PredictRequest", "json-inverted", b"\x05" + json.dumps({"pixels": [255] * 784, "invert": True}).encode())
put("PredictRequest", "json-deep", b"\x00" + b'{"pixels":' + b"[" * 40 + b"]" * 40 + b"}")
put("PredictRequest", "multipart", b"\x06" + b"file\ndigit.png\nimage/png\n" + png(digit) + b"\n--\n" +
    b"json\n\napplication/json\n" + pixels + b"\n--\nnote\n\n\nhello")


def checkpoint(optimizer, states, extra_metadata=None):
    shapes = {"fc1.weight": [3, 4], "fc1.bias": [3], "fc2.weight": [2, 3], "fc2.bias": [2]}
    tensors = {name: ("F32", shape, floats(math.prod(shape))) for name, shape in shapes.items()}
    for state in states:
        for name, shape in shapes.items():
            tensors[f"optimizer.{state}.{name}"] = ("F32", shape, floats(math.prod(shape)))
    metadata = {"format": "glnet-checkpoint", "architecture": "4-3-2", "activation": "relu", "input_mean": "0.1",
                "input_std": "0.3", "optimizer": optimizer, "epochs_done": "1", "steps_done": "7", "setting.arch": "4-3-2",
                "setting.lr": "0.1", "setting.batch": "8", "setting.optimizer": optimizer}
    metadata.update(extra_metadata or {})
    return safetensors(tensors, metadata)


put("Checkpoint", "momentum", checkpoint("momentum", ["velocity"]))
put("Checkpoint", "adam", checkpoint("adam", ["m", "v"]))
put("Checkpoint", "sgd", checkpoint("sgd", []))
put("Checkpoint", "bad-count", checkpoint("sgd", [], {"steps_done": "-1"}))

# ONNX models through python3-onnx: an MLP of Gemm nodes, a small CNN, and a MatMul behind a Reshape.
import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import helper, numpy_helper, TensorProto  # noqa: E402


def onnx_model(nodes, input_shape, output_shape, initializers, opset=17):
    graph = helper.make_graph(nodes, "seed", [helper.make_tensor_value_info("x", TensorProto.FLOAT, input_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, output_shape)],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in initializers.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString()


ramp = lambda *shape: (np.arange(np.prod(shape)) % 7 - 3).reshape(shape).astype(np.float32) / 10
put("Onnx", "mlp", onnx_model([helper.make_node("Gemm", ["x", "w", "b"], ["h"], name="fc1", transB=1),
                               helper.make_node("Relu", ["h"], ["y"], name="relu")], ["N", 6], ["N", 4],
                              {"w": ramp(4, 6), "b": ramp(4)}))
put("Onnx", "cnn", onnx_model([helper.make_node("Conv", ["x", "c"], ["a"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
                               helper.make_node("MaxPool", ["a"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
                               helper.make_node("Flatten", ["p"], ["y"], name="flatten")], [1, 1, 4, 4], [1, 8],
                              {"c": ramp(2, 1, 3, 3)}))
put("Onnx", "matmul", onnx_model([helper.make_node("Reshape", ["x", "s"], ["f"], name="reshape"),
                                  helper.make_node("MatMul", ["f", "m"], ["q"], name="matmul"),
                                  helper.make_node("Add", ["q", "b"], ["y"], name="add")], ["N", 2, 3], ["N", 2],
                                 {"s": np.array([0, -1], np.int64), "m": ramp(6, 2), "b": ramp(2)}, opset=11))
put("Onnx", "trainable", onnx_model([
    helper.make_node("Conv", ["x", "cw"], ["a"], name="/conv/Conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
    helper.make_node("BatchNormalization", ["a", "g", "bb", "m", "v"], ["n"], name="/bn/BatchNormalization", momentum=0.9),
    helper.make_node("Relu", ["n"], ["r"], name="/Relu"),
    helper.make_node("Concat", ["r", "x"], ["c"], name="/Concat", axis=1),
    helper.make_node("MaxPool", ["c"], ["p"], name="/pool/MaxPool", kernel_shape=[2, 2], strides=[2, 2]),
    helper.make_node("Flatten", ["p"], ["f"], name="/Flatten", axis=1),
    helper.make_node("Dropout", ["f", "ratio"], ["d"], name="/drop/Dropout"),
    helper.make_node("Gemm", ["d", "fw", "fb"], ["y"], name="/fc/Gemm", transB=1)], ["N", 1, 4, 4], ["N", 3],
    {"cw": ramp(2, 1, 3, 3), "g": ramp(2), "bb": ramp(2), "m": ramp(2), "v": np.ones(2, np.float32), "ratio": np.float32(0.25),
     "fw": ramp(3, 12), "fb": ramp(3)}))
put("Onnx", "softmax", onnx_model([helper.make_node("Softmax", ["x"], ["y"], name="softmax")], ["N", 3], ["N", 3], {}))
# Indexing: Gather at constant indices (a GPU gather), a slice of a constant folded, Einsum as a batched product, Trilu.
put("Onnx", "indexing", onnx_model([
    helper.make_node("Gather", ["x", "i"], ["g"], name="gather", axis=1),
    helper.make_node("Slice", ["c", "starts", "ends", "axes"], ["s"], name="slice"),
    helper.make_node("Add", ["g", "s"], ["a"], name="add"),
    helper.make_node("Einsum", ["a", "a"], ["e"], name="einsum", equation="nij, njk -> nik"),
    helper.make_node("Trilu", ["e"], ["y"], name="trilu", upper=0)], ["N", 3], ["N", 2, 2],
    {"i": np.array([[2, 0], [1, -1]], np.int64), "c": ramp(1, 2, 4), "starts": np.array([1], np.int64),
     "ends": np.array([3], np.int64), "axes": np.array([-1], np.int64)}))
# Graphs ONNX's rules refuse, each with one defect, so that mutations start at the reader's graph checks: a cycle, a
# value made twice, an attribute of the wrong type.
put("Onnx", "cycle", onnx_model([helper.make_node("Relu", ["b"], ["a"], name="r1"), helper.make_node("Relu", ["a"], ["b"], name="r2"),
                                 helper.make_node("Add", ["x", "a"], ["y"], name="add")], ["N", 3], ["N", 3], {}))
put("Onnx", "made-twice", onnx_model([helper.make_node("Relu", ["x"], ["y"], name="relu"), helper.make_node("Sigmoid", ["x"], ["y"], name="sigmoid")],
                                     ["N", 3], ["N", 3], {}))
put("Onnx", "attribute-type", onnx_model([helper.make_node("Conv", ["x", "c"], ["y"], name="conv", strides=[1.5, 1.5])], [1, 1, 4, 4], [1, 2, 2, 2],
                                         {"c": ramp(2, 1, 3, 3)}))


def npy(array):
    import io
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


put("Npy", "f4", npy(ramp(2, 3, 4)))
put("Npy", "f8", npy(ramp(5).astype(np.float64)))
put("Npy", "scalar", npy(np.float32(1.5)))
put("Npy", "fortran", npy(np.asfortranarray(ramp(3, 2))))
put("Npy", "int", npy(np.arange(4)))


def npy_header(dict_text, data):
    """A version 1.0 .npy file whose header is dict_text as written (NumPy's padding added), for headers np.save never writes."""
    header = dict_text + " " * (63 - (10 + len(dict_text)) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin-1") + data


put("Npy", "descr-twice", npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'descr': '<f8'}", bytes(16)))
put("Npy", "shape-negative", npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 4), }", bytes(16)))
put("Npy", "shape-float", npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1.0, 4), }", bytes(16)))
put("Npy", "control-bytes", npy_header("{'descr': '<f\x00\x1b[2J', 'fortran_order': False, 'shape': (4,), }", bytes(16)))
print("corpus written to", root)

# Tokenizers: the tokenizer.json files of tests/data/tokenizer (tests/reference/make_tokenizer.py) and variants that
# each change or break one rule; for encoding, texts of every kind (scripts, emoji, whitespace runs, special tokens, bad UTF-8).
tokenizer_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "tokenizer")
for name in ("tokenizer.json", "llama3-tokenizer.json"):
    with open(os.path.join(tokenizer_dir, name), "rb") as f:
        put("Tokenizer", name.replace(".json", ""), f.read())
with open(os.path.join(tokenizer_dir, "llama3-tokenizer.json"), encoding="utf-8") as f:
    llama = json.load(f)


def variant(name, edit):
    changed = json.loads(json.dumps(llama))
    edit(changed)
    put("Tokenizer", name, json.dumps(changed, ensure_ascii=False).encode())


variant("nfc", lambda t: t.update(normalizer={"type": "NFC"}))
variant("nfkc", lambda t: t.update(normalizer={"type": "NFKC"}))
variant("metaspace", lambda t: t.update(pre_tokenizer={"type": "Metaspace", "replacement": "▁"}))
variant("bad-regex", lambda t: t["pre_tokenizer"]["pretokenizers"][0]["pattern"].update(Regex="(?<=a+)b|[\\p{Nope}]"))
variant("string-split", lambda t: t["pre_tokenizer"]["pretokenizers"][0].update(pattern={"String": " "}))
variant("merge-unknown", lambda t: t["model"]["merges"].append(["Ġ", "nosuch"]))
variant("merge-strings", lambda t: t["model"].update(merges=[" ".join(m) for m in t["model"]["merges"]]))
variant("template-missing", lambda t: t["post_processor"]["processors"][1].update(special_tokens={}))
variant("huge-id", lambda t: t["added_tokens"][0].update(id=4294967295))
put("TokenizerEncode", "english", b"The quick brown fox, it's 2024; I'M HERE.\n")
put("TokenizerEncode", "scripts", "中文 日本語 한국어 Ελληνικά русский e\u0301 😀👍🏽 👨‍👩‍👧 🇫🇷".encode())
put("TokenizerEncode", "whitespace", b"  \t\t\n\n \r\n   x    \n" + b" " * 300)
put("TokenizerEncode", "specials", b"a<|endoftext|>b<|user|>[[note]]<|begin_of_text|><|eot_id|><|end")
put("TokenizerEncode", "bad-utf8", b"ok \xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80 \xe4\xb8")
put("TokenizerEncode", "digits", b"1234567890 3.14159 1,000,000 \xd9\xa3\xd9\xa4")
# glnet_serve's /v1/completions bodies: every field OpenAI's clients send, nulls, a stream, and bodies with one defect.
put("CompletionRequest", "full", json.dumps({"model": "m", "prompt": "Hello, world", "max_tokens": 16, "temperature": 0.7, "top_p": 0.9,
                                             "top_k": 40, "stop": ["\n", "###"], "seed": -3, "stream": True,
                                             "stream_options": {"include_usage": True}, "n": 1, "echo": False, "logprobs": None,
                                             "user": "u"}).encode())
put("CompletionRequest", "nulls", b'{"prompt": ["text \u00e9\ud83d\ude00"], "max_tokens": null, "temperature": null, "stop": null, "seed": 18446744073709551615}')
put("CompletionRequest", "wrong-types", b'{"prompt": "a", "max_tokens": 1.5, "stop": [1], "stream": "yes"}')
put("CompletionRequest", "unsupported", b'{"prompt": "a", "n": 2, "logit_bias": {"1": -100}, "temperature": 1e-40}')
put("CompletionRequest", "deep", b'{"prompt": ' + b"[" * 40 + b'"a"' + b"]" * 40 + b"}")
