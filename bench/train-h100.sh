#!/usr/bin/env bash
# Training figures on one GPU, glnet and PyTorch side by side in one run (issue: training), and the
# reference write-ups' results reproduced. Usage: bench/train-h100.sh APPS_DIR DATA_DIR OUT_DIR
set -euo pipefail
apps=$1 data=$2 out=$3
mkdir -p "$out"
train() { "$apps/glnet_train" --data "$data" "$@"; }

echo "== 784-128-10, SGD lr 0.1, batch 64, 5 epochs (target >= 97.5 %, <= 60 ms per epoch)"
train --arch 784-128-10 --epochs 5 --batch 64 --lr 0.1 --out "$out/mlp.safetensors" --json >"$out/mlp.json"
python3 -c "import json,sys; [print(f\"epoch {e['epoch']}: {e['seconds']*1000:.1f} ms, test {100*e['test_accuracy']:.2f} %\") for e in json.load(open(sys.argv[1]))['epochs']]" "$out/mlp.json"
"$apps/glnet_eval" --model "$out/mlp.safetensors" --data "$data" --predictions "$out/mlp.predictions" | grep accuracy
echo "== the trained file in PyTorch"
python3 bench/torch_peer.py check-model "$out/mlp.safetensors" --data "$data" --predictions "$out/mlp.predictions"
echo "== PyTorch peer: one epoch, same model and batch"
python3 bench/torch_peer.py train --data "$data" --runs 30

echo "== reference notebook: 784-10-10 full batch, first 10000 images, alpha 0.1, 1000 iterations, x/255"
train --arch 784-10-10 --full-batch --train-limit 10000 --epochs 1000 --lr 0.1 --no-standardize --out "$out/notebook.safetensors" | tail -2
echo "== Tinyflow: softmax regression 784-10, 10 epochs"
train --arch 784-10 --epochs 10 --batch 64 --lr 0.1 --out "$out/softmax.safetensors" | tail -2
echo "== Tinyflow: MLP 784-256-100-10, 10 epochs"
train --arch 784-256-100-10 --epochs 10 --batch 64 --lr 0.1 --out "$out/tinyflow-mlp.safetensors" | tail -2
