"""``mnist-cnn``: seed 001 exactly — Conv2D(32, 3) – MaxPooling2D – Flatten – Dense(10).

Real MNIST when it is already in the Keras cache (never downloaded: a benchmark must not
depend on the network); otherwise seeded synthetic digits of the same shape, and
``TrainData.note`` says which.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from devicebench.workloads.base import TrainData, Workload

SIDE = 28
FILTERS = 32
KERNEL = 3
POOL = 2
CLASSES = 10
SAMPLES = 60_000
BATCH = 256
TRAIN_FACTOR = 3  # forward + backward ≈ 3x forward

# Seven-segment strokes (x0, y0, x1, y1) in a 28x28 frame, and the segments of each digit.
_SEGMENTS = {
    "a": (9, 5, 18, 5),
    "b": (18, 5, 18, 13),
    "c": (18, 13, 18, 22),
    "d": (9, 22, 18, 22),
    "e": (9, 13, 9, 22),
    "f": (9, 5, 9, 13),
    "g": (9, 13, 18, 13),
}
_DIGITS = ("abcdef", "bc", "abged", "abgcd", "fgbc", "afgcd", "afgedc", "abc", "abcdefg", "abfgcd")
_MAX_SHIFT = 3  # random translation of up to ±3 pixels in x and y


def conv2d_flops(kernel: int, c_in: int, c_out: int, h_out: int, w_out: int) -> int:
    """``2·K·K·Cin·Cout·Hout·Wout`` (a multiply-add is 2 FLOPs)."""
    return 2 * kernel * kernel * c_in * c_out * h_out * w_out


def dense_flops(n_in: int, n_out: int) -> int:
    """``2·in·out``."""
    return 2 * n_in * n_out


def forward_flops() -> int:
    """Conv + bias/relu, 2x2 max-pool (1 per input element), dense + bias/softmax."""
    conv_side = SIDE - KERNEL + 1  # 26, "valid" padding
    conv_out = conv_side * conv_side * FILTERS
    pooled = (conv_side // POOL) ** 2 * FILTERS  # 13·13·32 = 5408
    return (
        conv2d_flops(KERNEL, 1, FILTERS, conv_side, conv_side)
        + 2 * conv_out  # bias + relu
        + conv_out  # max-pool compares
        + dense_flops(pooled, CLASSES)
        + 2 * CLASSES  # bias + softmax
    )


def training_flops_per_sample() -> float:
    return float(TRAIN_FACTOR * forward_flops())


def mnist_cache_path() -> Path:
    """Where ``keras.datasets.mnist.load_data()`` keeps its file (KERAS_HOME or ~/.keras)."""
    base = os.environ.get("KERAS_HOME") or os.path.expanduser(os.path.join("~", ".keras"))
    return Path(base) / "datasets" / "mnist.npz"


def _candidate_paths() -> list[Path]:
    primary = mnist_cache_path()
    paths = [primary]
    # Keras falls back to /tmp/.keras when its home is not writable.
    if not os.access(primary.parent.parent, os.W_OK):
        paths.append(Path("/tmp/.keras/datasets/mnist.npz"))
    return paths


def _load_real(path: Path) -> TrainData:
    with np.load(path, allow_pickle=False) as f:
        x_train, y_train = f["x_train"], f["y_train"]
    x = (x_train.reshape((-1, SIDE, SIDE, 1)).astype("float32") / 255).astype(np.float32)
    y = y_train.astype(np.int32)
    return TrainData(x=x, y=y, note=f"real MNIST from {path}")


def _render_segment(x0: float, y0: float, x1: float, y1: float) -> np.ndarray:
    """Anti-aliased stroke of half-width ~1.2 px."""
    yy, xx = np.mgrid[0:SIDE, 0:SIDE].astype(np.float64)
    dx, dy = x1 - x0, y1 - y0
    t = np.clip(((xx - x0) * dx + (yy - y0) * dy) / (dx * dx + dy * dy), 0.0, 1.0)
    dist = np.hypot(xx - (x0 + t * dx), yy - (y0 + t * dy))
    return np.clip(2.2 - dist, 0.0, 1.0)


def _template_bank() -> np.ndarray:
    """``(10, S, 28, 28)`` float32: each digit's strokes at every shift in ±_MAX_SHIFT."""
    digits = np.zeros((CLASSES, SIDE, SIDE))
    for k, segs in enumerate(_DIGITS):
        for s in segs:
            digits[k] = np.maximum(digits[k], _render_segment(*_SEGMENTS[s]))
    shifts = range(-_MAX_SHIFT, _MAX_SHIFT + 1)
    bank = [np.roll(digits, (dy, dx), axis=(1, 2)) for dy in shifts for dx in shifts]
    return np.stack(bank, axis=1).astype(np.float32)


def _make_synthetic(seed: int, samples: int = SAMPLES) -> TrainData:
    rng = np.random.default_rng(seed)
    bank = _template_bank()
    n_shifts = bank.shape[1]
    y = rng.integers(0, CLASSES, size=samples).astype(np.int32)
    shift = rng.integers(0, n_shifts, size=samples)
    x = np.empty((samples, SIDE, SIDE, 1), dtype=np.float32)
    chunk = 10_000
    for start in range(0, samples, chunk):
        stop = min(start + chunk, samples)
        n = stop - start
        intensity = rng.uniform(0.6, 1.0, size=(n, 1, 1)).astype(np.float32)
        noise = rng.random((n, SIDE, SIDE), dtype=np.float32)
        img = bank[y[start:stop], shift[start:stop]] * intensity + 0.35 * noise - 0.1
        np.clip(img, 0.0, 1.0, out=img)
        x[start:stop, ..., 0] = img
    note = f"synthetic {samples}x{SIDE}x{SIDE}x1 (MNIST not in the Keras cache)"
    return TrainData(x=x, y=y, note=note)


def make_data(seed: int) -> TrainData:
    for path in _candidate_paths():
        if path.is_file():
            return _load_real(path)
    return _make_synthetic(seed)


def build_model(keras: Any) -> Any:
    layers = keras.layers
    return keras.Sequential(
        [
            keras.Input(shape=(SIDE, SIDE, 1)),
            layers.Conv2D(FILTERS, KERNEL, activation="relu"),
            layers.MaxPooling2D(),
            layers.Flatten(),
            layers.Dense(CLASSES, activation="softmax"),
        ],
        name="mnist_cnn",
    )


def optimizer(keras: Any) -> Any:
    return keras.optimizers.Adam()  # the seed's optimizer='adam'


WORKLOAD = Workload(
    name="mnist-cnn",
    description="Seed 001: Conv2D(32,3)-MaxPool-Flatten-Dense(10) on MNIST (real if cached)",
    build_model=build_model,
    make_data=make_data,
    loss="sparse_categorical_crossentropy",
    optimizer=optimizer,
    batch_size=BATCH,
    flops_per_sample=training_flops_per_sample(),
    params={
        "layers": "Conv2D(32, 3, relu) - MaxPooling2D(2) - Flatten - Dense(10, softmax)",
        "input": "(28, 28, 1) float32 in [0, 1]",
        "classes": CLASSES,
        "samples": SAMPLES,
        "batch_size": BATCH,
        "optimizer": "Adam()",
        "loss": "sparse_categorical_crossentropy",
        "metrics": "accuracy",
        "data": "real MNIST if in the Keras cache (never downloaded), else synthetic digits",
    },
    metrics=("accuracy",),
    default_seed=0,
    epochs=5,  # seed 001's model.fit(..., epochs=5), timed whole; it does not validate
)
