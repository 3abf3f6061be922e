"""The Python package against the engine's commands and float64 references, under the API of GLNET_API
(ctest runs this file once per API). The environment gives GLNET_TEST_APPS (the glnet_* commands) and
GLNET_TEST_MNIST (MNIST's IDX files)."""
import gc
import inspect
import io
import json
import os
import re
import subprocess
import sys
import textwrap
import threading

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import glnet

APPS = os.environ["GLNET_TEST_APPS"]
MNIST = os.environ["GLNET_TEST_MNIST"]
RNG = np.random.default_rng(int(os.environ.get("GLNET_TEST_SEED", "11")))


def weights(*shape):
    return (RNG.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))).astype(np.float32)


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("glnet")


@pytest.fixture(scope="module")
def cnn(work):
    """A small CNN with a dynamic batch (Conv, Relu, MaxPool, Flatten, Gemm) and its float64 forward pass."""
    c1, cb1, f1, fb1 = weights(4, 1, 3, 3), weights(4), weights(7, 4 * 5 * 5), weights(7)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "c1", "cb1"], ["a"], name="/conv/Conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["a"], ["b"], name="/relu/Relu"),
         helper.make_node("MaxPool", ["b"], ["c"], name="/pool/MaxPool", kernel_shape=[2, 2], strides=[2, 2]),
         helper.make_node("Flatten", ["c"], ["d"], name="/flatten/Flatten", axis=1),
         helper.make_node("Gemm", ["d", "f1", "fb1"], ["y"], name="/fc/Gemm", transB=1)],
        "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 11, 11])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 7])],
        [numpy_helper.from_array(v, k) for k, v in {"c1": c1, "cb1": cb1, "f1": f1, "fb1": fb1}.items()])
    path = str(work / "cnn.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)

    def reference(x):
        x = x.astype(np.float64)
        padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        a = np.zeros((x.shape[0], 4, 11, 11))
        for i in range(11):
            for j in range(11):
                a[:, :, i, j] = np.einsum("nckl,ockl->no", padded[:, :, i:i + 3, j:j + 3], c1.astype(np.float64))
        b = np.maximum(a + cb1[None, :, None, None], 0)[:, :, :10, :10]
        c = b.reshape(x.shape[0], 4, 5, 2, 5, 2).max(axis=(3, 5)).reshape(x.shape[0], -1)
        return c @ f1.T.astype(np.float64) + fb1

    return path, reference


@pytest.fixture(scope="module")
def two_ports(work):
    """Two inputs and two outputs: y = a + b (b broadcast), z = relu(y) * a."""
    graph = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["y"], name="/add"), helper.make_node("Relu", ["y"], ["r"], name="/relu"),
         helper.make_node("Mul", ["r", "a"], ["z"], name="/mul")],
        "two", [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 3]), helper.make_tensor_value_info("b", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3]), helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", 3])])
    path = str(work / "two.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.fixture(scope="module")
def mlp(work):
    """A 784-24-10 MLP trained for one short epoch by glnet_train."""
    path = str(work / "mlp.safetensors")
    subprocess.run([os.path.join(APPS, "glnet_train"), "--arch", "784-24-10", "--epochs", "1", "--train-limit", "2000",
                    "--test-limit", "500", "--data", MNIST, "--out", path], check=True, stdout=subprocess.DEVNULL)
    return path


def test_devices_lists_the_chosen_device():
    devices = glnet.devices()
    chosen = [d for d in devices if d["chosen"]]
    assert len(chosen) == 1 and chosen[0]["usable"] and chosen[0]["renderer"], devices
    assert chosen[0]["api"] == os.environ.get("GLNET_API", "gl")
    assert set(chosen[0]["apis"]) == {"gl", "gles"} and chosen[0]["apis"][chosen[0]["api"]]["usable"], chosen[0]


def test_onnx_model_matches_float64_at_several_batches(cnn):
    path, reference = cnn
    model = glnet.load(path)
    assert isinstance(model, glnet.Model)
    assert model.inputs == [("x", (None, 1, 11, 11))] and model.outputs == [("y", (None, 7))]
    for batch in (1, 5, 2, 5):
        x = RNG.standard_normal((batch, 1, 11, 11)).astype(np.float32)
        y = model(x)
        assert y.dtype == np.float32 and y.shape == (batch, 7) and y.flags.owndata
        np.testing.assert_allclose(y, reference(x), rtol=1e-4, atol=1e-5)  # float32 sums of at most 100 products


def test_results_equal_glnet_run_bit_for_bit(cnn, work):
    path, _ = cnn
    x = RNG.standard_normal((3, 1, 11, 11)).astype(np.float32)
    np.save(work / "x.npy", x)
    subprocess.run([os.path.join(APPS, "glnet_run"), "--model", path, "--input", str(work / "x.npy"), "--output", str(work / "y.npy")],
                   check=True, stdout=subprocess.DEVNULL)
    assert np.array_equal(glnet.load(path)(x), np.load(work / "y.npy"))


def test_several_inputs_and_outputs_by_name_and_position(two_ports):
    model = glnet.load(two_ports)
    a, b = RNG.standard_normal((4, 3)).astype(np.float32), RNG.standard_normal(3).astype(np.float32)
    y, z = a + b, np.maximum(a + b, 0) * a
    for out in (model(a, b), model(b=b, a=a), model({"a": a, "b": b})):
        assert sorted(out) == ["y", "z"]
        np.testing.assert_allclose(out["y"], y, rtol=1e-6)
        np.testing.assert_allclose(out["z"], z, rtol=1e-6)


def test_inputs_are_converted_once_or_refused(cnn):
    path, reference = cnn
    model = glnet.load(path)
    x = RNG.standard_normal((2, 1, 11, 11))
    np.testing.assert_allclose(model(x), reference(x.astype(np.float32)), rtol=1e-4, atol=1e-5)  # float64 → float32
    strided = np.asarray(RNG.standard_normal((2, 1, 11, 22)), np.float32)[:, :, :, ::2]  # not C-contiguous
    np.testing.assert_allclose(model(strided), reference(strided), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match=r"input x must be float32 \[N, 1, 11, 11\], not int64"):
        model(np.zeros((2, 1, 11, 11), np.int64))
    with pytest.raises(glnet.UsageError, match=r"input x must be \[N, 1, 11, 11\], not \[2, 11, 11\]"):
        model(np.zeros((2, 11, 11), np.float32))
    with pytest.raises(glnet.UsageError, match="the model has no input images"):
        model(images=np.zeros((1, 1, 11, 11), np.float32))
    with pytest.raises(glnet.UsageError, match="takes 1 input"):
        model(np.zeros((1, 1, 11, 11), np.float32), np.zeros(1, np.float32))


def test_uint8_inputs_of_a_model_that_converts_its_pixels(work):
    # x uint8 [N, 3] -> Cast to float -> Div by 255: the model's own preprocessing.
    graph = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["f"], name="/cast", to=TensorProto.FLOAT), helper.make_node("Div", ["f", "scale"], ["y"], name="/div")],
        "bytes", [helper.make_tensor_value_info("x", TensorProto.UINT8, ["N", 3])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
        [numpy_helper.from_array(np.array([255.0], np.float32), "scale")])
    path = str(work / "bytes.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    model = glnet.load(path)
    assert model.input_dtypes == ["uint8"]
    x = RNG.integers(0, 256, (4, 3), dtype=np.uint8)
    np.testing.assert_allclose(model(x), x / np.float32(255), rtol=1e-6)
    with pytest.raises(glnet.UsageError, match=r"input x must be uint8 \[N, 3\] \(the model converts its pixels\), not float32"):
        model(x.astype(np.float32))


def test_token_ids_and_masks_at_any_sequence_length(work):
    # ids int64 and mask bool, both [batch, sequence]: y = ids · mask + 0.5, one plan per shape.
    graph = helper.make_graph(
        [helper.make_node("Cast", ["ids"], ["f"], name="/ids", to=TensorProto.FLOAT), helper.make_node("Cast", ["mask"], ["m"], name="/mask", to=TensorProto.FLOAT),
         helper.make_node("Mul", ["f", "m"], ["p"], name="/mul"), helper.make_node("Add", ["p", "half"], ["y"], name="/add")],
        "tokens", [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "sequence"]),
                   helper.make_tensor_value_info("mask", TensorProto.BOOL, ["batch", "sequence"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "sequence"])], [numpy_helper.from_array(np.array(0.5, np.float32), "half")])
    path = str(work / "tokens.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    model = glnet.load(path)
    assert model.input_dtypes == ["int64", "bool"]
    assert model.inputs == [("ids", (None, None)), ("mask", (None, None))] and model.outputs == [("y", (None, None))]
    for shape in (2, 7), (1, 12), (3, 1):
        ids, mask = RNG.integers(-1000, 1000, shape), RNG.integers(0, 2, shape).astype(bool)
        np.testing.assert_array_equal(model(ids, mask), ids * mask + 0.5)
        np.testing.assert_array_equal(model(ids.astype(np.int32), mask.astype(np.int64)), ids * mask + 0.5)
    with pytest.raises(glnet.UsageError, match=r"input ids holds integers beyond ±16777216"):
        model(np.full((1, 3), 1 << 25), np.ones((1, 3), bool))
    with pytest.raises(glnet.UsageError, match=r"input ids must be int64 \[N, N\], not float32"):
        model(np.zeros((1, 3), np.float32), np.ones((1, 3), bool))
    with pytest.raises(glnet.UsageError, match=r"input mask is bool: its values must be 0 and 1"):
        model(np.zeros((1, 3), np.int64), np.full((1, 3), 2))
    with pytest.raises(glnet.Error, match=r"input mask's dimension 1 \(sequence\) is 4, but another input's sequence is 3"):
        model(np.zeros((1, 3), np.int64), np.ones((1, 4), bool))


def test_errors_are_glnet_exceptions(work, cnn):
    # A missing file is also Python's FileNotFoundError, whatever reads it.
    for missing in ("no-such.onnx", "no-such.safetensors"):
        with pytest.raises(glnet.FileNotFoundError, match=f"{missing}: no such file$") as raised:
            glnet.load(str(work / missing))
        assert isinstance(raised.value, FileNotFoundError) and isinstance(raised.value, glnet.Error)
    with pytest.raises(FileNotFoundError, match="nowhere: no such directory"):
        glnet.read_mnist(str(work / "nowhere"))
    (work / "garbage.onnx").write_bytes(b"\x08\x07not a model \xff\xff")
    with pytest.raises(glnet.Error):
        glnet.load(str(work / "garbage.onnx"))
    with pytest.raises(glnet.Error, match="no device matches 'no-such-gpu'"):
        glnet.load(cnn[0], device="no-such-gpu")
    with pytest.raises(glnet.UsageError, match="api is 'gl' or 'gles'"):
        glnet.load(cnn[0], api="vulkan")
    other = "gles" if os.environ.get("GLNET_API", "gl") == "gl" else "gl"
    model = glnet.load(cnn[0])
    with pytest.raises(glnet.UsageError, match="one process uses one API"):
        glnet.load(cnn[0], api=other)
    del model
    assert issubclass(glnet.UsageError, ValueError) and issubclass(glnet.GpuError, glnet.Error)


def test_threads_share_a_model_without_mixing_results(cnn):
    path, reference = cnn
    model = glnet.load(path)
    inputs = [RNG.standard_normal((1 + t % 3, 1, 11, 11)).astype(np.float32) for t in range(6)]
    expected = [model(x) for x in inputs]
    failures = []

    def worker(t):
        try:
            for _ in range(15):
                if not np.array_equal(model(inputs[t]), expected[t]):
                    failures.append(t)
        except Exception as error:  # reported below, with the thread
            failures.append((t, error))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures


def test_the_gil_is_released_while_the_gpu_works(cnn):
    path, _ = cnn
    model = glnet.load(path)
    x = RNG.standard_normal((64, 1, 11, 11)).astype(np.float32)
    ticks = []
    stop = threading.Event()

    def counter():
        while not stop.is_set():
            ticks.append(1)

    thread = threading.Thread(target=counter)
    thread.start()
    try:
        before = len(ticks)
        for _ in range(20):
            model(x)
        during = len(ticks) - before
    finally:
        stop.set()
        thread.join()
    assert during > 0, "no Python thread ran while the model did"


def test_no_leak_after_1000_calls(cnn):
    path, _ = cnn
    model = glnet.load(path)
    x = RNG.standard_normal((2, 1, 11, 11)).astype(np.float32)
    model(x)
    gc.collect()
    references, objects = sys.getrefcount(x), len(gc.get_objects())
    for _ in range(1000):
        y = model(x)
    del y
    gc.collect()
    assert sys.getrefcount(x) == references
    assert len(gc.get_objects()) <= objects + 10
    assert sys.getrefcount(model(x)) == 2  # the caller's reference (the argument) alone


def test_classifier_predicts_as_glnet_predict(mlp):
    images, labels = glnet.read_mnist(MNIST, "test")
    assert images.shape == (10000, 28, 28) and images.dtype == np.uint8 and labels.shape == (10000,)
    classifier = glnet.load(mlp)
    assert isinstance(classifier, glnet.Classifier) and classifier.architecture == "784-24-10" and classifier.classes == 10
    predictions = classifier.predict(images[:300])
    assert predictions.classes.shape == (300,) and predictions.probabilities.shape == (300, 10)
    np.testing.assert_allclose(predictions.probabilities.sum(axis=1), 1, rtol=1e-5)
    assert np.array_equal(predictions.classes, predictions.probabilities.argmax(axis=1))
    assert (predictions.classes == labels[:300]).mean() > 0.7
    # The same classes as the command, which reads the same test images by index.
    out = subprocess.run([os.path.join(APPS, "glnet_predict"), "--model", mlp, "--data", MNIST, "--mnist-index", "0,1,2,3,4", "--json"],
                         check=True, capture_output=True, text=True).stdout
    command = json.loads(out)
    assert [entry["class"] for entry in command] == predictions.classes[:5].tolist()
    np.testing.assert_allclose([entry["probabilities"] for entry in command], predictions.probabilities[:5], rtol=1e-5, atol=1e-7)
    # A single image without its batch dimension, and flat rows.
    assert classifier.predict(images[7]).classes.tolist() == [predictions.classes[7]]
    assert np.array_equal(classifier.predict(images[:300].reshape(300, 784)).classes, predictions.classes)
    # The float64 forward pass of its weights gives the same probabilities.
    w = classifier.weights()
    x = (images[:300].reshape(300, 784) / 255.0 - classifier.input_mean) / classifier.input_std
    logits = np.maximum(x @ w["fc1.weight"].T.astype(np.float64) + w["fc1.bias"], 0) @ w["fc2.weight"].T.astype(np.float64) + w["fc2.bias"]
    expected = np.exp(logits - logits.max(axis=1, keepdims=True))
    np.testing.assert_allclose(predictions.probabilities, expected / expected.sum(axis=1, keepdims=True), rtol=1e-3, atol=1e-6)
    with pytest.raises(ValueError, match=r"uint8 pixels \[N, 784\]"):
        classifier.predict(images[:3].astype(np.float32))
    with pytest.raises(glnet.UsageError, match=r"images of 784 pixels \(\[N, 784\] or \[N, 28, 28\]\), not \[3, 27, 28\]$"):
        classifier.predict(np.zeros((3, 27, 28), np.uint8))


def test_save_safetensors_writes_a_pytorch_state_dict_that_glnet_and_pytorch_load(work):
    import torch  # python3-torch, as the README's "Models from PyTorch" uses it

    torch.manual_seed(3)
    model = torch.nn.Sequential(torch.nn.Linear(784, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))
    path = str(work / "torch.safetensors")
    glnet.save_safetensors(model.state_dict(), path, metadata={"input_mean": 0.1307, "input_std": "0.3081", "activation": "relu"})
    tensors, metadata = glnet.load_safetensors(path, metadata=True)
    assert metadata == {"input_mean": "0.1307", "input_std": "0.3081", "activation": "relu"}
    assert sorted(tensors) == sorted(model.state_dict())
    for name, value in model.state_dict().items():
        assert tensors[name].dtype == np.float32 and np.array_equal(tensors[name], value.numpy()), name
    # PyTorch takes it back, and glnet classifies with it as PyTorch does.
    again = torch.nn.Sequential(torch.nn.Linear(784, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))
    again.load_state_dict({name: torch.from_numpy(value) for name, value in glnet.load_safetensors(path).items()})
    images = RNG.integers(0, 256, (5, 28, 28), dtype=np.uint8)
    x = (torch.from_numpy(images.reshape(5, 784)).double() / 255 - 0.1307) / 0.3081
    expected = torch.softmax(again.double()(x), dim=1).detach().numpy()
    classifier = glnet.load(path)
    assert classifier.architecture == "784-32-10"
    np.testing.assert_allclose(classifier(images), expected, rtol=1e-4, atol=1e-6)
    # Other dtypes become float32: half and bfloat16 weights, float64 arrays, BatchNorm's int64 counter.
    mixed = {"half": torch.full((2,), 1.5, dtype=torch.float16), "brain": torch.full((3,), -2.0, dtype=torch.bfloat16),
             "wide": np.arange(4, dtype=np.float64).reshape(2, 2), **torch.nn.BatchNorm1d(4).state_dict()}
    glnet.save_safetensors(mixed, str(work / "mixed.safetensors"))
    back = glnet.load_safetensors(str(work / "mixed.safetensors"))
    assert back["half"].tolist() == [1.5, 1.5] and back["brain"].tolist() == [-2.0] * 3 and back["wide"].tolist() == [[0, 1], [2, 3]]
    assert back["num_batches_tracked"].shape == () and back["num_batches_tracked"] == 0
    torch.nn.BatchNorm1d(4).load_state_dict({k: torch.from_numpy(v) for k, v in back.items() if k in torch.nn.BatchNorm1d(4).state_dict()})
    with pytest.raises(glnet.UsageError, match="tensor w holds complex128"):
        glnet.save_safetensors({"w": np.zeros(2, np.complex128)}, str(work / "never.safetensors"))
    with pytest.raises(glnet.UsageError, match="other than __metadata__"):
        glnet.save_safetensors({"__metadata__": np.zeros(2)}, str(work / "never.safetensors"))
    assert not os.path.exists(work / "never.safetensors")


def test_bench_reports_the_split(cnn):
    report = glnet.bench(glnet.load(cnn[0]), batches=[1, 3], runs=2, warmup=1)
    assert sorted(report["batches"]) == [1, 3]
    for row in report["batches"].values():
        assert row["end_to_end_ms"]["median"] > 0 and row["gpu_ms"]["runs"] == 2
        assert {n["node"] for n in row["nodes"]} >= {"/fc/Gemm"} or len(row["nodes"]) >= 2, row["nodes"]
    with pytest.raises(glnet.UsageError, match="batch size must be a whole number"):
        glnet.bench(glnet.load(cnn[0]), batches=[0])


def test_train_reports_epochs_and_writes_the_model(work):
    out = str(work / "trained.safetensors")
    seen = []
    history = glnet.train("784-16-10", MNIST, 2, out=out, train_limit=1000, test_limit=200, on_epoch=seen.append)
    assert [e["epoch"] for e in history] == [1, 2] and seen == history
    assert 0.5 < history[-1]["test_accuracy"] <= 1
    assert os.path.exists(out) and os.path.exists(str(work / "trained.checkpoint.safetensors"))
    assert glnet.load(out).architecture == "784-16-10"
    with pytest.raises(glnet.UsageError, match="--arch|arch"):
        glnet.train("784-x-10", MNIST, 1, out=out)
    with pytest.raises(ZeroDivisionError):
        glnet.train("784-16-10", MNIST, 3, out=str(work / "stopped.safetensors"), train_limit=1000, test_limit=200,
                    on_epoch=lambda e: 1 / 0)
    assert glnet.load(str(work / "stopped.safetensors")).architecture == "784-16-10"  # epoch 1 was written


def test_train_shows_its_progress_as_the_command_does_unless_told_not_to(work, capsys, monkeypatch):
    out = str(work / "shown.safetensors")
    glnet.train("784-16-10", MNIST, 1, out=out, train_limit=500, test_limit=100)
    shown = capsys.readouterr()
    # Without a terminal: the first report at once (then one about every 8 s), an epoch line and the files written.
    assert re.search(r"^epoch 1/1  step \d+/7  loss \d+\.\d{4}  \d+ samples/s  ETA 0:\d\d$", shown.err, re.M), shown.err
    assert re.search(r"^epoch 1/1: train loss \d\.\d{4}, train accuracy .*%, test accuracy .*%, .* s \(\d+ samples/s\)$", shown.out, re.M), shown.out
    assert shown.out.endswith(f"wrote {out} (checkpoint {work / 'shown.checkpoint.safetensors'})\n"), shown.out

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    glnet.train("784-16-10", MNIST, 1, out=out, train_limit=500, test_limit=100)
    assert terminal.getvalue().startswith("\r\033[Kepoch 1/1  step ") and terminal.getvalue().endswith("\r\033[K"), terminal.getvalue()
    monkeypatch.undo()
    capsys.readouterr()
    glnet.train("784-16-10", MNIST, 1, out=out, train_limit=500, test_limit=100, progress=False)
    assert capsys.readouterr() == ("", "")


def test_errors_name_the_python_arguments_not_the_commands_flags(work):
    with pytest.raises(glnet.FileNotFoundError, match=r"run scripts/fetch-mnist \(it writes data/mnist\), or point data at a directory") as raised:
        glnet.train("784-16-10", str(work / "no-mnist"), 1, out=str(work / "never.safetensors"))
    assert "--" not in str(raised.value)
    (work / "flat" / "cats").mkdir(parents=True)
    with pytest.raises(glnet.Error, match=r"has no train/ and test/ folders; give val_fraction to hold out"):
        glnet.train("784-16-10", str(work / "flat"), 1, out=str(work / "never.safetensors"), dataset="folder")
    with pytest.raises(glnet.UsageError, match="^label_smoothing must be from 0 to below 1$"):
        glnet.train("784-16-10", MNIST, 1, out=str(work / "never.safetensors"), label_smoothing=1.5)


def test_num_classes_replaces_the_last_layer_for_other_classes(work):
    ten = str(work / "ten.safetensors")
    glnet.train("784-16-10", MNIST, 1, out=ten, train_limit=500, test_limit=100, progress=False)
    shapes = work / "shapes"
    subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "..", "reference", "make_datasets.py"), "folder", str(shapes)],
                   check=True)
    with pytest.raises(glnet.Error, match=r"3 class folders for a network of 10 classes; .*\(num_classes=3\)"):
        glnet.train("784-16-10", shapes, 1, out=str(work / "never.safetensors"), init=ten, dataset="folder", val_fraction=0.25,
                    progress=False)
    tuned = str(work / "tuned.safetensors")
    history = glnet.train("784-16-10", shapes, 1, out=tuned, init=ten, num_classes=3, dataset="folder", val_fraction=0.25,
                          progress=False)
    assert len(history) == 1
    before, after = glnet.load(ten).weights(), glnet.load(tuned).weights()
    assert glnet.load(tuned).classes == 3 and after["fc2.weight"].shape == (3, 16)
    assert after["fc1.weight"].shape == before["fc1.weight"].shape
    with pytest.raises(glnet.UsageError, match="num_classes must be a whole number of at least 1"):
        glnet.train("784-16-10", shapes, 1, out=tuned, init=ten, num_classes=0, dataset="folder", val_fraction=0.25)


def test_train_takes_a_network_description_and_the_built_in_networks(work):
    net = work / "net.json"
    net.write_text(json.dumps({"input": [1, 28, 28], "layers": [
        {"name": "c", "kind": "conv", "outputs": 4, "kernel": 3, "stride": 2}, {"name": "b", "kind": "batchnorm"},
        {"name": "r", "kind": "relu"}, {"name": "fc", "kind": "dense", "outputs": 10}]}))
    out = str(work / "described.safetensors")
    history = glnet.train(data=MNIST, epochs=1, out=out, net=net, train_limit=500, test_limit=200, lr=0.05)
    assert 0.3 < history[-1]["test_accuracy"] <= 1
    assert glnet.load(out).architecture == "net"
    assert glnet.train("lenet5", MNIST, 1, out=str(work / "lenet5.safetensors"), train_limit=200, test_limit=50)
    net.write_text('{"input": [1, 28, 28], "layers": [{"name": "c", "kind": "lstm"}]}')
    with pytest.raises(glnet.Error, match="layer 'c': \"kind\" must be one of"):
        glnet.train(out=out, net=net)


def test_train_takes_glnet_trains_options_and_fine_tunes_its_onnx_export(work):
    net = work / "branches.json"
    net.write_text(json.dumps({"input": [1, 28, 28], "layers": [
        {"name": "c", "kind": "conv", "outputs": 4, "kernel": 3, "stride": 2}, {"name": "b", "kind": "batchnorm"},
        {"name": "r", "kind": "relu"}, {"name": "d", "kind": "conv", "outputs": 4, "kernel": 3, "groups": 4},
        {"name": "j", "kind": "concat", "inputs": ["r", "d"]}, {"name": "p", "kind": "maxpool", "kernel": 2},
        {"name": "x", "kind": "dropout", "rate": 0.1}, {"name": "fc", "kind": "dense", "outputs": 10}]}))
    out, exported = str(work / "options.safetensors"), str(work / "options.onnx")
    history = glnet.train(data=MNIST, epochs=2, out=out, net=net, train_limit=500, test_limit=200, optimizer="momentum",
                          nesterov=True, lr=0.05, weight_decay=5e-4, clip_norm=5.0, schedule="onecycle", label_smoothing=0.1,
                          augment_shift=1, augment_flip=True, export_onnx=exported)
    assert 0.3 < history[-1]["test_accuracy"] <= 1
    # The checkpoint records the options by glnet_train's flags, so that glnet_train --resume continues the run.
    subprocess.run([os.path.join(APPS, "glnet_train"), "--resume", str(work / "options.checkpoint.safetensors"), "--epochs", "3",
                    "--out", out], check=True, capture_output=True)
    model = glnet.load(exported)
    assert [tuple(shape[1:]) for _, shape in model.inputs] == [(1, 28, 28)]
    assert [tuple(shape[1:]) for _, shape in model.outputs] == [(10,)]
    tuned = glnet.train(data=MNIST, epochs=1, out=str(work / "tuned.safetensors"), net=exported, train_limit=500, test_limit=200,
                        lr=0.01)
    assert tuned[-1]["test_accuracy"] > 0.3
    with pytest.raises(glnet.UsageError, match="^weight_decay must be from 0 to below 1"):
        glnet.train(out=out, net=net, weight_decay=2.0)
    with pytest.raises(glnet.UsageError, match="^nesterov needs the momentum optimizer"):
        glnet.train(out=out, net=net, nesterov=True)
    with pytest.raises(glnet.UsageError, match="the dataset is mnist, fashion, cifar10, folder, text or ids"):
        glnet.train(out=out, net=net, dataset="imagenet")


def test_train_refuses_a_progress_interval_outside_a_hundredth_of_a_second_to_a_day(work):
    for seconds in (0, -1, float("nan"), 0.009, 86401):
        with pytest.raises(glnet.UsageError, match="^progress_seconds is from 0.01 to 86400$"):
            glnet.train(out=str(work / "m.safetensors"), progress_seconds=seconds)


def test_train_tunes_its_step_first_when_asked_and_refuses_where_the_tuning_would_be_ignored(work, monkeypatch):
    # In a process of its own: a tuning changes the process's table of this device, which the other tests plan with.
    cache, out = work / "tuning-cache", str(work / "tuned.safetensors")
    script = textwrap.dedent(f"""
        import glnet
        history = glnet.train("784-16-10", {MNIST!r}, 1, out={out!r}, train_limit=256, test_limit=100, batch=64, tune=True,
                              progress=False)
        print(len(history))
        """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
                            env=dict(os.environ, GLNET_CACHE_DIR=str(cache), GLNET_TUNE="1"))
    assert result.returncode == 0 and result.stdout.strip() == "1", result
    tables = [name for name in os.listdir(cache) if name.startswith("gemm-tuning-")]
    # Its lines (none where the tuned step was not faster as a whole) under the table's header.
    assert len(tables) == 1 and (cache / tables[0]).read_text().startswith("# GEMM shape"), tables
    monkeypatch.setenv("GLNET_TUNE", "0")
    with pytest.raises(glnet.UsageError, match="tune.* with GLNET_TUNE=0: the tuning would be ignored"):
        glnet.train("784-16-10", MNIST, 1, out=str(work / "refused.safetensors"), tune=True)


def test_train_takes_the_commands_options_by_their_keyword_names_and_defaults():
    # The engine's one list of a run's options (glnet_train's flags) against glnet.train's signature: every keyword but
    # those of reporting and the device is one of them, with the command's default.
    options = {option["keyword"]: option for option in glnet._glnet.training_options()}
    front_end = {"on_epoch", "on_progress", "progress_seconds", "progress", "device", "api"}
    for name, parameter in inspect.signature(glnet.train).parameters.items():
        if name in front_end:
            continue
        default = parameter.default
        if name == "standardize":  # standardize=False is --no-standardize
            name, default = "no_standardize", not default
        assert name in options, f"glnet.train's {name} is no option of glnet_train"
        option = options[name]
        if name == "epochs":  # fewer by default in a notebook (3) than the command's 5
            continue
        if option["switch"]:
            assert default is False and option["default"] == "", name
        elif default in (None, inspect.Parameter.empty):
            assert option["default"] == "", name
        elif isinstance(default, str):
            assert default == option["default"], name
        else:
            assert default == float(option["default"]), name


def test_ctrl_c_stops_training_and_keeps_the_last_checkpoint(work):
    out = str(work / "interrupted.safetensors")
    script = textwrap.dedent(f"""
        import os, signal, threading, glnet
        def on_epoch(e):
            if e["epoch"] == 2:
                os.kill(os.getpid(), signal.SIGINT)
        try:
            glnet.train("784-16-10", {MNIST!r}, 1000, out={out!r}, train_limit=2000, test_limit=100, on_epoch=on_epoch,
                        progress_seconds=0.05, progress=False)
        except KeyboardInterrupt:
            print("interrupted")
        """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and result.stdout.strip() == "interrupted", result
    assert glnet.load(out).architecture == "784-16-10"
    # The checkpoint is whole, and glnet_train continues the run from it (one epoch more, its flags from the file).
    checkpoint = str(work / "interrupted.checkpoint.safetensors")
    with open(checkpoint, "rb") as file:
        header = json.loads(file.read(int.from_bytes(file.read(8), "little")))
    done = int(header["__metadata__"]["epochs_done"])
    assert done >= 2
    resumed = subprocess.run([os.path.join(APPS, "glnet_train"), "--resume", checkpoint, "--out", str(work / "resumed.safetensors"),
                              "--epochs", str(done + 1)], capture_output=True, text=True)
    assert resumed.returncode == 0 and f"resumed from {checkpoint} after epoch {done}" in resumed.stdout, resumed


def test_language_model_streams_what_glnet_generate_prints_and_gives_the_models_logits():
    folder = os.path.join(os.environ["GLNET_TINY_DECODERS"], "llama")
    model = glnet.load(folder)
    assert isinstance(model, glnet.LanguageModel)
    assert model.config["architecture"] == "LlamaForCausalLM" and model.config["weights"] == "fp32"
    expected = json.load(open(os.path.join(folder, "expected.json")))
    want = np.load(os.path.join(folder, "expected-logits.npy"))
    logits = model.logits(expected["prompt"])
    assert logits.dtype == np.float32 and logits.shape == want.shape
    assert np.max(np.abs(logits - want)) <= 1e-4 * np.max(np.abs(want))
    text = "".join(model.generate("The quick brown fox", max_new_tokens=12))
    answer = json.loads(subprocess.run([os.path.join(os.environ["GLNET_TEST_APPS"], "glnet_generate"), "--model", folder, "--prompt",
                                        "The quick brown fox", "--max-new-tokens", "12", "--json"],
                                       check=True, capture_output=True, text=True).stdout)
    assert text == answer["text"]
    assert model.last_stats["generated_ids"] == answer["generated_ids"]
    assert model.decode(model.encode("The quick brown fox")) == "The quick brown fox"
    # One generation at a time: a new one ends the one before.
    first = model.generate("one", max_new_tokens=8)
    model.generate("two", max_new_tokens=8)
    with pytest.raises(glnet.Error, match="replaced this generation"):
        next(first)
    with pytest.raises(glnet.UsageError, match="fp32, fp16 or bf16"):
        glnet.load(folder, weights="f8")
    with pytest.raises(glnet.UsageError, match="max_new_tokens must be a whole number"):
        model.generate("x", max_new_tokens=2**40)
    # Two threads on one model take turns on its device's thread: a generation streaming while logits() ends it is
    # refused with an error, never a crash.
    errors = []

    def stream():
        try:
            for _ in model.generate("The quick brown fox", max_new_tokens=40):
                pass
        except glnet.Error as error:
            errors.append(error)

    def score():
        for _ in range(5):
            model.logits(expected["prompt"])

    threads = [threading.Thread(target=stream), threading.Thread(target=score)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all("replaced this generation" in str(error) for error in errors)
