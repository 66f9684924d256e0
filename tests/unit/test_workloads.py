"""Built-in workloads: registry, data (shapes, determinism, seed 000 fidelity), FLOPs.

No deep-learning framework is imported here: workload modules are numpy-only.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from devicebench.errors import SpecError
from devicebench.workloads import BUILTIN_WORKLOADS, get_workload, workload_names
from devicebench.workloads.base import TrainData, Workload

NAMES = ["seed-rnn", "mnist-cnn", "lstm-forecast", "mlp", "small-resnet", "tiny-transformer"]

# name -> (x shape, x dtype, y shape, y dtype)
EXPECTED = {
    "seed-rnn": ((7000, 50, 1), np.float32, (7000, 1), np.float32),
    "mnist-cnn": ((60000, 28, 28, 1), np.float32, (60000,), np.int32),
    "lstm-forecast": ((4000, 30, 1), np.float32, (4000, 1), np.float32),
    "mlp": ((20000, 784), np.float32, (20000,), np.int32),
    "small-resnet": ((5000, 32, 32, 3), np.float32, (5000,), np.int32),
    "tiny-transformer": ((4000, 64), np.int32, (4000,), np.int32),
}


@pytest.fixture(autouse=True)
def no_mnist_cache(tmp_path, monkeypatch):
    """Point Keras' cache at an empty directory so mnist-cnn is synthetic (and seeded)."""
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras_home"))


def test_registry_has_the_six_builtin_workloads():
    assert workload_names() == NAMES
    assert sorted(BUILTIN_WORKLOADS) == sorted(NAMES)
    for name, wl in BUILTIN_WORKLOADS.items():
        assert isinstance(wl, Workload)
        assert wl.name == name
        assert get_workload(name) is wl
        assert wl.batch_size > 0
        assert wl.flops_per_sample and wl.flops_per_sample > 0
        assert wl.params["batch_size"] == wl.batch_size
        assert "samples" in wl.params and "layers" in wl.params


def test_unknown_workload_raises_spec_error_listing_the_names():
    with pytest.raises(SpecError) as info:
        get_workload("resnet-9000")
    message = str(info.value)
    assert "unknown workload 'resnet-9000'" in message
    for name in NAMES:
        assert name in message


def test_importing_workloads_imports_no_framework():
    # A fresh interpreter: the parent process lists workloads without any framework.
    code = (
        "import sys, devicebench.workloads as w; "
        "print(sorted(m for m in ('tensorflow', 'jax', 'torch', 'keras') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("name", NAMES)
def test_make_data_has_the_right_shapes_and_is_deterministic(name):
    wl = get_workload(name)
    first = wl.make_data(wl.default_seed)
    second = wl.make_data(wl.default_seed)
    assert isinstance(first, TrainData)
    x_shape, x_dtype, y_shape, y_dtype = EXPECTED[name]
    assert first.x.shape == x_shape and first.x.dtype == x_dtype
    assert first.y.shape == y_shape and first.y.dtype == y_dtype
    assert first.samples == x_shape[0]
    assert first.samples >= wl.batch_size
    np.testing.assert_array_equal(first.x, second.x)
    np.testing.assert_array_equal(first.y, second.y)
    assert first.note == second.note and first.note
    other = wl.make_data(wl.default_seed + 1)
    assert not np.array_equal(first.x, other.x)
    if first.x.dtype == np.float32:
        assert np.isfinite(first.x).all() and np.isfinite(first.y).all()


@pytest.mark.parametrize(
    ("name", "classes"),
    [("mnist-cnn", 10), ("mlp", 10), ("small-resnet", 10), ("tiny-transformer", 2)],
)
def test_classification_labels_cover_every_class(name, classes):
    data = get_workload(name).make_data(0)
    assert set(np.unique(data.y).tolist()) == set(range(classes))


def test_image_workloads_are_scaled_to_unit_range():
    for name in ("mnist-cnn", "small-resnet"):
        x = get_workload(name).make_data(0).x
        assert x.min() >= 0.0 and x.max() <= 1.0


def test_tiny_transformer_tokens_are_in_vocab_and_label_is_the_majority():
    from devicebench.workloads import tiny_transformer as tt

    data = get_workload("tiny-transformer").make_data(0)
    assert data.x.min() >= 0 and data.x.max() < tt.VOCAB
    pos = np.isin(data.x, list(tt.POSITIVE)).sum(axis=1)
    neg = np.isin(data.x, list(tt.NEGATIVE)).sum(axis=1)
    assert (pos != neg).all()
    np.testing.assert_array_equal(data.y, (pos > neg).astype(np.int32))


def _seed_000_generate_time_series(batch_size, n_steps):
    """Copied verbatim from seed 000 (uses the global np.random state)."""
    freq1, freq2, offsets1, offsets2 = np.random.rand(4, batch_size, 1)
    time = np.linspace(0, 1, n_steps)
    series = 0.5 * np.sin((time - offsets1) * (freq1 * 10 + 10))  # wave 1
    series += 0.2 * np.sin((time - offsets2) * (freq2 * 20 + 20))  # + wave 2
    series += 0.1 * (np.random.rand(batch_size, n_steps) - 0.5)  # + noise
    return series[..., np.newaxis].astype(np.float32)


def test_seed_rnn_data_is_exactly_seed_000s():
    state = np.random.get_state()
    try:
        np.random.seed(42)
        n_steps = 50
        series = _seed_000_generate_time_series(10000, n_steps + 1)
    finally:
        np.random.set_state(state)
    x_train, y_train = series[:7000, :n_steps], series[:7000, -1]

    wl = get_workload("seed-rnn")
    assert wl.default_seed == 42
    data = wl.make_data(wl.default_seed)
    np.testing.assert_array_equal(data.x, x_train)
    np.testing.assert_array_equal(data.y, y_train)
    assert "the forum script's generator" in data.note


def test_seed_rnn_settings_are_seed_000s():
    wl = get_workload("seed-rnn")
    assert wl.batch_size == 32
    assert wl.loss == "mse"
    assert wl.metrics == ()


def test_seed_rnn_flops_by_hand():
    # SimpleRNN(1) on 1 feature: per step 2*(D*U + U*U) matmul FLOPs + 2*U bias/tanh,
    # 50 steps, training = 3x forward.
    d, u, steps = 1, 1, 50
    per_step = 2 * (d * u + u * u) + 2 * u
    assert get_workload("seed-rnn").flops_per_sample == steps * per_step * 3 == 900
    assert get_workload("seed-rnn").flops_per_step() == 900 * 32


def test_mnist_cnn_flops_by_hand():
    conv = 2 * 3 * 3 * 1 * 32 * 26 * 26  # 389,376
    conv_bias_relu_pool = 3 * 26 * 26 * 32
    dense = 2 * 13 * 13 * 32 * 10 + 2 * 10
    assert get_workload("mnist-cnn").flops_per_sample == 3 * (conv + conv_bias_relu_pool + dense)


def test_flops_order_of_magnitude_follows_the_model_size():
    f = {name: get_workload(name).flops_per_sample for name in NAMES}
    assert f["seed-rnn"] < f["lstm-forecast"] < f["mnist-cnn"] < f["small-resnet"]
    assert 1e7 < f["small-resnet"] < 1e9
    assert 1e6 < f["tiny-transformer"] < 1e8


def test_mnist_cnn_says_synthetic_when_not_in_the_keras_cache():
    data = get_workload("mnist-cnn").make_data(0)
    assert data.note == "synthetic 60000x28x28x1 (MNIST not in the Keras cache)"


def test_mnist_cnn_uses_real_mnist_from_the_keras_cache(tmp_path, monkeypatch):
    home = tmp_path / "cached_home"
    (home / "datasets").mkdir(parents=True)
    rng = np.random.default_rng(7)
    x_train = rng.integers(0, 256, size=(100, 28, 28), dtype=np.uint8)
    x_train[0, 0, 0], x_train[0, 0, 1] = 0, 255
    y_train = rng.integers(0, 10, size=100, dtype=np.uint8)
    path = home / "datasets" / "mnist.npz"
    np.savez(path, x_train=x_train, y_train=y_train, x_test=x_train[:10], y_test=y_train[:10])
    monkeypatch.setenv("KERAS_HOME", str(home))

    data = get_workload("mnist-cnn").make_data(0)
    assert data.note == f"real MNIST from {path}"
    assert data.x.shape == (100, 28, 28, 1) and data.x.dtype == np.float32
    assert data.x.min() == 0.0 and data.x.max() == 1.0
    np.testing.assert_allclose(data.x[..., 0], x_train.astype(np.float32) / 255)
    assert data.y.dtype == np.int32
    np.testing.assert_array_equal(data.y, y_train)


@pytest.mark.parametrize("extra,message", [
    ({"x_val": np.zeros((4, 8), "float32")}, "holds x_val but not its pair"),
    ({"epochs": np.array([5, 6])}, "epochs must be one integer >= 1"),
    ({"epochs": np.array(0)}, "epochs must be one integer >= 1"),
])
def test_a_saved_models_data_file_is_checked_before_any_worker(tmp_path, extra, message):
    from devicebench.errors import InputError
    from devicebench.workloads.saved import _load_arrays

    path = tmp_path / "d.npz"
    np.savez(path, x=np.zeros((4, 8), "float32"), y=np.zeros(4, "int32"), **extra)
    with pytest.raises(InputError, match=message):
        _load_arrays(path)
    np.savez(path, x=np.zeros((4, 8), "float32"), y=np.zeros(4, "int32"),
             x_val=np.ones((2, 8), "float32"), y_val=np.ones(2, "int32"), epochs=20)
    arrays = _load_arrays(path)
    assert arrays["epochs"] == 20 and arrays["validation"][0].shape == (2, 8)
