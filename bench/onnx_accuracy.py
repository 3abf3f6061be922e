#!/usr/bin/env python3
"""bench/onnx_accuracy.py MODEL.onnx DATA: ONNX Runtime (CPU) on an ONNX file glnet_train exported (--export-onnx), fed
the IDX test images of DATA as the file's metadata_props say ((x/255 - input_mean)/input_std), or the token ids of an ids
data set (DATA/test-ids.npy, as float32, as glnet holds them); prints one JSON line with its test accuracy, to set
beside glnet_eval's on the same file."""
import json, os, sys
import numpy as np
import onnx
import onnxruntime
from idx_files import idx


model, data = sys.argv[1], sys.argv[2]
meta = {p.key: p.value for p in onnx.load(model).metadata_props}
if os.path.exists(os.path.join(data, "test-ids.npy")):
    x = np.load(os.path.join(data, "test-ids.npy")).astype(np.float32)
    labels = np.load(os.path.join(data, "test-labels.npy"))
else:
    images = idx(data, "t10k-images-idx3-ubyte").astype(np.float32)
    labels = idx(data, "t10k-labels-idx1-ubyte")
    x = ((images / 255 - float(meta["input_mean"])) / float(meta["input_std"]))[:, None]
session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
predictions = np.concatenate([session.run(["logits"], {"images": x[i:i + 1000]})[0].argmax(1) for i in range(0, len(x), 1000)])
print(json.dumps({"onnxruntime": onnxruntime.__version__, "accuracy": float((predictions == labels).mean())}))
