#!/usr/bin/python3
"""transformer_models.py OUT_DIR [--size tiny|full] [--exporter torchscript|dynamo|both] [--attention eager|sdpa|both]
[--batch B] [--sequence S] [--image I] [MODEL ...]: the transformers of torchvision and Hugging Face with random weights
(seeded, eval mode), exported by torch.onnx.export with a dynamic batch (and sequence, for text), each as
NAME.onnx with its inputs NAME-INPUT.npy (int64 token ids, a padding attention mask whose second row ends in padding,
token type ids; or float images) and PyTorch's float64 CPU output for them, NAME-y.npy. NAME is MODEL, the exporter
(ts: TorchScript at opset 17, dynamo: torch.export at opset 18) and, for Hugging Face models, the attention
implementation. `tiny` builds each architecture from a small config (same graph structure, a few hundred kB);
`full` the published sizes. Needs torchvision and transformers (the GPU machine has both). Debian's PyTorch 1.13
has no transformers (CI checks Hugging Face's architectures as transformer_modules.py writes them) and its
torchvision 0.14 no Swin V2, but exports tv_vit_b_16, tv_vit_b_32, tv_swin_t and tv_maxvit_t by TorchScript
(tests/cli/transformer_checks.sh). Writes OUT_DIR/export.json: per model, the exported files or why the export failed.
"""
import argparse, json, os, time, traceback, warnings

import numpy as np
import torch
from torch_export import export_torchscript

warnings.filterwarnings("ignore")
TEXT = ["hf_bert", "hf_bert_cls", "hf_distilbert", "hf_gpt2", "hf_gpt2_lm"]
IMAGES = ["tv_vit_b_16", "tv_vit_b_32", "tv_swin_t", "tv_swin_v2_t", "tv_maxvit_t", "hf_vit", "hf_vit_cls"]
parser = argparse.ArgumentParser(usage=__doc__)
parser.add_argument("out")
parser.add_argument("models", nargs="*", default=TEXT + IMAGES)
parser.add_argument("--size", choices=["tiny", "full"], default="tiny")
parser.add_argument("--exporter", choices=["torchscript", "dynamo", "both"], default="both")
parser.add_argument("--attention", choices=["eager", "sdpa", "both"], default="both")
parser.add_argument("--batch", type=int, default=2)
parser.add_argument("--sequence", type=int, default=7)
parser.add_argument("--image", type=int, default=0, help="image size (default: 32 tiny, 224 full)")


def configure(argv=None):
    """The command line (or argv) as the settings the builders below read: bench/transformer_peer.py builds the
    same models by importing this file."""
    global args, tiny, image, vocabulary
    args = parser.parse_intermixed_args(argv)
    tiny = args.size == "tiny"
    image = args.image or (32 if tiny else 224)
    vocabulary = 100 if tiny else None


class FirstOutput(torch.nn.Module):
    """The model's first output alone (last_hidden_state or logits), as one tensor."""

    def __init__(self, model, names):
        super().__init__()
        self.m = model
        self.names = names

    def forward(self, *inputs):
        out = self.m(**dict(zip(self.names, inputs))) if self.names else self.m(*inputs)
        return out if torch.is_tensor(out) else out[0]


def torchvision_model(name):
    """torchvision's model NAME; ViT's head, which torchvision initialises to zeros (every logit 0: nothing to compare),
    gets nn.Linear's default random initialisation instead."""
    model = torchvision_architecture(name)
    if name.startswith("tv_vit"):
        model.heads.head.reset_parameters()
    return model


def torchvision_architecture(name):
    import torchvision
    from torchvision.models import maxvit, swin_transformer, vision_transformer
    if not tiny:
        return getattr(torchvision.models, name[3:])(weights=None)
    if name in ("tv_vit_b_16", "tv_vit_b_32"):
        return vision_transformer.VisionTransformer(image_size=image, patch_size=8 if name.endswith("16") else 16, num_layers=2, num_heads=2,
                                                    hidden_dim=16, mlp_dim=32, num_classes=10)
    if name == "tv_swin_t":
        return swin_transformer.SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[2, 2], num_heads=[2, 2], window_size=[4, 4], num_classes=10)
    if name == "tv_swin_v2_t":
        return swin_transformer.SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[2, 2], num_heads=[2, 2], window_size=[4, 4], num_classes=10,
                                                block=swin_transformer.SwinTransformerBlockV2, downsample_layer=swin_transformer.PatchMergingV2)
    if name == "tv_maxvit_t":
        return maxvit.MaxVit(input_size=(image, image), stem_channels=8, partition_size=2, block_channels=[16, 32], block_layers=[1, 1], head_dim=8,
                             stochastic_depth_prob=0.0, num_classes=10)
    raise SystemExit(f"unknown model {name}")


def hugging_face_model(name, attention):
    import transformers as t
    small = dict(num_hidden_layers=2, num_attention_heads=2, hidden_size=32, intermediate_size=64) if tiny else {}
    if name in ("hf_bert", "hf_bert_cls"):
        config = t.BertConfig(**(dict(vocab_size=vocabulary, max_position_embeddings=64, **small) if tiny else {}), num_labels=3)
        return (t.BertModel if name == "hf_bert" else t.BertForSequenceClassification)._from_config(config, attn_implementation=attention)
    if name == "hf_distilbert":
        config = t.DistilBertConfig(**(dict(vocab_size=vocabulary, dim=32, n_layers=2, n_heads=2, hidden_dim=64, max_position_embeddings=64) if tiny else {}))
        return t.DistilBertModel._from_config(config, attn_implementation=attention)
    if name in ("hf_gpt2", "hf_gpt2_lm"):
        config = t.GPT2Config(**(dict(vocab_size=vocabulary, n_embd=32, n_layer=2, n_head=2, n_positions=64) if tiny else {}), use_cache=False)
        return (t.GPT2Model if name == "hf_gpt2" else t.GPT2LMHeadModel)._from_config(config, attn_implementation=attention)
    if name in ("hf_vit", "hf_vit_cls"):
        config = t.ViTConfig(**(dict(image_size=image, patch_size=8, **small) if tiny else {}), num_labels=10)
        return (t.ViTModel if name == "hf_vit" else t.ViTForImageClassification)._from_config(config, attn_implementation=attention)
    raise SystemExit(f"unknown model {name}")


def inputs_of(name, model):
    generator = torch.Generator().manual_seed(11)
    if name in IMAGES:
        return {"pixel_values": torch.randn(args.batch, 3, image, image, generator=generator)}
    vocab = model.config.vocab_size
    ids = torch.randint(0, vocab, (args.batch, args.sequence), generator=generator)
    mask = torch.ones(args.batch, args.sequence, dtype=torch.int64)
    if args.batch > 1:
        mask[1, args.sequence - 2:] = 0
    inputs = {"input_ids": ids, "attention_mask": mask}
    if name.startswith("hf_bert"):
        inputs["token_type_ids"] = (torch.arange(args.sequence) >= args.sequence // 2).long().expand(args.batch, -1).contiguous()
    return inputs


def export(model, inputs, path, exporter, text):
    names = list(inputs)
    values = tuple(inputs.values())
    if exporter == "dynamo":
        batch = torch.export.Dim("batch", min=1, max=1024)
        dims = {0: batch}
        if text:
            dims[1] = torch.export.Dim("sequence", min=2, max=model.m.config.max_position_embeddings if hasattr(model.m, "config") else 512)
        torch.onnx.export(model, values, path, dynamo=True, opset_version=18, input_names=names, output_names=["y"],
                          dynamic_shapes=(tuple(dims for _ in names),), external_data=False)
    else:
        axes = {0: "batch", 1: "sequence"} if text else {0: "batch"}
        dynamic = {n: axes for n in names}
        dynamic["y"] = {0: "batch"}
        export_torchscript(model, values, path, opset_version=17, input_names=names, output_names=["y"], dynamic_axes=dynamic)


def main():
    os.makedirs(args.out, exist_ok=True)
    report = {}
    exporters = ["torchscript", "dynamo"] if args.exporter == "both" else [args.exporter]
    for model_name in args.models:
        attentions = [None] if model_name.startswith("tv_") else (["eager", "sdpa"] if args.attention == "both" else [args.attention])
        for attention in attentions:
            for exporter in exporters:
                name = "-".join([model_name, "ts" if exporter == "torchscript" else "dynamo"] + ([attention] if attention else []))
                torch.manual_seed(7)
                start = time.time()
                try:
                    base = torchvision_model(model_name) if attention is None else hugging_face_model(model_name, attention)
                    inputs = inputs_of(model_name, base)
                    model = FirstOutput(base.eval(), None if attention is None else list(inputs)).eval()
                    path = os.path.join(args.out, name + ".onnx")
                    export(model, inputs, path, exporter, model_name in TEXT)
                    for key, value in inputs.items():
                        np.save(os.path.join(args.out, f"{name}-{key}.npy"), value.numpy())
                    with torch.no_grad():
                        double = {k: (v.double() if v.is_floating_point() else v) for k, v in inputs.items()}
                        y = model.double()(*double.values()).numpy()
                    np.save(os.path.join(args.out, name + "-y.npy"), y)
                    import onnx
                    ops = sorted({node.op_type for node in onnx.load(path).graph.node})
                    report[name] = {"inputs": list(inputs), "output": list(y.shape), "seconds": round(time.time() - start, 1), "ops": ops}
                    print(f"{name}: exported in {time.time() - start:.1f} s", flush=True)
                except Exception as e:  # the report says which exports fail, and why
                    report[name] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:400],
                                    "trace": traceback.format_exc()[-1500:]}
                    print(f"{name}: FAILED {report[name]['error']}", flush=True)
    with open(os.path.join(args.out, "export.json"), "w") as f:
        json.dump(report, f, indent=1)


if __name__ == "__main__":
    configure()
    main()
