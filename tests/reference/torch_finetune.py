#!/usr/bin/python3
"""Fine-tuning an ONNX model that Debian's PyTorch exported (python3-torch, CPU): glnet_train --net MODEL.onnx against
PyTorch training the same module, ten steps on the same batch.

The module is written as PyTorch users write them, not from a glnet description: a bias-free convolution before batch
normalization, a depthwise convolution, a concatenation of channels, SiLU (exported as x*Sigmoid(x)), exact GELU
(exported as x*(1+Erf(x/sqrt(2)))/2), layer normalization over the last axis, a residual add, max and global average
pooling, a Linear layer, and a Dropout of rate 0 (exported, so that the importer sees one). It
is exported in training mode (torch.onnx.TrainingMode.TRAINING keeps BatchNormalization and Dropout) with random
weights, then both sides train ten steps of SGD with momentum on the first 64 MNIST training images (x/255, the
whole batch each step). Checks every step's loss and every parameter and running statistic afterwards; the bias
glnet gives the bias-free convolution (zeros, trained) must stay where batch normalization leaves it, at zero.

Tolerance and why: as tests/reference/torch_training.py, float32 on both sides in different summation orders, which
batch normalization amplifies to about 1e-6 relative per step: 1e-4 relative on the losses, 1e-4 + 1e-3·|value| on the
parameters. A second module with Dropout(0.3) exported the same way must train (its loss falls by more than 0.1) and
its model file must record the dropout layer. A model that flattens with x.view is refused in one line naming the node.

A vision transformer written the same way (patches by a strided convolution, flatten(2).transpose(1, 2), a learned
position table, a pre-norm block of nn.MultiheadAttention with batch_first, residual adds, Linear, GELU, Linear, a
last LayerNorm, flatten and a Linear head) is checked as the first module is: glnet reads the exporter's hundred nodes
of attention as one attention layer, the MatMul and Add pairs as linear layers, and must follow PyTorch's ten steps
within the same tolerances (no batch normalization here: the rounding differences stay near 1e-7). So must a BERT-like
text encoder exported with int64 token ids in (nn.Embedding, a position table, nn.MultiheadAttention given
key_padding_mask=ids == 0, the first position into a Linear), trained on an ids data set of 64 padded sequences: the
mask's Equal, Reshape, Expand, Cast and Where become one mask layer that the attention reads. The vision
transformer's export edited to compute another attention (K and V swapped, a negative scale, reshapes to other heads,
a Softmax without axis at opset 12) must be refused in one line, so must the text encoder's with its padding mask
reshaped onto the queries or across sequences (caught by glnet's float64 check of what it read against the model), and
the vision transformer's default export (eval mode, constant folding,
equal initializers shared through Identity nodes) must train to the same tensors as the training-mode one. The same
three exports made by PyTorch 2.11 (tests/data/pytorch-exports/2.11, whose nn.MultiheadAttention has another form)
train the same way beside the running PyTorch from their own initializers, and their vision transformer and text
encoder run inference through glnet_run (at batch 3 and 1) within 1e-5 × max |output| of the modules in float64; the
edits start from the 1.13 exports committed beside them, so that they find the node names they change on every machine.

  torch_finetune.py GLNET_TRAIN MNIST_DIR WORK_DIR
"""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
from torch import nn

here = Path(__file__).resolve().parent
sys.path.insert(0, str(here))
sys.path.insert(0, str(here.parent.parent / "bench"))
from idx_files import idx  # noqa: E402
from step_comparison import compare_losses, read_safetensors  # noqa: E402
from torch_export import export_torchscript  # noqa: E402

STEPS, BATCH, LR = 10, 64, 0.05


class Mixed(nn.Module):
    def __init__(self, dropout):
        super().__init__()
        self.stem = nn.Conv2d(1, 6, 3, stride=2, padding=1, bias=False)
        self.stem_bn = nn.BatchNorm2d(6)
        self.depthwise = nn.Conv2d(6, 6, 3, padding=1, groups=6)
        self.depthwise_bn = nn.BatchNorm2d(6, momentum=0.2)
        self.pointwise = nn.Conv2d(12, 12, 1)
        self.pool = nn.MaxPool2d(2)
        # A large epsilon: rows of the ReLU output that are nearly constant (MNIST's background) would otherwise
        # divide rounding differences by a deviation near 0.
        self.norm = nn.LayerNorm(14, eps=0.1)
        self.drop = nn.Dropout(dropout)
        self.fc = nn.Linear(12, 10)

    def forward(self, x):
        a = torch.relu(self.stem_bn(self.stem(x)))
        b = nn.functional.silu(self.depthwise_bn(self.depthwise(self.norm(a))))
        c = torch.cat([a, b], 1)
        c = nn.functional.gelu(self.pointwise(c)) + c
        c = self.pool(torch.relu(c))
        c = torch.flatten(nn.functional.adaptive_avg_pool2d(c, 1), 1)
        return self.fc(self.drop(c))


def export(model, path, example=None, input_name="images"):
    model.train()
    example = torch.zeros(2, 1, 28, 28) if example is None else example
    export_torchscript(model, example, str(path), opset_version=17, training=torch.onnx.TrainingMode.TRAINING,
                       do_constant_folding=False, input_names=[input_name], output_names=["logits"], dynamic_axes={input_name: {0: "batch"}})


def glnet_train(train, mnist, work, model, name, extra=()):
    result = subprocess.run([train, "--net", str(model), "--data", mnist, "--train-limit", str(BATCH), "--batch", str(BATCH),
                             "--test-limit", "10", "--epochs", str(STEPS), "--optimizer", "momentum", "--lr", str(LR), "--no-standardize",
                             "--json", "--out", str(work / (name + ".safetensors")), *extra], capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit("glnet_train --net " + str(model) + " failed: " + result.stderr.strip().splitlines()[-1])
    return [epoch["train_loss"] for epoch in json.loads(result.stdout)["epochs"]]


class Position(nn.Module):
    """A learned vector per position added to [N, S, E] (its weight [1, S, E], as timm's pos_embed)."""

    def __init__(self, positions, width):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(1, positions, width) * 0.1)

    def forward(self, x):
        return x + self.weight


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(width)
        self.mlp1 = nn.Linear(width, 4 * width)
        self.mlp2 = nn.Linear(4 * width, width)

    def forward(self, x, pad=None):
        y = self.ln1(x)
        x = x + self.attn(y, y, y, key_padding_mask=pad, need_weights=False)[0]
        return x + self.mlp2(nn.functional.gelu(self.mlp1(self.ln2(x))))


class VisionTransformer(nn.Module):
    """7x7 patches of a 28x28 image: 16 tokens of 16 features, two heads of 8."""

    def __init__(self):
        super().__init__()
        self.patches = nn.Conv2d(1, 16, 7, stride=7)
        self.position = Position(16, 16)
        self.block1 = Block(16, 2)
        self.norm = nn.LayerNorm(16)
        self.fc = nn.Linear(16 * 16, 10)

    def forward(self, x):
        x = self.position(self.patches(x).flatten(2).transpose(1, 2))
        return self.fc(torch.flatten(self.norm(self.block1(x)), 1))


class VisionTransformerLogProbabilities(VisionTransformer):
    """The same, its features dropped at `dropout` before the head, ending in log_softmax (as NLL-trained models do)."""

    def __init__(self, dropout):
        super().__init__()
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        x = self.position(self.patches(x).flatten(2).transpose(1, 2))
        return nn.functional.log_softmax(self.fc(self.drop(torch.flatten(self.norm(self.block1(x)), 1))), 1)


class TextEncoder(nn.Module):
    """BERT-like: ids [N, 8] below 20 (0 the padding), embedding, position table, a block whose attention skips the
    padding (key_padding_mask), a last LayerNorm, the first position's features into a Linear of 3 classes."""

    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(20, 16)
        self.position = Position(8, 16)
        self.block1 = Block(16, 2)
        self.norm = nn.LayerNorm(16)
        self.fc = nn.Linear(16, 3)

    def forward(self, ids):
        pad = ids == 0
        x = self.position(self.embedding(ids))
        return self.fc(self.norm(self.block1(x, pad))[:, 0])


def read_as(model_file, wanted):
    """1 (and why) unless the model file glnet_train wrote records layers of the kinds `wanted`, in order."""
    _, metadata = read_safetensors(model_file)
    kinds = [layer["kind"] for layer in json.loads(metadata["network"])["layers"]]
    if kinds == wanted:
        return 0
    print(f"{model_file.name}: read as layers {kinds}, not {wanted}")
    return 1


def same_tensors(first, second):
    """1 (and why) unless two model files hold the same tensors within 1e-6."""
    a, _ = read_safetensors(first)
    b, _ = read_safetensors(second)
    if set(a) == set(b) and all(np.abs(a[k] - b[k]).max() <= 1e-6 for k in a):
        return 0
    print(f"{second.name} holds other tensors than {first.name}")
    return 1


def load_initializers(model, path):
    """Sets every tensor of `model`'s state_dict from the initializer of the ONNX file at `path` of the same name."""
    import onnx
    from onnx import numpy_helper

    weights = {tensor.name: numpy_helper.to_array(tensor) for tensor in onnx.load(str(path)).graph.initializer}
    state = model.state_dict()
    for key, value in state.items():
        if key not in weights:
            sys.exit(f"{path} has no initializer {key}")
        state[key] = torch.from_numpy(weights[key].copy()).reshape(value.shape)
    model.load_state_dict(state)
    return model


def compare_training(train, mnist, work, model, name, extra_tensors=(), ids=None, onnx_file=None):
    """Exports `model`, trains it STEPS steps with glnet and with PyTorch on the same batch, and returns the failures:
    losses and every tensor of PyTorch's state_dict compared (glnet's may hold `extra_tensors` beyond them; a tensor of
    another shape but as many values, a position table [S, E] for PyTorch's [1, S, E], is compared reshaped)."""
    # `onnx_file`: a file exported elsewhere (by another PyTorch) from `model`'s weights, trained instead of an export.
    path = onnx_file or work / (name + ".onnx")
    if ids is None:
        if onnx_file is None:
            export(model, path)
        glnet_losses = glnet_train(train, mnist, work, path, name)
        images = idx(mnist, "train-images-idx3-ubyte")[:BATCH]
        labels = idx(mnist, "train-labels-idx1-ubyte")[:BATCH].astype(np.int64)
        x = torch.from_numpy(images.astype(np.float32) / 255).unsqueeze(1)
    else:
        # Token ids: an ids data set of BATCH sequences (and a few test ones), exported with int64 ids in.
        ids, labels = ids
        data = work / (name + "-ids")
        data.mkdir(exist_ok=True)
        for part, rows in (("train", slice(None)), ("test", slice(0, 10))):
            np.save(data / f"{part}-ids.npy", ids[rows])
            np.save(data / f"{part}-labels.npy", labels[rows])
        if onnx_file is None:
            export(model, path, example=torch.from_numpy(ids[:2]), input_name="ids")
        glnet_losses = glnet_train(train, str(data), work, path, name, ("--dataset", "ids"))
        x = torch.from_numpy(ids)
    y = torch.from_numpy(labels)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    model.train()
    torch_losses = []
    for _ in range(STEPS):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        torch_losses.append(loss.item())

    failures = compare_losses(glnet_losses, torch_losses, STEPS)
    trained, _ = read_safetensors(work / (name + ".safetensors"))
    expected = {k: v.detach().numpy() for k, v in model.state_dict().items() if not k.endswith("num_batches_tracked")}
    missing = set(expected) - set(trained)
    if missing:
        sys.exit(f"{name}: glnet's model lacks PyTorch's tensors {sorted(missing)}")
    if set(trained) - set(expected) != set(extra_tensors):
        sys.exit(f"{name}: glnet's model has tensors beyond PyTorch's {sorted(set(trained) - set(expected))}, not {sorted(extra_tensors)}")
    for tensor, value in expected.items():
        if trained[tensor].size != value.size:
            sys.exit(f"{name}: glnet's {tensor} holds {trained[tensor].size} values, PyTorch's {value.size}")
        difference = np.abs(trained[tensor].reshape(value.shape) - value)
        if np.any(difference > 1e-4 + 1e-3 * np.abs(value)):
            failures += 1
            print(f"{name}: {tensor}: max |glnet - PyTorch| {difference.max():.3g} beyond the tolerance")
    print(f"{name}: {len(expected)} tensors compared after {STEPS} steps")
    return failures, trained


def main(train, mnist, work):
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(11)
    failures, trained = compare_training(train, mnist, work, Mixed(0.0), "mixed", extra_tensors={"stem.bias"})
    if np.abs(trained["stem.bias"]).max() > 1e-4:
        failures += 1
        print(f"stem.bias moved to {np.abs(trained['stem.bias']).max():.3g}; batch normalization after it should leave it at 0")

    torch.manual_seed(13)
    vit_failures, _ = compare_training(train, mnist, work, VisionTransformer(), "vit")
    failures += vit_failures
    failures += read_as(work / "vit.safetensors", ["conv", "tokens", "position", "layernorm", "attention", "add", "layernorm", "linear", "gelu",
                                                   "linear", "add", "layernorm", "flatten", "dense"])
    # The same initial weights exported as torch.onnx.export does by default (eval mode, constant folding: equal
    # initializers shared through Identity nodes) train to the same tensors.
    torch.manual_seed(13)
    folded = VisionTransformer().eval()
    export_torchscript(folded, torch.zeros(2, 1, 28, 28), str(work / "vit-folded.onnx"), opset_version=17, input_names=["images"],
                       output_names=["logits"], dynamic_axes={"images": {0: "batch"}})
    glnet_train(train, mnist, work, work / "vit-folded.onnx", "vit-folded")
    failures += same_tensors(work / "vit.safetensors", work / "vit-folded.safetensors")
    # Ending in log_softmax (which glnet's loss takes the place of), and with Dropout(0.2) in training mode: the check of
    # what glnet read against the model compares log-probabilities, and runs the model's dropout as inference does.
    torch.manual_seed(13)
    log_failures, _ = compare_training(train, mnist, work, VisionTransformerLogProbabilities(0.0), "vit-log")
    failures += log_failures
    torch.manual_seed(13)
    export(VisionTransformerLogProbabilities(0.2), work / "vit-dropout.onnx")
    losses = glnet_train(train, mnist, work, work / "vit-dropout.onnx", "vit-dropout")
    if not losses[-1] < losses[0] - 0.1:
        failures += 1
        print(f"the vision transformer with dropout went from loss {losses[0]:.4f} to {losses[-1]:.4f} in {STEPS} steps")

    torch.manual_seed(14)
    random = np.random.default_rng(14)
    ids = random.integers(1, 20, size=(BATCH, 8)).astype(np.int64)
    for row, length in enumerate(random.integers(3, 9, size=BATCH)):
        ids[row, length:] = 0
    labels = random.integers(0, 3, size=BATCH).astype(np.int64)
    text_failures, _ = compare_training(train, mnist, work, TextEncoder(), "text", ids=(ids, labels))
    failures += text_failures
    failures += read_as(work / "text.safetensors", ["mask", "embedding", "position", "layernorm", "attention", "add", "layernorm", "linear", "gelu",
                                                    "linear", "add", "layernorm", "first", "dense"])

    torch.manual_seed(12)
    export(Mixed(0.3), work / "dropout.onnx")
    losses = glnet_train(train, mnist, work, work / "dropout.onnx", "dropout")
    _, metadata = read_safetensors(work / "dropout.safetensors")
    rates = [layer["rate"] for layer in json.loads(metadata["network"])["layers"] if layer["kind"] == "dropout"]
    if rates != [0.30000001192092896] and rates != [0.3]:
        failures += 1
        print(f"the dropout model records dropout rates {rates}, not [0.3]")
    # Without dropout the same steps lower the loss by about 0.11; with a random mask each step, by more than 0.1 still.
    if not losses[-1] < losses[0] - 0.1:
        failures += 1
        print(f"with dropout the loss went from {losses[0]:.4f} to {losses[-1]:.4f} in {STEPS} steps")

    # A model glnet cannot train is refused in one line naming the node PyTorch gave it.
    class Viewed(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(784, 10)

        def forward(self, x):
            return self.fc(x.view(x.size(0), -1))

    export(Viewed(), work / "viewed.onnx")
    result = subprocess.run([train, "--net", str(work / "viewed.onnx"), "--data", mnist, "--out", str(work / "v.safetensors")],
                            capture_output=True, text=True)
    lines = result.stderr.strip().splitlines()
    wanted = "viewed.onnx: node '/Shape' (Shape): glnet trains Conv, Gemm"
    if result.returncode != 1 or len(lines) != 1 or wanted not in lines[0] or "torch.flatten(x, 1)" not in lines[0]:
        failures += 1
        print(f"a model with x.view: exit {result.returncode}, {lines}; wanted one line with {wanted!r}")
    # PyTorch 2.x writes nn.MultiheadAttention in another form (tests/reference/export_fixtures.py): its exports of
    # both modules, trained from their own initializers beside the PyTorch running this, and its default (folded) one.
    fixtures = here.parent / "data" / "pytorch-exports" / "2.11"
    vit2_failures, _ = compare_training(train, mnist, work, load_initializers(VisionTransformer(), fixtures / "vit.onnx"), "vit-torch2",
                                           onnx_file=fixtures / "vit.onnx")
    text2_failures, _ = compare_training(train, mnist, work, load_initializers(TextEncoder(), fixtures / "text.onnx"), "text-torch2",
                                         ids=(ids, labels), onnx_file=fixtures / "text.onnx")
    failures += vit2_failures + text2_failures
    # Their inference through glnet_run (its attention reading Q, K and V through the export's views of the
    # in-projection) against the same modules in float64, at batch 3 (batch and heads as one axis between) and 1.
    images = np.random.default_rng(5).standard_normal((3, 1, 28, 28)).astype(np.float32)
    failures += inference_matches(train, work, load_initializers(VisionTransformer(), fixtures / "vit.onnx"), fixtures / "vit.onnx", images)
    failures += inference_matches(train, work, load_initializers(TextEncoder(), fixtures / "text.onnx"), fixtures / "text.onnx", ids[:3])
    glnet_train(train, mnist, work, fixtures / "vit-folded.onnx", "vit-torch2-folded")
    failures += same_tensors(work / "vit-torch2.safetensors", work / "vit-torch2-folded.safetensors")

    failures += refusals(train, mnist, work)
    failures += attention_refusals(train, mnist, work, here.parent / "data" / "pytorch-exports" / "1.13")
    sys.exit(1 if failures else 0)


def inference_matches(train, work, model, onnx_file, inputs):
    """glnet_run (beside glnet_train) on `onnx_file` at the batch of `inputs` and at 1, against `model` in float64: max
    |difference| <= 1e-5 x max |output| (float32 against float64) and the same argmax. Returns the failures."""
    run = Path(train).parent / "glnet_run"
    with torch.no_grad():
        model = model.eval().double()
        want = model(torch.from_numpy(inputs).double() if inputs.dtype == np.float32 else torch.from_numpy(inputs)).numpy()
    failures = 0
    for batch in (len(inputs), 1):
        np.save(work / "inference-in.npy", inputs[:batch])
        result = subprocess.run([str(run), "--model", str(onnx_file), "--input", str(work / "inference-in.npy"), "--output",
                                 str(work / "inference-out.npy")], capture_output=True, text=True)
        if result.returncode != 0:
            print(f"glnet_run on {onnx_file.name} at batch {batch}: exit {result.returncode}: {result.stderr.strip()}")
            failures += 1
            continue
        got, expected = np.load(work / "inference-out.npy"), want[:batch]
        if got.shape != expected.shape:
            print(f"{onnx_file.name} at batch {batch}: output {got.shape}, PyTorch's {expected.shape}")
            failures += 1
            continue
        error = np.abs(got - expected).max() / np.abs(expected).max()
        print(f"{onnx_file.parent.name}/{onnx_file.name}, batch {batch}: max|glnet - PyTorch float64| = {error:.3g} x max|out|")
        if not error <= 1e-5 or (got.argmax(1) != expected.argmax(1)).any():
            print(f"{onnx_file.name} at batch {batch}: shape {got.shape}, argmax {got.argmax(1)} against {expected.shape}, {expected.argmax(1)}")
            failures += 1
    return failures


def attention_refusals(train, mnist, work, exports):
    """PyTorch 1.13's export of the vision transformer (in `exports`, whatever PyTorch runs this) edited so that its
    attention computes something else (K and V swapped, the scale negated, reshapes to 4 heads where the scale says heads
    of 8, a Softmax without axis at opset 12, which normalises over all the scores of a head), and 2.11's with its
    Softmax along the queries or Q scaled by 4: each must be refused, not trained as the attention it resembles."""
    import copy

    import onnx
    from onnx import helper, numpy_helper

    base = onnx.load(str(exports / "vit.onnx"))

    def producer(model, output):
        found = [node for node in model.graph.node if output in node.output]
        if not found:
            sys.exit(f"the PyTorch 1.13 export has no node making {output}")
        return found[0]

    def set_constant(model, output, value):
        attribute = producer(model, output).attribute[0]
        old = numpy_helper.to_array(attribute.t)
        attribute.t.CopyFrom(numpy_helper.from_array(np.array(value, dtype=old.dtype).reshape(old.shape), attribute.t.name))

    edits = {}
    model = copy.deepcopy(base)
    producer(model, "/block1/attn/Reshape_1_output_0").input[0] = "/block1/attn/Slice_2_output_0"
    producer(model, "/block1/attn/Reshape_2_output_0").input[0] = "/block1/attn/Slice_1_output_0"
    edits["kv-swapped"] = model
    model = copy.deepcopy(base)
    set_constant(model, "/block1/attn/Constant_14_output_0", -np.sqrt(8))
    edits["negative-scale"] = model
    model = copy.deepcopy(base)
    set_constant(model, "/block1/attn/Constant_3_output_0", 4)
    set_constant(model, "/block1/attn/Constant_11_output_0", 4)
    edits["four-heads"] = model
    # Opset 12 (Unsqueeze's axes an attribute, Reshape without allowzero), its Softmax given no axis.
    model = copy.deepcopy(base)
    model.opset_import[0].version = 12
    constants = {node.output[0]: numpy_helper.to_array(node.attribute[0].t) for node in model.graph.node if node.op_type == "Constant"}
    for node in model.graph.node:
        if node.op_type == "Reshape":
            node.ClearField("attribute")
        if node.op_type == "Unsqueeze" and len(node.input) == 2:
            axes = constants[node.input[1]].tolist()
            del node.input[1]
            node.attribute.append(helper.make_attribute("axes", axes))
        if node.op_type == "Softmax":
            node.ClearField("attribute")
    edits["softmax-opset12"] = model
    failures = 0
    # PyTorch 2.x's form: its Softmax along the queries, and Q scaled by 4 instead of the fourth root of 1/D.
    newer = onnx.load(str(exports.parent / "2.11" / "vit.onnx"))
    model = copy.deepcopy(newer)
    softmax = producer(model, "/block1/attn/Softmax_output_0")
    softmax.ClearField("attribute")
    softmax.attribute.append(helper.make_attribute("axis", 2))
    edits["torch2-softmax-over-queries"] = model
    model = copy.deepcopy(newer)
    model.graph.initializer.append(numpy_helper.from_array(np.array(4.0, np.float32), "four"))
    producer(model, "/block1/attn/Mul_1_output_0").input[1] = "four"
    edits["torch2-scale-4"] = model
    for name, model in edits.items():
        path = work / (name + ".onnx")
        onnx.save(model, str(path))
        result = subprocess.run([train, "--net", str(path), "--data", mnist, "--out", str(work / "bad.safetensors")], capture_output=True, text=True)
        lines = result.stderr.strip().splitlines()
        if result.returncode != 1 or len(lines) != 1 or "(Transpose): glnet trains" not in lines[0]:
            failures += 1
            print(f"{name}: exit {result.returncode}, {lines}; wanted its attention refused in one line")
    # The text encoder's padding mask reshaped to hide queries rather than keys ([N·h, S, 1]), or expanded head-major
    # ([h, N, 1, S]: each sequence's mask on other sequences): every node the pattern reads is where it looks for it,
    # but the shape arithmetic differs, so glnet's check of the network it read against the model refuses them.
    text = onnx.load(str(exports / "text.onnx"))
    masks = {}
    model = copy.deepcopy(text)
    rows = producer(model, "/block1/attn/Concat_4_output_0")
    rows.input[1], rows.input[2] = rows.input[2], rows.input[1]
    masks["mask-on-queries"] = model
    model = copy.deepcopy(text)
    target = producer(model, "/block1/attn/Concat_3_output_0")
    target.input[0], target.input[1] = target.input[1], target.input[0]
    for output in ("/block1/attn/Constant_15_output_0", "/block1/attn/Constant_17_output_0"):
        set_constant(model, output, [2, -1, -1, -1])
    masks["mask-head-major"] = model
    for name, model in masks.items():
        path = work / (name + ".onnx")
        onnx.save(model, str(path))
        result = subprocess.run([train, "--net", str(path), "--dataset", "ids", "--data", str(work / "text-ids"), "--out", str(work / "bad.safetensors")],
                                capture_output=True, text=True)
        lines = result.stderr.strip().splitlines()
        if result.returncode != 1 or len(lines) != 1 or "computes other outputs than the model" not in lines[0]:
            failures += 1
            print(f"{name}: exit {result.returncode}, {lines}; wanted it refused as computing other outputs")
    print(f"{len(edits) + len(masks)} attentions that differ from nn.MultiheadAttention refused")
    return failures


def refusals(train, mnist, work):
    """Models glnet runs but cannot train, each refused in one line naming the node and what is wrong."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    def model(nodes, initializers, name):
        graph = helper.make_graph(nodes, "bad", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 1, 28, 28])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                                  [numpy_helper.from_array(np.ones(shape, np.float32), k) for k, shape in initializers.items()])
        path = work / (name + ".onnx")
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
        return path

    conv = {"w": (4, 1, 3, 3), "b": (4,)}
    cases = [
        (model([helper.make_node("Conv", ["x", "w", "b"], ["y"], name="c", dilations=[2, 2])], conv, "dilated"),
         "node 'c' (Conv): dilated windows are not supported for training"),
        (model([helper.make_node("Conv", ["x", "w", "b"], ["y"], name="c", pads=[1, 1, 0, 0])], conv, "uneven"),
         "node 'c' (Conv): glnet trains one stride and one padding on every side"),
        (model([helper.make_node("Conv", ["x", "w", "b"], ["y"], name="c", kernel_shape=[3, 3])], {"w": (4, 1, 3, 2), "b": (4,)}, "oblong"),
         "node 'c' (Conv): the weight [4, 1, 3, 2] does not match kernel_shape"),
        (model([helper.make_node("Flatten", ["x"], ["f"], name="f"), helper.make_node("Gemm", ["f", "w", "b"], ["y"], name="g", alpha=2.0)],
               {"w": (10, 784), "b": (10,)}, "alpha"), "node 'g' (Gemm): glnet trains Gemm as PyTorch's Linear exports it"),
        (model([helper.make_node("Concat", ["x", "x"], ["y"], name="j", axis=2)], {}, "axis"),
         "node 'j' (Concat): glnet trains concatenations of channels (axis 1)"),
        (model([helper.make_node("AveragePool", ["x"], ["y"], name="p", kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1)], {},
               "counted"), "node 'p' (AveragePool): glnet's average pooling leaves padding out"),
        (model([helper.make_node("Add", ["x", "w"], ["y"], name="a")], {"w": (1, 1, 28, 28)}, "constant"),
         "node 'a' (Add): input 1 is a constant where glnet trains on computed tensors"),
        (model([helper.make_node("Relu", ["x"], ["y"], name="s"), helper.make_node("Relu", ["x"], ["r"], name="r")], {}, "dead"),
         "the output y is not what the last node computes"),
    ]
    failures = 0
    for path, wanted in cases:
        result = subprocess.run([train, "--net", str(path), "--data", mnist, "--out", str(work / "bad.safetensors")], capture_output=True, text=True)
        lines = result.stderr.strip().splitlines()
        if result.returncode != 1 or len(lines) != 1 or wanted not in lines[0]:
            failures += 1
            print(f"{path.name}: exit {result.returncode}, {lines}; wanted one line with {wanted!r}")
    print(f"{len(cases)} untrainable models refused")
    return failures


if __name__ == "__main__":
    main(*sys.argv[1:])
