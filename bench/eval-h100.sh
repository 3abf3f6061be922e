#!/usr/bin/env bash
# glnet_eval and the PyTorch peer on the same GPU, one after the other in one run (issue: inference).
# Usage: bench/eval-h100.sh MODEL.safetensors [DATA_DIR]
set -euo pipefail
model=$1 data=${2:-data/mnist}
for batch in 10000 1000; do
  build/apps/glnet_eval --model "$model" --data "$data" --batch "$batch" --repeat 20 --json
done
python3 bench/torch_peer.py eval --data "$data"
