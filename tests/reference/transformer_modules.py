#!/usr/bin/python3
"""transformer_modules.py OUT_DIR [--shapes BxS,...] [--images B,...] [MODEL ...]: the architectures of
transformer_models.py as small PyTorch modules written here (Debian's PyTorch 1.13 has no transformers package),
with random weights (seeded) in eval mode, exported by torch.onnx.export (TorchScript, opset 17) with a dynamic
batch (and sequence, for text) as MODEL.onnx:

  bert      a BERT encoder as Hugging Face writes it: word, position (a buffer of ids sliced to the sequence) and
            token-type embeddings gathered by int64 ids, LayerNorm, 2 post-norm layers of multi-head self-attention
            (Q/K/V Linear, heads by view and permute, QK^T / sqrt(d), the additive padding mask
            (1 - mask[:, None, None, :]) * finfo.min, softmax, .V) and an erf GELU MLP; output last_hidden_state
  bert_cls  the same encoder with a pooler (tanh of a Linear of the first token) and a 3-class Linear; logits
  gpt2      a GPT-2 decoder: positions by arange, pre-norm blocks with a fused Q/K/V projection (addmm, split), the
            causal mask as a lower-triangular bool buffer sliced to the sequence and torch.where with finfo.min, the
            padding mask added to it, a tanh GELU MLP, a final LayerNorm and the LM head tied to the word
            embeddings (h E^T); logits over the vocabulary. Its padding is on the left (as for generation), so that
            the padding mask changes the real positions' attention (on the right the causal mask hides it)
  vit       torchvision's vision transformer: patch embedding by a strided Conv, class token concatenated,
            position embeddings added, pre-norm blocks of nn.MultiheadAttention and an erf GELU MLP, a final
            LayerNorm and a 10-class head on the class token; images 3x32x32

Sizes are tiny (hidden 32, 2 heads, MLP 64, vocabulary 100, 64 positions) for llvmpipe. For each text shape BxS
(default 2x7 and 1x12) it writes MODEL-BxS-input_ids.npy, -attention_mask.npy (int64; ones, the second row padded
by its last two positions, the first two for gpt2) and for bert and bert_cls -token_type_ids.npy (0 then 1 from
the middle), and PyTorch's float64 output (the model in .double()) as MODEL-BxS-y.npy; for each image batch B
(default 2) vit-B-pixel_values.npy and vit-B-y.npy. tests/cli/transformer_checks.sh runs them through glnet_run.
"""
import argparse, math, os, warnings

import numpy as np
import torch
from torch_export import export_torchscript

warnings.filterwarnings("ignore")
HIDDEN, HEADS, MLP, VOCABULARY, POSITIONS, TYPES, LABELS, IMAGE, PATCH = 32, 2, 64, 100, 64, 2, 3, 32, 8
TEXT = ["bert", "bert_cls", "gpt2"]
parser = argparse.ArgumentParser(usage=__doc__)
parser.add_argument("out")
parser.add_argument("models", nargs="*", default=TEXT + ["vit"])
parser.add_argument("--shapes", default="2x7,1x12", help="text batch x sequence, comma-separated")
parser.add_argument("--images", default="2", help="image batches, comma-separated")
args = parser.parse_intermixed_args()


def padding_mask(mask, dtype):
    """Hugging Face's extended attention mask: 0 where attended, finfo.min at padding, broadcast over heads and queries."""
    return (1.0 - mask[:, None, None, :].to(dtype)) * torch.finfo(dtype).min


class BertSelfAttention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.size = HIDDEN // HEADS
        self.query, self.key, self.value = (torch.nn.Linear(HIDDEN, HIDDEN) for _ in range(3))

    def heads(self, x):
        return x.view(x.size()[:-1] + (HEADS, self.size)).permute(0, 2, 1, 3)

    def forward(self, hidden, mask):
        query, key, value = self.heads(self.query(hidden)), self.heads(self.key(hidden)), self.heads(self.value(hidden))
        scores = torch.matmul(query, key.transpose(-1, -2)) / math.sqrt(self.size) + mask
        context = torch.matmul(torch.softmax(scores, dim=-1), value).permute(0, 2, 1, 3).contiguous()
        return context.view(context.size()[:-2] + (HIDDEN,))


class BertLayer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.attention = BertSelfAttention()
        self.attention_output = torch.nn.Linear(HIDDEN, HIDDEN)
        self.attention_norm = torch.nn.LayerNorm(HIDDEN, eps=1e-12)
        self.intermediate = torch.nn.Linear(HIDDEN, MLP)
        self.output = torch.nn.Linear(MLP, HIDDEN)
        self.output_norm = torch.nn.LayerNorm(HIDDEN, eps=1e-12)

    def forward(self, hidden, mask):
        hidden = self.attention_norm(self.attention_output(self.attention(hidden, mask)) + hidden)
        return self.output_norm(self.output(torch.nn.functional.gelu(self.intermediate(hidden))) + hidden)


class Bert(torch.nn.Module):
    def __init__(self, classify):
        super().__init__()
        self.words = torch.nn.Embedding(VOCABULARY, HIDDEN, padding_idx=0)
        self.positions = torch.nn.Embedding(POSITIONS, HIDDEN)
        self.types = torch.nn.Embedding(TYPES, HIDDEN)
        self.register_buffer("position_ids", torch.arange(POSITIONS).expand((1, -1)), persistent=False)
        self.norm = torch.nn.LayerNorm(HIDDEN, eps=1e-12)
        self.layers = torch.nn.ModuleList(BertLayer() for _ in range(2))
        self.classify = classify
        if classify:
            self.pooler = torch.nn.Linear(HIDDEN, HIDDEN)
            self.classifier = torch.nn.Linear(HIDDEN, LABELS)

    def forward(self, input_ids, attention_mask, token_type_ids):
        positions = self.position_ids[:, :input_ids.size(1)]
        hidden = self.norm(self.words(input_ids) + self.types(token_type_ids) + self.positions(positions))
        mask = padding_mask(attention_mask, self.words.weight.dtype)
        for layer in self.layers:
            hidden = layer(hidden, mask)
        if not self.classify:
            return hidden
        return self.classifier(torch.tanh(self.pooler(hidden[:, 0])))


class Conv1D(torch.nn.Module):
    """GPT-2's projection: x W + b by addmm on the rows, W stored [in, out]."""

    def __init__(self, inputs, outputs):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(inputs, outputs) / math.sqrt(inputs))
        self.bias = torch.nn.Parameter(torch.randn(outputs) * 0.1)

    def forward(self, x):
        return torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight).view(x.size()[:-1] + (self.weight.size(1),))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class Gpt2Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.size = HIDDEN // HEADS
        self.norm1 = torch.nn.LayerNorm(HIDDEN)
        self.qkv = Conv1D(HIDDEN, 3 * HIDDEN)
        self.projection = Conv1D(HIDDEN, HIDDEN)
        self.norm2 = torch.nn.LayerNorm(HIDDEN)
        self.fc = Conv1D(HIDDEN, MLP)
        self.fc_out = Conv1D(MLP, HIDDEN)
        self.register_buffer("bias", torch.tril(torch.ones((POSITIONS, POSITIONS), dtype=torch.bool)).view(1, 1, POSITIONS, POSITIONS),
                             persistent=False)

    def heads(self, x):
        return x.view(x.size()[:-1] + (HEADS, self.size)).permute(0, 2, 1, 3)

    def attention(self, hidden, mask):
        query, key, value = (self.heads(t) for t in self.qkv(hidden).split(HIDDEN, dim=2))
        weights = torch.matmul(query, key.transpose(-1, -2)) / torch.full([], value.size(-1) ** 0.5, dtype=query.dtype)
        queries, keys = query.size(-2), key.size(-2)
        causal = self.bias[:, :, keys - queries:keys, :keys]
        weights = torch.where(causal, weights, torch.full([], torch.finfo(weights.dtype).min, dtype=weights.dtype)) + mask
        context = torch.matmul(torch.softmax(weights, dim=-1), value).permute(0, 2, 1, 3).contiguous()
        return self.projection(context.view(context.size()[:-2] + (HIDDEN,)))

    def forward(self, hidden, mask):
        hidden = hidden + self.attention(self.norm1(hidden), mask)
        return hidden + self.fc_out(gelu_tanh(self.fc(self.norm2(hidden))))


class Gpt2(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.words = torch.nn.Embedding(VOCABULARY, HIDDEN)
        self.positions = torch.nn.Embedding(POSITIONS, HIDDEN)
        self.blocks = torch.nn.ModuleList(Gpt2Block() for _ in range(2))
        self.norm = torch.nn.LayerNorm(HIDDEN)

    def forward(self, input_ids, attention_mask):
        positions = torch.arange(0, input_ids.size(-1), dtype=torch.long).unsqueeze(0)
        hidden = self.words(input_ids) + self.positions(positions)
        mask = padding_mask(attention_mask.view(input_ids.size(0), -1), self.words.weight.dtype)
        for block in self.blocks:
            hidden = block(hidden, mask)
        return torch.matmul(self.norm(hidden), self.words.weight.t())


class VitBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1 = torch.nn.LayerNorm(HIDDEN, eps=1e-6)
        self.attention = torch.nn.MultiheadAttention(HIDDEN, HEADS, batch_first=True)
        self.norm2 = torch.nn.LayerNorm(HIDDEN, eps=1e-6)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(HIDDEN, MLP), torch.nn.GELU(), torch.nn.Dropout(0.1), torch.nn.Linear(MLP, HIDDEN))

    def forward(self, x):
        y = self.norm1(x)
        x = x + self.attention(y, y, y, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class Vit(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.patches = torch.nn.Conv2d(3, HIDDEN, PATCH, stride=PATCH)
        self.class_token = torch.nn.Parameter(torch.randn(1, 1, HIDDEN) * 0.5)
        self.position = torch.nn.Parameter(torch.randn(1, (IMAGE // PATCH) ** 2 + 1, HIDDEN) * 0.5)
        self.blocks = torch.nn.Sequential(*(VitBlock() for _ in range(2)))
        self.norm = torch.nn.LayerNorm(HIDDEN, eps=1e-6)
        self.head = torch.nn.Linear(HIDDEN, 10)

    def forward(self, pixel_values):
        x = self.patches(pixel_values)
        x = x.reshape(x.size(0), HIDDEN, -1).permute(0, 2, 1)
        x = torch.cat([self.class_token.expand(x.size(0), -1, -1), x], dim=1) + self.position
        return self.head(self.norm(self.blocks(x))[:, 0])


def build(name):
    torch.manual_seed(7)
    if name in ("bert", "bert_cls"):
        return Bert(name == "bert_cls").eval()
    if name == "gpt2":
        return Gpt2().eval()
    if name == "vit":
        return Vit().eval()
    raise SystemExit(f"transformer_modules.py: unknown model {name}; the models are {', '.join(TEXT + ['vit'])}")


def text_inputs(name, batch, sequence):
    generator = torch.Generator().manual_seed(batch * 100 + sequence)
    inputs = {"input_ids": torch.randint(1, VOCABULARY, (batch, sequence), generator=generator),
              "attention_mask": torch.ones(batch, sequence, dtype=torch.int64)}
    if batch > 1:
        padded = slice(0, 2) if name == "gpt2" else slice(sequence - 2, sequence)
        inputs["attention_mask"][1, padded] = 0
    if name.startswith("bert"):
        inputs["token_type_ids"] = (torch.arange(sequence) >= sequence // 2).long().expand(batch, -1).contiguous()
    return inputs


def save(name, tag, model, inputs):
    for key, value in inputs.items():
        np.save(os.path.join(args.out, f"{name}-{tag}-{key}.npy"), value.numpy())
    with torch.no_grad():
        double = [v.double() if v.is_floating_point() else v for v in inputs.values()]
        np.save(os.path.join(args.out, f"{name}-{tag}-y.npy"), model.double()(*double).numpy())
    model.float()


os.makedirs(args.out, exist_ok=True)
shapes = [tuple(int(n) for n in shape.split("x")) for shape in args.shapes.split(",")]
for name in args.models:
    model = build(name)
    if name == "vit":
        inputs = {"pixel_values": torch.randn(2, 3, IMAGE, IMAGE)}
        axes = {"pixel_values": {0: "batch"}, "y": {0: "batch"}}
    else:
        inputs = text_inputs(name, *shapes[0])
        axes = {key: {0: "batch", 1: "sequence"} for key in inputs}
        axes["y"] = {0: "batch"} if name == "bert_cls" else {0: "batch", 1: "sequence"}
    export_torchscript(model, tuple(inputs.values()), os.path.join(args.out, name + ".onnx"), opset_version=17,
                       input_names=list(inputs), output_names=["y"], dynamic_axes=axes)
    if name == "vit":
        for batch in (int(b) for b in args.images.split(",")):
            save(name, batch, model, {"pixel_values": torch.randn(batch, 3, IMAGE, IMAGE, generator=torch.Generator().manual_seed(batch))})
    else:
        for batch, sequence in shapes:
            save(name, f"{batch}x{sequence}", model, text_inputs(name, batch, sequence))
    print(f"{name}: exported", flush=True)
