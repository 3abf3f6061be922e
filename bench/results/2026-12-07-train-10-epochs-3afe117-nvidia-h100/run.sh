# On the GPU machine (H100, 2026-12-07), binaries of 3afe117 (bench/tests-gpu bundle), Fashion-MNIST from Debian's
# dataset-fashion-mnist package (its four .gz files in .gpx/fashion), carried with .gl:
mkdir -p /tmp/b && tar xJf .gpx/build.tar.xz -C /tmp/b && cp .gpx/lib.tar.xz /tmp/b/ && bench/gpu-apps /tmp/b /tmp/apps
TUNE=1 bench/train-gpu /tmp/apps /tmp/tr /tmp/mn .gpx/fashion 10 examples/nets/resnet14-wide.json:fashion
