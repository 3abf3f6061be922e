#!/usr/bin/env bash
# The MNIST CNN on one GPU: glnet trains it to >= 99 % and is timed beside PyTorch/cuDNN (fp32, TF32 off) in
# the same run; a PyTorch state_dict loads in glnet and a glnet model loads in PyTorch with the same
# predictions. Usage: bench/cnn-h100.sh APPS_DIR DATA_DIR OUT_DIR
set -euo pipefail
apps=$1 data=$2 out=$3
mkdir -p "$out"
echo "== glnet: cnn, 5 epochs, batch 100, SGD momentum 0.9, lr 0.02 (compile: cold, or from the program binary cache)"
"$apps/glnet_train" --data "$data" --arch cnn --epochs 5 --batch 100 --optimizer momentum --lr 0.02 --log-every 200 \
  --out "$out/cnn.safetensors" --json >"$out/cnn-train.json"
python3 -c "import json,sys; [print(f\"epoch {e['epoch']}: {e['seconds']*1000:.0f} ms, test {100*e['test_accuracy']:.2f} %\") for e in json.load(open(sys.argv[1]))['epochs']]" "$out/cnn-train.json"
echo "== glnet: 10k test images resident, one batch (fastest of 20)"
"$apps/glnet_eval" --model "$out/cnn.safetensors" --data "$data" --batch 10000 --repeat 20 --predictions "$out/cnn.predictions" --json \
  | python3 -c "import json,sys; d=json.load(sys.stdin); print('accuracy', d['accuracy'], 'times', d['times'])"
echo "== the glnet CNN in PyTorch"
python3 bench/torch_peer.py check-model "$out/cnn.safetensors" --data "$data" --predictions "$out/cnn.predictions"
echo "== a PyTorch CNN state_dict in glnet"
python3 bench/torch_peer.py export-cnn "$out/torch-cnn.safetensors" >/dev/null
"$apps/glnet_eval" --model "$out/torch-cnn.safetensors" --data "$data" --predictions "$out/torch-cnn.predictions" | grep accuracy
python3 bench/torch_peer.py check-model "$out/torch-cnn.safetensors" --data "$data" --predictions "$out/torch-cnn.predictions"
echo "== glnet: where a CNN training step's time goes (batch 64)"
"$apps/glnet_bench" --model "$out/cnn.safetensors" --batches 1,100 --runs 5 --warmup 2 --elementwise 1000 | grep -A40 "^training"
echo "== PyTorch/cuDNN peer"
python3 bench/torch_peer.py cnn --data "$data" --runs 20
