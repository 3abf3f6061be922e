#!/usr/bin/python3
"""Writes tests/data/pytorch-exports/VERSION/: torch_finetune.py's vision transformer and text encoder as the running
PyTorch exports them (training mode), and the vision transformer's default export (eval mode, constant folding).
Committed: 1.13 (Debian's) and 2.11 (the GPU machine's), whose TorchScript exporters write nn.MultiheadAttention in two
forms (2.x: the projection unflattened and gathered, heads [N, H, S, D], Q and Kᵀ each scaled by the fourth root of
1/D, the padding mask added to the scores). e2e.torch_finetune trains the 2.11 files beside whatever PyTorch runs it,
from their own initializers, and edits the 1.13 files into attentions that must be refused.

  export_fixtures.py OUT_DIR
"""
import importlib.util
import sys
from pathlib import Path

import torch

here = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("torch_finetune", here / "torch_finetune.py")
finetune = importlib.util.module_from_spec(spec)
spec.loader.exec_module(finetune)
from torch_export import export_torchscript  # noqa: E402  (torch_finetune.py put its directory on the path)

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
torch.manual_seed(13)
finetune.export(finetune.VisionTransformer(), out / "vit.onnx")
torch.manual_seed(14)
finetune.export(finetune.TextEncoder(), out / "text.onnx", example=torch.ones(2, 8, dtype=torch.long), input_name="ids")
torch.manual_seed(13)
# torch.onnx.export's defaults: eval mode, constant folding (the in-projection's weight folded into its transpose).
export_torchscript(finetune.VisionTransformer().eval(), torch.zeros(2, 1, 28, 28), str(out / "vit-folded.onnx"), opset_version=17,
                   input_names=["images"], output_names=["logits"], dynamic_axes={"images": {0: "batch"}})
print(f"wrote {out} with PyTorch {torch.__version__}")
