"""glnet: neural networks on any GPU through OpenGL 4.3 compute shaders, from NumPy.

    import glnet, numpy as np
    print(glnet.devices())                                  # the EGL devices; which one is used
    model = glnet.load("resnet18.onnx")                     # an ONNX model, or a .safetensors classifier
    y = model(np.random.rand(8, 3, 224, 224).astype(np.float32))
    classes, probabilities = glnet.load("mnist.safetensors").predict(images_uint8)
    history = glnet.train(arch="cnn", data="data/mnist", epochs=3, out="cnn.safetensors")  # prints its progress
    glnet.bench(model, batches=[1, 64])                     # upload, GPU and readback per batch size

The engine is glnet's C++ one (the same plans the glnet_* commands run). Each device's GL work runs on a
thread of its own: calls from several Python threads are served one after another, with the GIL released
while the GPU works. Failures raise glnet.Error (glnet.UsageError, also a ValueError, for wrong arguments,
dtypes and shapes; glnet.FileNotFoundError, also a FileNotFoundError, for a missing file or directory;
glnet.GpuError when the GPU stops answering) with glnet's one-line message, which names options as the
keyword arguments of glnet.train.

The device and API come from the `device` and `api` arguments, else from GLNET_DEVICE and GLNET_API, else the
first hardware GPU (Mesa's llvmpipe where there is none) under desktop OpenGL. One process uses one API.
"""
from __future__ import annotations

import math
import os
from typing import Any, Callable, Dict, Iterator, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from . import _glnet
from ._glnet import Error, FileNotFoundError, GpuError, UsageError

__version__: str = _glnet.version
__all__ = ["devices", "load", "Model", "Classifier", "LanguageModel", "Predictions", "train", "bench", "read_mnist", "save_safetensors",
           "load_safetensors",
           "Error", "UsageError", "FileNotFoundError", "GpuError", "__version__"]

Shape = Tuple[Optional[int], ...]


def devices(api: Optional[str] = None) -> List[Dict[str, Any]]:
    """The EGL devices of this machine, each a dict: index, renderer, vendor, platform, software, usable,
    problem (why it cannot run glnet), chosen (the one glnet uses), api (the API in use on the chosen one)
    and apis (per API, "gl" and "gles": version, shading_language, usable, problem)."""
    return _glnet.devices(_api_name(api))


def load(path: Union[str, os.PathLike], device: Optional[Union[int, str]] = None,
         api: Optional[str] = None, max_context: int = 0, weights: Optional[str] = None) -> Union["Model", "Classifier", "LanguageModel"]:
    """Loads a model onto the GPU: an ONNX file (.onnx) as a Model, a safetensors classifier (an MLP or the
    MNIST CNN that glnet_train writes, or a PyTorch state_dict with the same names) as a Classifier, a Hugging Face
    language model folder (config.json, model.safetensors, tokenizer.json) as a LanguageModel.

    device: an index from devices() or part of a renderer's name; api: "gl" or "gles"; max_context: a language
    model's KV cache positions (0: the config's, at most 8192); weights: a language model's decode-step weights, "fp32",
    "fp16" or "bf16" (None: as the files store them)."""
    path = os.fspath(path)
    if os.path.isdir(path):
        return LanguageModel(path, device=device, api=api, max_context=max_context, weights=weights)
    if _glnet.is_onnx_path(path):
        return Model(path, device=device, api=api)
    return Classifier(path, device=device, api=api)


class LanguageModel:
    """A decoder language model from a Hugging Face folder on the GPU (GPT-2 and the Llama family), with its
    tokenizer. generate() streams text; logits() gives the model's output for token ids. One generation runs at a
    time: a new generate() (or logits()) ends the previous one, whose iterator then raises glnet.Error."""

    def __init__(self, path: Union[str, os.PathLike], device: Optional[Union[int, str]] = None,
                 api: Optional[str] = None, max_context: int = 0, weights: Optional[str] = None) -> None:
        self._handle = _glnet.LanguageModel(os.fspath(path), _device_name(device), _api_name(api),
                                            _count(max_context, "max_context", 0), weights or "")
        self.path: str = os.fspath(path)
        self.last_stats: Optional[Dict[str, Any]] = None

    @property
    def config(self) -> Dict[str, Any]:
        """architecture, layers, hidden, heads, kv_heads, vocabulary, context (the KV cache's positions) and weights
        (the decode step's storage: fp32, fp16 or bf16)."""
        return self._handle.config

    @property
    def device(self) -> Dict[str, Any]:
        """The device the model runs on: index, renderer, api, version."""
        return self._handle.device

    def encode(self, text: str) -> List[int]:
        """The token ids of `text`, special tokens added as the tokenizer's post-processor says (a Llama's BOS)."""
        return list(self._handle.encode(text))

    def decode(self, ids: Sequence[int]) -> str:
        return self._handle.decode([_count(i, "token id", 0, 2**32 - 1) for i in ids])

    def generate(self, prompt: str, max_new_tokens: int = 64, temperature: float = 0.0, top_k: int = 0,
                 top_p: float = 1.0, seed: int = 0, stop: Optional[Union[str, Sequence[str]]] = None) -> Iterator[str]:
        """Continues `prompt`, yielding text as it is generated (greedy at temperature 0; sampling with top_k,
        top_p and a seed otherwise, reproducible). Stops after max_new_tokens, at the config's end-of-text token, or
        before any `stop` text; then last_stats holds prompt_tokens, generated_ids, stop_reason and the speeds."""
        stops = [stop] if isinstance(stop, str) else list(stop or [])
        number = self._handle.start(prompt, _count(max_new_tokens, "max_new_tokens"), float(temperature),
                                    _count(top_k, "top_k", 0), float(top_p), _count(seed, "seed", 0, 2**63 - 1), stops)
        return self._pieces(number)

    def _pieces(self, number: int) -> Iterator[str]:
        while True:
            piece = self._handle.next(number)
            if piece is None:
                self.last_stats = self._handle.stats(number)
                return
            if piece:
                yield piece

    def logits(self, token_ids: Sequence[int]) -> np.ndarray:
        """The logits [len(token_ids), vocabulary] after each token, from position 0 (float32)."""
        return self._handle.logits([_count(i, "token id", 0, 2**32 - 1) for i in token_ids])

    def __repr__(self) -> str:
        return f"glnet.LanguageModel({self.path!r}, {self.config['architecture']})"


class Model:
    """An ONNX model on the GPU. Call it with NumPy arrays: model(x), model(a, b), model(a=..., b=...) or
    model({"a": ..., "b": ...}); one output comes back as an array, several as a dict by output name.

    Inputs are float32 [N, ...] arrays with the model's shape apart from its symbolic dimensions (None in
    `inputs`: a batch, a sequence length), which take the arrays' lengths; other floating dtypes are converted once,
    anything else is refused with a UsageError naming the expected dtype and shape. An input the model declares uint8
    (images it converts itself) takes uint8; one it declares int64 or int32 (token ids) takes integers, and bool
    (masks) takes booleans or integers 0 and 1: the GPU holds them as float32, exact up to 2**24, and larger ones are
    refused. Outputs are new float32 arrays the caller owns. Each set of input shapes is compiled once (the first call
    of a shape pays it) and its plan kept."""

    def __init__(self, path: Union[str, os.PathLike], device: Optional[Union[int, str]] = None,
                 api: Optional[str] = None) -> None:
        self._handle = _glnet.OnnxModel(os.fspath(path), _device_name(device), _api_name(api))
        self.path: str = os.fspath(path)

    @property
    def inputs(self) -> List[Tuple[str, Shape]]:
        """(name, shape) of every input, in the model's order; a symbolic dimension (batch, sequence) is None."""
        return [(name, tuple(shape)) for name, shape in self._handle.inputs]

    @property
    def input_dtypes(self) -> List[str]:
        """Per input, in the model's order: "float32"; "uint8" where the model converts its pixels itself; "int64",
        "int32" or "bool" for token ids and masks."""
        return list(self._handle.input_dtypes)

    @property
    def outputs(self) -> List[Tuple[str, Shape]]:
        """(name, shape) of every output, in the model's order; a dimension that follows a symbolic input dimension
        is None."""
        return [(name, tuple(shape)) for name, shape in self._handle.outputs]

    @property
    def device(self) -> Dict[str, Any]:
        """The device the model runs on: index, renderer, api, version."""
        return self._handle.device

    def __call__(self, *args: Any, **kwargs: Any) -> Union[np.ndarray, Dict[str, np.ndarray]]:
        if len(args) == 1 and isinstance(args[0], dict) and not kwargs:
            named = dict(args[0])
        else:
            names = [name for name, _ in self.inputs]
            if len(args) > len(names):
                raise UsageError(f"the model takes {len(names)} input{'s' if len(names) > 1 else ''} "
                                 f"({', '.join(names)}), not {len(args)}")
            named = dict(zip(names, args))
            for name, value in kwargs.items():
                if name in named:
                    raise UsageError(f"input {name} given twice")
                named[name] = value
        outputs = self.run(named)
        return next(iter(outputs.values())) if len(outputs) == 1 else outputs

    def run(self, inputs: Dict[str, Any]) -> Dict[str, np.ndarray]:
        """Runs the model on inputs by name; returns every output by name."""
        expected = self.inputs
        unknown = sorted(set(inputs) - {name for name, _ in expected})
        if unknown:
            raise UsageError(f"the model has no input {unknown[0]}; its inputs are {', '.join(n for n, _ in expected)}")
        missing = [name for name, _ in expected if name not in inputs]
        if missing:
            raise UsageError(f"input {missing[0]} is missing; the model's inputs are {', '.join(n for n, _ in expected)}")
        arrays = [_INPUT_CONVERSIONS[dtype](inputs[name], name, shape) for (name, shape), dtype in zip(expected, self.input_dtypes)]
        for (name, shape), array in zip(expected, arrays):
            _check_shape(array, name, shape)
        results = self._handle.run(arrays, [list(array.shape) for array in arrays])
        return {name: result for (name, _), result in zip(self.outputs, results)}

    def bench(self, batches: Sequence[int] = (1, 64), runs: int = 20, warmup: int = 3) -> Dict[str, Any]:
        """Where the time goes per batch size, as glnet_bench --model prints it; see glnet.bench."""
        return bench(self, batches=batches, runs=runs, warmup=warmup)

    def __repr__(self) -> str:
        return f"glnet.Model({self.path!r}, inputs={self.inputs}, outputs={self.outputs})"


class Predictions(NamedTuple):
    """What a classifier says of N images: the class of each (int64 [N]) and every class's probability
    (float32 [N, classes])."""
    classes: np.ndarray
    probabilities: np.ndarray


class Classifier:
    """A classifier from safetensors (an MLP such as 784-128-10 or the MNIST CNN) on the GPU. It takes raw
    uint8 pixels, [N, 28, 28] or [N, 784] for MNIST (a single image without N too), and normalises them in a
    shader as it was trained to; images are classified 256 to a GPU batch."""

    def __init__(self, path: Union[str, os.PathLike], device: Optional[Union[int, str]] = None,
                 api: Optional[str] = None) -> None:
        self._handle = _glnet.Classifier(os.fspath(path), _device_name(device), _api_name(api))
        self.path: str = os.fspath(path)
        description = self._handle.description
        self.architecture: str = description["architecture"]
        self.activation: str = description["activation"]
        self.input_mean: float = description["input_mean"]
        self.input_std: float = description["input_std"]
        self.classes: int = self._handle.classes
        self.input_shape: Tuple[int, ...] = tuple(self._handle.input_shape)

    @property
    def device(self) -> Dict[str, Any]:
        """The device the classifier runs on: index, renderer, api, version."""
        return self._handle.device

    def predict(self, images: Any) -> Predictions:
        """Classifies uint8 images; returns Predictions(classes, probabilities)."""
        array = np.asarray(images)
        pixels = self._handle.inputs
        if array.dtype != np.uint8:
            raise UsageError(f"the classifier takes uint8 pixels [N, {pixels}] (0 to 255), not {array.dtype}; "
                             "for values in [0, 1]: (x * 255).round().astype(np.uint8)")
        if array.ndim >= 2 and math.prod(array.shape[1:]) == pixels:
            count = array.shape[0]
        elif array.size == pixels:
            count = 1
        else:
            raise UsageError(f"the classifier takes uint8 images of {pixels} pixels ({' or '.join(self._image_forms())}), "
                             f"not {list(array.shape)}")
        if count == 0:
            raise UsageError("there are no images to classify")
        classes, probabilities = self._handle.predict(np.ascontiguousarray(array).reshape(count, pixels))
        return Predictions(classes, probabilities)

    def _image_forms(self) -> List[str]:
        """The shapes predict takes, as its errors list them: flat rows, and images as they come (an MLP's inputs as a
        square gray image, [1, H, W] as [H, W])."""
        pixels, shape = self._handle.inputs, list(self.input_shape)
        side = math.isqrt(pixels)
        if len(shape) == 1 and side * side == pixels:
            shape = [side, side]
        elif len(shape) == 3 and shape[0] == 1:
            shape = shape[1:]
        forms = [[pixels], shape]
        return [_describe((None, *form)) for i, form in enumerate(forms) if form not in forms[:i]]

    def __call__(self, images: Any) -> np.ndarray:
        """The probabilities of predict(images)."""
        return self.predict(images).probabilities

    def weights(self) -> Dict[str, np.ndarray]:
        """The parameters by PyTorch's names (fc1.weight [out, in], fc1.bias, conv1.weight ...), as new arrays."""
        return self._handle.weights()

    def __repr__(self) -> str:
        return f"glnet.Classifier({self.path!r}, architecture={self.architecture!r}, classes={self.classes})"


# glnet.train's own arguments: how it reports and where it runs; the rest are the run's options.
_TRAIN_FRONT_END = frozenset({"on_epoch", "on_progress", "progress_seconds", "progress", "device", "api"})


def train(arch: str = "784-128-10", data: Optional[Union[str, os.PathLike]] = None, epochs: int = 3, *,
          out: Union[str, os.PathLike], net: Optional[Union[str, os.PathLike]] = None,
          init: Optional[Union[str, os.PathLike]] = None, num_classes: Optional[int] = None, dataset: str = "mnist",
          size: Optional[int] = None, tokenizer: Optional[Union[str, os.PathLike]] = None, pad_id: Optional[int] = None,
          val_fraction: Optional[float] = None, batch: int = 64, lr: float = 0.1, optimizer: str = "sgd",
          weight_decay: float = 0.0, nesterov: bool = False, clip_norm: float = 0.0, schedule: str = "constant",
          warmup_epochs: float = 0.0, step_epochs: float = 30.0, step_gamma: float = 0.1, label_smoothing: float = 0.0,
          augment_shift: int = 0, augment_flip: bool = False,
          activation: str = "relu", seed: int = 0, train_limit: Optional[int] = None, test_limit: Optional[int] = None,
          standardize: bool = True, checkpoint: Optional[Union[str, os.PathLike]] = None,
          export_onnx: Optional[Union[str, os.PathLike]] = None, tune: bool = False,
          on_epoch: Optional[Callable[[Dict[str, Any]], Any]] = None,
          on_progress: Optional[Callable[[Dict[str, Any]], Any]] = None, progress_seconds: float = 1.0,
          progress: bool = True, device: Optional[Union[int, str]] = None,
          api: Optional[str] = None) -> List[Dict[str, Any]]:
    """Trains as glnet_train does, with its options by the same names (README: Your own network and data): an MLP
    ("784-128-10"), the MNIST CNN ("cnn"), a built-in description ("lenet5", "resnet8"), the network description file
    `net`, or an ONNX model `net` ("model.onnx") fine-tuned from its weights; `init` starts from a safetensors file's
    weights; `num_classes` replaces the last layer by a freshly initialised one for that many classes, keeping every
    other weight (fine-tuning for other classes). Data: `dataset` "mnist" or "fashion" (IDX files in `data`; default data/mnist or Debian's Fashion-MNIST),
    "cifar10" (its binary files in `data`) or "folder" (one sub-folder of images per class under `data`, resized to
    `size`, split by train/ and test/ or `val_fraction`), resident on the GPU, each step one recorded plan; for a
    network whose embedding layer reads token ids, "text" (data/train.jsonl and test.jsonl, {"text": ..., "label": ...}
    a line, tokenized with the tokenizer.json `tokenizer`, short texts padded with `pad_id` or the network's mask layer's)
    or "ids" (data/train-ids.npy [count, positions], train-labels.npy and the same for test).
    Optimizer: "sgd", "momentum" (with `nesterov`), "adam" or "adamw"; `weight_decay` (weights only), `clip_norm`;
    `schedule` "constant", "cosine", "step" (`step_epochs`, `step_gamma`) or "onecycle", after `warmup_epochs`;
    `label_smoothing`; augmentation on the GPU: `augment_shift` pixels, `augment_flip`. After each epoch the model is
    written to `out` (and as ONNX to `export_onnx`) and a checkpoint beside it (or to `checkpoint`), each file replaced
    whole; glnet_train --resume continues it. `tune` first times the training step's GEMMs on this device under every
    configuration and keeps the fastest in its tuning cache, which later runs read (glnet_train --tune; minutes on a
    large network, without progress lines).

    progress (on by default) shows the run as glnet_train does: on sys.stderr a progress line (epoch, step, loss,
    samples/s, ETA), rewritten in place on a terminal and otherwise printed about every 8 seconds; on sys.stdout a
    line per epoch and the files written at the end. progress=False prints nothing.

    on_epoch gets a dict per epoch (epoch, train_loss, train_accuracy, test_accuracy, seconds,
    samples_per_second); on_progress about every progress_seconds (epoch, epochs, step, steps, loss,
    samples_per_second, eta_seconds). Both run on the calling thread; an exception in one stops training
    and is raised. Ctrl-C stops training within about progress_seconds and raises KeyboardInterrupt; the
    model and checkpoint of the last finished epoch stay intact. Returns the epochs' dicts."""
    # Every other argument is one of glnet_train's options by its keyword name (_glnet.training_options, the engine's
    # one list of them): the engine reads and checks them as the command reads its flags. None and False leave one out.
    options = {name: value for name, value in locals().items() if name not in _TRAIN_FRONT_END}
    options["no_standardize"] = not standardize
    options.pop("standardize")
    for name in ("out", "data", "net", "init", "checkpoint", "export_onnx", "tokenizer"):
        options[name] = os.fspath(options[name]) if options[name] is not None else None
    for name in ("num_classes", "size", "train_limit", "test_limit"):
        options[name] = _count(options[name], name) if options[name] is not None else None
    if val_fraction is not None and not (0 < float(val_fraction) < 1):
        raise UsageError("val_fraction must be between 0 and 1")
    options["epochs"], options["batch"] = _count(epochs, "epochs"), _count(batch, "batch")
    options["seed"], options["augment_shift"] = _count(seed, "seed", 0), _count(augment_shift, "augment_shift", 0)
    options["pad_id"] = _count(pad_id, "pad_id", 0) if pad_id is not None else None
    for name in ("lr", "weight_decay", "clip_norm", "warmup_epochs", "step_epochs", "step_gamma", "label_smoothing", "val_fraction"):
        options[name] = float(options[name]) if options[name] is not None else None
    for name in ("nesterov", "augment_flip", "tune"):
        options[name] = bool(options[name])
    return _glnet.train(options, on_epoch, on_progress, float(progress_seconds), bool(progress), _device_name(device), _api_name(api))


def bench(model: Model, batches: Sequence[int] = (1, 64), runs: int = 20, warmup: int = 3) -> Dict[str, Any]:
    """The split glnet_bench --model prints, as a dict: device, model, and per batch size (a dict keyed by
    it) compile_ms, upload_ms, issue_ms, readback_ms, end_to_end_ms and gpu_ms (each median, p10, p90,
    runs), dispatches, activation_bytes and nodes (every node's GPU time, slowest first). Inputs are
    uniform random in [0, 1)."""
    if not isinstance(model, Model):
        raise UsageError(f"glnet.bench measures a glnet.Model (an ONNX model), not {type(model).__name__}")
    sizes = [_count(b, "batch size") for b in batches]
    if not sizes:
        raise UsageError("batches: give at least one batch size")
    return model._handle.bench(sizes, _count(runs, "runs"), _count(warmup, "warmup", 0))


def read_mnist(directory: Union[str, os.PathLike] = "data/mnist", split: str = "test") -> Tuple[np.ndarray, np.ndarray]:
    """MNIST-format IDX files (plain or .gz) as (images uint8 [N, 28, 28], labels uint8 [N]); split is
    "train" or "test". scripts/fetch-mnist puts MNIST in data/mnist."""
    return _glnet.read_mnist(os.fspath(directory), split)


def save_safetensors(state_dict: Mapping[str, Any], path: Union[str, os.PathLike],
                     metadata: Optional[Mapping[str, Any]] = None) -> None:
    """Writes a PyTorch state_dict (or any mapping of names to tensors or NumPy arrays) as safetensors, the file
    glnet's classifiers load, without the safetensors package: names and layouts as given (PyTorch's fc1.weight
    [out, in], conv1.weight [out_c, in_c, kh, kw]), every tensor as float32 (float16, bfloat16 and float64 converted;
    integer counters such as BatchNorm's num_batches_tracked too, which load_state_dict converts back). metadata's
    values are written as text: glnet reads input_mean, input_std and activation. The file is replaced whole;
    safetensors.torch.load_file and glnet.load_safetensors read it back."""
    tensors = {}
    for name, value in state_dict.items():
        if not isinstance(name, str) or name == "__metadata__":
            raise UsageError(f"tensor names are strings other than __metadata__, not {name!r}")
        if hasattr(value, "detach") and hasattr(value, "numpy"):  # a torch.Tensor, without importing torch
            value = value.detach().cpu().float().numpy()
        array = np.asarray(value)
        if array.dtype.kind not in "fiub":
            raise UsageError(f"tensor {name} holds {array.dtype}; safetensors for glnet hold numbers (written as float32)")
        tensors[name] = np.require(array, np.float32, "C")  # keeps a 0-d tensor 0-d, as ascontiguousarray would not
    texts = {}
    for key, value in (metadata or {}).items():
        if not isinstance(key, str):
            raise UsageError(f"metadata keys are strings, not {key!r}")
        texts[key] = value if isinstance(value, str) else str(value)
    _glnet.save_safetensors(tensors, os.fspath(path), texts)


def load_safetensors(path: Union[str, os.PathLike], metadata: bool = False) -> Union[
        Dict[str, np.ndarray], Tuple[Dict[str, np.ndarray], Dict[str, str]]]:
    """A safetensors file's tensors by name as float32 arrays (F16 and F64 converted), checked as glnet checks every
    model file; with metadata=True, (tensors, its __metadata__). torch.from_numpy makes them tensors again."""
    tensors, texts = _glnet.load_safetensors(os.fspath(path))
    return (tensors, texts) if metadata else tensors


def _api_name(api: Optional[str]) -> str:
    if api is None:
        return ""
    if api not in ("gl", "gles"):
        raise UsageError(f"api is 'gl' or 'gles', not {api!r}")
    return api


def _device_name(device: Optional[Union[int, str]]) -> str:
    if device is None:
        return ""
    if isinstance(device, bool) or not isinstance(device, (int, str)):
        raise UsageError(f"device is an index or part of a renderer's name, not {device!r}")
    return str(device)


def _count(value: Any, what: str, minimum: int = 1, maximum: int = 2**31 - 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not minimum <= value <= maximum:
        raise UsageError(f"{what} must be a whole number of at least {minimum} and at most {maximum}, not {value!r}")
    return int(value)


def _describe(shape: Shape) -> str:
    return "[" + ", ".join("N" if size is None else str(size) for size in shape) + "]"


def _float32(value: Any, name: str, shape: Shape) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype == np.float32:
        return np.ascontiguousarray(array)
    if array.dtype.kind == "f":
        return np.ascontiguousarray(array, dtype=np.float32)
    raise UsageError(f"input {name} must be float32 {_describe(shape)}, not {array.dtype} {list(array.shape)}")


def _pixels(value: Any, name: str, shape: Shape) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype != np.uint8:
        raise UsageError(f"input {name} must be uint8 {_describe(shape)} (the model converts its pixels), not {array.dtype}")
    return np.ascontiguousarray(array, dtype=np.float32)


def _integers(value: Any, name: str, shape: Shape, dtype: str) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype.kind not in "iu" and not (dtype == "bool" and array.dtype == np.bool_):
        raise UsageError(f"input {name} must be {dtype} {_describe(shape)}, not {array.dtype} {list(array.shape)}")
    if dtype == "bool" and array.size and not np.isin(array, (0, 1)).all():
        raise UsageError(f"input {name} is bool: its values must be 0 and 1")
    largest = _glnet.largest_exact_integer
    if array.size and array.dtype.kind in "iu" and (array.max() > largest or array.min() < -largest):
        raise UsageError(f"input {name} holds integers beyond ±{largest} (glnet holds integers as float32, exact only up to that)")
    return np.ascontiguousarray(array, dtype=np.float32)


_INPUT_CONVERSIONS = {"float32": _float32, "uint8": _pixels,
                      "int64": lambda v, n, s: _integers(v, n, s, "int64"), "int32": lambda v, n, s: _integers(v, n, s, "int32"),
                      "bool": lambda v, n, s: _integers(v, n, s, "bool")}


def _check_shape(array: np.ndarray, name: str, shape: Shape) -> None:
    fits = array.ndim == len(shape) and all(size is None or size == got for size, got in zip(shape, array.shape))
    if not fits or 0 in array.shape:
        raise UsageError(f"input {name} must be {_describe(shape)}, not {list(array.shape)}")
