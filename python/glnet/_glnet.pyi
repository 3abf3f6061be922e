# Type stubs of glnet's C++ module; the package glnet wraps it (see glnet/__init__.py for the documented API).
import builtins
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

version: str

class Error(RuntimeError): ...
class UsageError(Error, ValueError): ...
class GpuError(Error): ...
class FileNotFoundError(Error, builtins.FileNotFoundError): ...

def devices(api: str = "") -> List[Dict[str, Any]]: ...
def read_mnist(directory: str, split: str) -> Tuple[np.ndarray, np.ndarray]: ...
def is_onnx_path(path: str) -> bool: ...

class OnnxModel:
    def __init__(self, path: str, device: str, api: str) -> None: ...
    @property
    def inputs(self) -> List[Tuple[str, Tuple[Optional[int], ...]]]: ...
    @property
    def outputs(self) -> List[Tuple[str, Tuple[Optional[int], ...]]]: ...
    @property
    def input_dtypes(self) -> List[str]: ...
    @property
    def device(self) -> Dict[str, Any]: ...
    def run(self, inputs: List[np.ndarray], batch: int) -> List[np.ndarray]: ...
    def bench(self, batches: List[int], runs: int, warmup: int) -> Dict[str, Any]: ...

class Classifier:
    def __init__(self, path: str, device: str, api: str) -> None: ...
    @property
    def inputs(self) -> int: ...
    @property
    def classes(self) -> int: ...
    @property
    def input_shape(self) -> List[int]: ...
    @property
    def description(self) -> Dict[str, Any]: ...
    @property
    def device(self) -> Dict[str, Any]: ...
    def weights(self) -> Dict[str, np.ndarray]: ...
    def predict(self, images: np.ndarray) -> Tuple[np.ndarray, np.ndarray]: ...

class TrainSettings:
    arch: str
    net: str
    activation: str
    data: str
    out: str
    checkpoint: str
    optimizer: str
    epochs: int
    batch: int
    seed: int
    lr: float
    train_limit: int
    test_limit: int
    standardize: bool
    device: str
    api: str
    init: str
    dataset: str
    export_onnx: str
    schedule: str
    size: int
    augment_shift: int
    weight_decay: float
    clip_norm: float
    warmup_epochs: float
    step_epochs: float
    step_gamma: float
    label_smoothing: float
    val_fraction: float
    nesterov: bool
    augment_flip: bool
    def __init__(self) -> None: ...

def train(settings: TrainSettings, on_epoch: Optional[Callable[[Dict[str, Any]], Any]],
          on_progress: Optional[Callable[[Dict[str, Any]], Any]], progress_seconds: float, progress: bool) -> List[Dict[str, Any]]: ...
