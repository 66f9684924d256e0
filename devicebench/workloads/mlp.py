"""``mlp``: a dense 784 -> 256 -> 256 -> 10 classifier — matmul-bound, no loops or convs."""

from __future__ import annotations

from typing import Any

import numpy as np

from devicebench.workloads.base import TrainData, Workload

INPUT_DIM = 784
HIDDEN = (256, 256)
CLASSES = 10
SAMPLES = 20_000
BATCH = 128
TRAIN_FACTOR = 3  # forward + backward ≈ 3x forward


def dense_flops(n_in: int, n_out: int) -> int:
    """``2·in·out`` for the matmul plus ``2·out`` for bias and activation."""
    return 2 * n_in * n_out + 2 * n_out


def forward_flops() -> int:
    widths = (INPUT_DIM, *HIDDEN, CLASSES)
    return sum(dense_flops(a, b) for a, b in zip(widths[:-1], widths[1:], strict=True))


def training_flops_per_sample() -> float:
    return float(TRAIN_FACTOR * forward_flops())


def make_data(seed: int) -> TrainData:
    """Class prototypes in 784-d plus Gaussian noise: learnable, but not trivially."""
    rng = np.random.default_rng(seed)
    prototypes = rng.standard_normal((CLASSES, INPUT_DIM), dtype=np.float32)
    y = rng.integers(0, CLASSES, size=SAMPLES).astype(np.int32)
    noise = rng.standard_normal((SAMPLES, INPUT_DIM), dtype=np.float32)
    x = (0.1 * prototypes[y] + noise).astype(np.float32)
    return TrainData(x=x, y=y, note=f"synthetic {SAMPLES}x{INPUT_DIM} class prototypes + noise")


def build_model(keras: Any) -> Any:
    layers = [keras.Input(shape=(INPUT_DIM,))]
    layers += [keras.layers.Dense(units, activation="relu") for units in HIDDEN]
    layers.append(keras.layers.Dense(CLASSES, activation="softmax"))
    return keras.Sequential(layers, name="mlp")


def optimizer(keras: Any) -> Any:
    return keras.optimizers.Adam()


WORKLOAD = Workload(
    name="mlp",
    description="Dense MLP 784-256-256-10 (relu, softmax) on synthetic 784-d vectors",
    build_model=build_model,
    make_data=make_data,
    loss="sparse_categorical_crossentropy",
    optimizer=optimizer,
    batch_size=BATCH,
    flops_per_sample=training_flops_per_sample(),
    params={
        "layers": "Dense(256, relu) - Dense(256, relu) - Dense(10, softmax)",
        "input": "(784,) float32",
        "classes": CLASSES,
        "samples": SAMPLES,
        "batch_size": BATCH,
        "optimizer": "Adam()",
        "loss": "sparse_categorical_crossentropy",
        "metrics": "accuracy",
        "data": "synthetic class prototypes + Gaussian noise, seeded",
    },
    metrics=("accuracy",),
    default_seed=0,
)
