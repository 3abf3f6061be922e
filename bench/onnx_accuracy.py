#!/usr/bin/env python3
"""bench/onnx_accuracy.py MODEL.onnx DATA: ONNX Runtime (CPU) on an ONNX file glnet_train exported (--export-onnx), fed
the IDX test images of DATA (or an image folder's, DATA/test/CLASS/*, as bench/train_peer.py reads them) as the file's
metadata_props say ((x/255 - input_mean)/input_std, per channel when they are lists), or the token ids of an ids
data set (DATA/test-ids.npy, as float32, as glnet holds them); prints one JSON line with its test accuracy, to set
beside glnet_eval's on the same file."""
import json, os, sys
import numpy as np
import onnx
import onnxruntime
from train_peer import load_images


model, data = sys.argv[1], sys.argv[2]
meta = {p.key: p.value for p in onnx.load(model).metadata_props}
if os.path.exists(os.path.join(data, "test-ids.npy")):
    x = np.load(os.path.join(data, "test-ids.npy")).astype(np.float32)
    labels = np.load(os.path.join(data, "test-labels.npy"))
else:
    _, _, images, labels = load_images(data)
    per_channel = lambda key: np.array([float(v) for v in meta[key].split(",")], np.float32).reshape(1, -1, 1, 1)
    x = (images.astype(np.float32) / 255 - per_channel("input_mean")) / per_channel("input_std")
session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
predictions = np.concatenate([session.run(["logits"], {"images": x[i:i + 1000]})[0].argmax(1) for i in range(0, len(x), 1000)])
print(json.dumps({"onnxruntime": onnxruntime.__version__, "accuracy": float((predictions == labels).mean())}))
