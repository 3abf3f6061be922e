#!/bin/sh
# transformer_checks.sh APPS_DIR: the transformer architectures glnet imports from Hugging Face and torchvision, as
# small modules exported by Debian's PyTorch (tests/reference/transformer_modules.py: a BERT encoder and classifier,
# a GPT-2 decoder with its tied LM head, a vision transformer; opset 17, dynamic batch and sequence), through
# glnet_run with their int64 token ids, attention masks and token types at two shapes from one file (batch 2 x
# sequence 7 with padding in the second row, batch 1 x sequence 12) and the ViT on a batch of images, against
# PyTorch's float64 outputs: max |diff| <= 1e-4 max |output|, the same argmax for classifiers. The attention mask
# is honoured: changing a padded token's id changes no real position's output, changing a real token's does. The
# BERT modules' Q, K and V projections run as one dense layer, GPT-2's are read in place from their split, and the
# attentions of GPT-2, the ViT module and torchvision's ViT, Swin and MaxViT run fused (glnet_info says so). And
# torchvision's ViT, Swin and MaxViT in small configs (tests/reference/transformer_models.py, TorchScript) likewise.
set -u
apps=$1
here=$(dirname "$0")
. "$here/common.sh"

/usr/bin/python3 "$here/../reference/transformer_modules.py" "$work" >/dev/null || { fail "exporting the transformer modules"; finish transformer; }

# input_names MODEL: the model's inputs, in its order.
input_names() {
  case $1 in
    bert|bert_cls) echo input_ids attention_mask token_type_ids ;;
    gpt2) echo input_ids attention_mask ;;
    vit|tv_*) echo pixel_values ;;
  esac
}

# run_model MODEL TAG: glnet_run on $work/MODEL.onnx with the inputs $work/MODEL-TAG-NAME.npy, each by its name,
# writing $work/MODEL-TAG-out.npy; a failure is counted and returned.
run_model() {
  inputs=
  for name in $(input_names "$1"); do inputs="$inputs --input $name=$work/$1-$2-$name.npy"; done
  "$here/expect" 0 "wrote" -- "$apps/glnet_run" --model "$work/$1.onnx" $inputs --output "$work/$1-$2-out.npy" || { failures=$((failures + 1)); return 1; }
}

# run_and_compare MODEL TAG TOP1: run_model, then max |diff| <= 1e-4 max |PyTorch's output| and with TOP1=1 the
# same argmax per row.
run_and_compare() {
  run_model "$1" "$2" || return
  /usr/bin/python3 -c "
import numpy as np, sys
got, want = np.load(sys.argv[1]), np.load(sys.argv[2])
assert got.shape == want.shape, (got.shape, want.shape)
worst = np.abs(got - want).max()
assert worst <= 1e-4 * np.abs(want).max(), (worst, np.abs(want).max())
assert sys.argv[3] == '0' or (got.argmax(-1) == want.argmax(-1)).all(), (got.argmax(-1), want.argmax(-1))
" "$work/$1-$2-out.npy" "$work/$1-$2-y.npy" "$3" 2>"$work/compare.err" || fail "$1 at $2: glnet_run differs from PyTorch: $(tail -1 "$work/compare.err")"
}

# The BERT modules' attentions read Q, K and V in place from one dense layer of the three projections joined (the
# comparisons below check its output).
for model in bert bert_cls; do
  joined=$("$apps/glnet_info" --model "$work/$model.onnx" | grep -c "Q, K and V from one dense layer")
  [ "$joined" = 2 ] || fail "$model: $joined of its 2 attentions read Q, K and V from one dense layer"
done
# glnet_info describes a model at a sequence length (--dim) as at a batch size; a name the model lacks, or the batch's,
# is refused.
"$apps/glnet_info" --model "$work/bert.onnx" --batch 2 --dim sequence=9 --json >"$work/bert-info.json" || fail "glnet_info --dim sequence=9"
/usr/bin/python3 -c "
import json, sys
info = json.load(open(sys.argv[1]))
assert info['input']['shape'] == [2, 9] and info['output']['shape'] == [2, 9, 32], (info['input'], info['output'])
" "$work/bert-info.json" 2>"$work/bert-info.err" || fail "glnet_info --dim sequence=9: $(tail -1 "$work/bert-info.err")"
expect 2 "has no symbolic dimension tokens" -- "$apps/glnet_info" --model "$work/bert.onnx" --dim tokens=9
expect 2 "the dimension batch is the batch" -- "$apps/glnet_info" --model "$work/bert.onnx" --dim batch=9
expect 2 "error: --dim takes NAME=LENGTH" -- "$apps/glnet_info" --model "$work/bert.onnx" --dim sequence=
expect 2 "error: --dim goes with --model" -- "$apps/glnet_info" --dim sequence=9
expect 2 "unnamed \\(\\?\\) cannot be set by name" -- "$apps/glnet_info" --model "$work/bert.onnx" --dim '?=9'
expect 2 "has no symbolic dimension tokens" -- "$apps/glnet_bench" --model "$work/bert.onnx" --dim tokens=9 --batches 1 --runs 1

# GPT-2's eager attention (its scale and causal Where computed after Q·Kᵀ, then the padding mask) runs fused (checked
# with the vision models' below), reading Q, K and V in place from its c_attn's split.
split=$("$apps/glnet_info" --model "$work/gpt2.onnx" | grep -c "Q, K and V read in place from their split")
[ "$split" = 2 ] || fail "gpt2: $split of its 2 attentions read Q, K and V in place from their split"

for model in bert bert_cls gpt2; do
  for shape in 2x7 1x12; do
    top1=0
    [ $model = bert_cls ] && top1=1
    run_and_compare $model $shape $top1
  done
done
run_and_compare vit 2 1
# torchvision's own vision transformers (Debian's torchvision 0.14), tiny configs of the same graphs, batch 2.
/usr/bin/python3 "$here/../reference/transformer_models.py" "$work" --exporter torchscript tv_vit_b_16 tv_swin_t tv_maxvit_t >/dev/null \
  || fail "exporting torchvision's vision transformers"
for model in tv_vit_b_16 tv_swin_t tv_maxvit_t; do
  mv "$work/$model-ts-pixel_values.npy" "$work/$model-ts-2-pixel_values.npy" && mv "$work/$model-ts-y.npy" "$work/$model-ts-2-y.npy" \
    || { fail "$model was not exported"; continue; }
  run_and_compare $model-ts 2 1
done
# nn.MultiheadAttention's [batch · heads, sequence, features] products (the ViT module, torchvision's ViT), Swin's
# attention with dropout before the product with V and MaxViT's written as Einsum run fused: every Softmax of each
# model, Swin's shifted-window block too, whose window mask is added between two Reshapes (MODEL FUSED SOFTMAXES).
while read -r model fused total; do
  "$apps/glnet_info" --model "$work/$model.onnx" >"$work/info.txt" 2>&1 || { fail "glnet_info --model $model"; continue; }
  softmaxes=$(awk '$2 == "Softmax"' "$work/info.txt" | wc -l) inside=$(awk '$2 == "Softmax"' "$work/info.txt" | grep -c "fused into the attention")
  [ "$inside" = "$fused" ] && [ "$softmaxes" = "$total" ] || fail "$model: $inside of its $softmaxes Softmax nodes run in a fused attention, not $fused of $total"
done <<EOF
vit 2 2
tv_vit_b_16-ts 2 2
tv_swin_t-ts 4 4
tv_maxvit_t-ts 4 4
gpt2 2 2
EOF

# The padding: the second row of the 2x7 inputs (padded at positions 5 and 6; gpt2, padded on the left, at 0 and 1)
# three times, as given, with a padded token's id changed and with a real token's id changed. The first row must be
# PyTorch's; the second the same as the first at every real position (all of a classifier's logits); the third not.
for model in bert bert_cls gpt2; do
  /usr/bin/python3 -c "
import numpy as np, sys
work, model = sys.argv[1], sys.argv[2]
padded, real = (1, 4) if model == 'gpt2' else (5, 2)
for name in sys.argv[3:]:
    row = np.load(f'{work}/{model}-2x7-{name}.npy')[1]
    rows = np.stack([row, row, row])
    if name == 'input_ids':
        assert np.load(f'{work}/{model}-2x7-attention_mask.npy')[1, [padded, real]].tolist() == [0, 1]
        rows[1, padded] = row[padded] % 99 + 1
        rows[2, real] = row[real] % 99 + 1
    np.save(f'{work}/{model}-pad-{name}.npy', rows)
" "$work" $model $(input_names $model) || fail "making $model's padding inputs"
  run_model $model pad || continue
  /usr/bin/python3 -c "
import numpy as np, sys
work, model = sys.argv[1], sys.argv[2]
got, want = np.load(f'{work}/{model}-pad-out.npy'), np.load(f'{work}/{model}-2x7-y.npy')[1]
assert np.abs(got[0] - want).max() <= 1e-4 * np.abs(want).max(), 'the first row differs from PyTorch'
real = np.load(f'{work}/{model}-pad-attention_mask.npy')[0] != 0
kept = (lambda y: y) if model == 'bert_cls' else (lambda y: y[real])
scale = np.abs(got[0]).max()
assert np.abs(kept(got[1]) - kept(got[0])).max() <= 1e-6 * scale, 'a padded token changes the output'
assert np.abs(kept(got[2]) - kept(got[0])).max() > 1e-3 * scale, 'a real token changes nothing'
" "$work" $model 2>"$work/compare.err" || fail "$model's padding: $(tail -1 "$work/compare.err")"
done
finish transformer
