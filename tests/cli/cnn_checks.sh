#!/bin/sh
# cnn_checks.sh APPS_DIR MNIST_DIR: the MNIST CNN end to end on llvmpipe-sized work: a short training run
# passes an accuracy floor, and the model file it writes loads in glnet_eval and glnet_predict.
set -u
apps=$1 mnist=$2
here=$(dirname "$0")
. "$here/common.sh"

"$apps/glnet_train" --arch cnn --data "$mnist" --train-limit 600 --test-limit 300 --batch 30 --epochs 1 \
  --optimizer momentum --lr 0.05 --out "$work/cnn.safetensors" --json >"$work/train.json" || fail "training the CNN"
accuracy=$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['epochs'][-1]['test_accuracy'])" "$work/train.json")
echo "CNN, 20 steps of 30 images: test accuracy $accuracy on 300 images"
/usr/bin/python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) >= 0.6 else 1)" "$accuracy" || fail "accuracy $accuracy below the 0.6 floor"
"$apps/glnet_eval" --model "$work/cnn.safetensors" --data "$mnist" --limit 300 --batch 128 --json >"$work/eval.json" || fail "glnet_eval on a CNN"
[ "$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['accuracy'])" "$work/eval.json")" = "$accuracy" ] \
  || fail "glnet_eval disagrees with the accuracy training reported"
"$apps/glnet_predict" --model "$work/cnn.safetensors" --data "$mnist" --mnist-index 0,1 >"$work/predict.txt" || fail "glnet_predict on a CNN"
grep -q "mnist-test\[1\]: [0-9]" "$work/predict.txt" || fail "glnet_predict printed no class"
finish CNN
