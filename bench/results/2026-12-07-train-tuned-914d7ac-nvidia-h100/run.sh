#!/bin/bash
# The training step's compile with programs side by side (NVIDIA's own shader cache off); the GEMM tuning of the
# training steps against the rule alone (bench/train-tune-gpu, Fashion-MNIST); then bench/train-gpu with the tuning
# (resnet14-wide on Fashion-MNIST) beside PyTorch.
set -u
start=$SECONDS
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p /tmp/a; tar xJf .gpx/build.tar.xz -C /tmp/a; cp .gpx/lib.tar.xz /tmp/a/; bench/gpu-apps /tmp/a /tmp/apps
{
for round in 1 2; do
  rm -rf /tmp/cold; t0=$SECONDS
  __GL_SHADER_DISK_CACHE=0 GLNET_CACHE_DIR=/tmp/cold /tmp/apps/glnet_train --net examples/nets/resnet14-wide.json --dataset mnist \
    --data .gpx/fashion --batch 128 --epochs 1 --train-limit 1024 --out /tmp/cold.safetensors > /tmp/cold.log 2>&1
  echo "round $round, no program cache and NVIDIA's shader disk cache off: glnet_train exit $?, $((SECONDS-t0)) s wall; $(grep -o 'compile [0-9]* ms' /tmp/cold.log)"
done
} 2>&1 | tee $OUT/cold-start.txt
timeout 330 bench/train-tune-gpu /tmp/apps /tmp/tt .gpx/fashion 2 examples/nets/resnet14-wide.json resnet8 > /tmp/tt.log 2>&1
echo "train-tune-gpu exit $? at $((SECONDS-start)) s"
cp /tmp/tt/summary.md $OUT/tune-summary.md; cp /tmp/tt/*-tune.txt $OUT/ 2>/dev/null; cp /tmp/tt/cache/gemm-tuning-*.txt $OUT/
sed -n '1,12p' $OUT/tune-summary.md; grep "==" $OUT/tune-summary.md
left=$((590 - (SECONDS - start)))
echo "train-gpu with $left s left"
timeout $left bench/train-gpu /tmp/tt/tuned /tmp/tg .gpx/fashion .gpx/fashion 2 examples/nets/resnet14-wide.json:fashion > /tmp/tg.log 2>&1
echo "train-gpu exit $? at $((SECONDS-start)) s"
cp /tmp/tg/summary.md $OUT/train-gpu-summary.md; cat $OUT/train-gpu-summary.md
tail -3 /tmp/tg.log
