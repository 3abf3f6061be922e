#!/usr/bin/env python3
"""The NumPy/ModernGL MNIST notebook of the reference write-ups, in a dozen lines of glnet: train an MLP on
MNIST on the GPU, evaluate it on the 10 000 test images, and time one image's prediction on the GPU (upload,
run, readback) against the same forward pass in NumPy on the CPU. The notebook measured 153 us on the GPU
against 26.4 us on the CPU, because its GPU path waited on every readback.

    python3 examples/mnist_notebook.py [--data data/mnist] [--arch 784-128-10] [--epochs 3]
(from the repository: PYTHONPATH=build/python after scripts/build, or after pip install; scripts/fetch-mnist
fetches the data)."""
import argparse, time
import numpy as np
import glnet

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--data", default="data/mnist"), parser.add_argument("--arch", default="784-128-10")
parser.add_argument("--epochs", type=int, default=3), parser.add_argument("--out", default="mnist-mlp.safetensors")
args = parser.parse_args()

print("device:", next(d["renderer"] for d in glnet.devices() if d["chosen"]))
glnet.train(args.arch, args.data, args.epochs, out=args.out)  # prints its progress and each epoch, as glnet_train does
model = glnet.load(args.out)
images, labels = glnet.read_mnist(args.data, "test")
print(f"test accuracy of {args.out} on the GPU: {100 * (model.predict(images).classes == labels).mean():.2f}%")

w = model.weights()  # the same forward pass in NumPy: (x/255 - mean)/std, dense layers with ReLU between
layers = [(w[f"fc{k}.weight"], w[f"fc{k}.bias"]) for k in range(1, len(w) // 2 + 1)]
def cpu_predict(image):
    x = (image.reshape(-1) / np.float32(255) - model.input_mean) / model.input_std
    for k, (weight, bias) in enumerate(layers):
        x = weight @ x + bias
        x = np.maximum(x, 0) if k < len(layers) - 1 else x
    return int(np.argmax(x))

def median_us(predict, runs=1000):
    times = []
    for i in range(runs):
        start = time.perf_counter()
        predict(images[i % len(images)])
        times.append(time.perf_counter() - start)
    return 1e6 * float(np.median(times))

assert all(cpu_predict(images[i]) == model.predict(images[i]).classes[0] for i in range(100))
gpu, cpu = median_us(lambda image: model.predict(image)), median_us(cpu_predict)
print(f"one image, median of 1000: GPU {gpu:.1f} us (upload + run + readback, from Python), CPU (NumPy) {cpu:.1f} us")
