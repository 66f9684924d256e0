"""``lstm-forecast``: LSTM(32) -> Dense(1) predicting the next value of a multi-sine series.

A recurrent workload with enough work per timestep to show where cuDNN/fused kernels pay
off and where the per-step loop still dominates.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from devicebench.workloads.base import TrainData, Workload

SAMPLES = 4_000
TIMESTEPS = 30
INPUT_DIM = 1
UNITS = 32
WAVES = 3
BATCH = 64
LEARNING_RATE = 1e-3
TRAIN_FACTOR = 3  # forward + backward ≈ 3x forward


def lstm_flops(timesteps: int, input_dim: int, units: int) -> int:
    """Forward FLOPs of an LSTM per sample.

    Per step, 4 gates: ``2·4·(D·U + U·U)`` for the matmuls, plus ``13·U`` elementwise
    (4U bias, 4U gate activations, 3U for ``c = f·c + i·g``, 2U for ``h = o·tanh(c)``).
    """
    per_step = 2 * 4 * (input_dim * units + units * units) + 13 * units
    return timesteps * per_step


def dense_flops(n_in: int, n_out: int) -> int:
    """``2·in·out``."""
    return 2 * n_in * n_out


def training_flops_per_sample() -> float:
    forward = lstm_flops(TIMESTEPS, INPUT_DIM, UNITS) + dense_flops(UNITS, 1) + 1  # + bias
    return float(TRAIN_FACTOR * forward)


def make_data(seed: int) -> TrainData:
    """Sum of 3 sines with random frequency, phase and amplitude, plus noise."""
    rng = np.random.RandomState(seed)
    t = np.linspace(0.0, 1.0, TIMESTEPS + 1)
    freq = rng.uniform(2.0, 20.0, size=(SAMPLES, WAVES, 1))
    phase = rng.uniform(0.0, 2 * np.pi, size=(SAMPLES, WAVES, 1))
    amp = rng.uniform(0.1, 0.5, size=(SAMPLES, WAVES, 1))
    series = (amp * np.sin(freq * t + phase)).sum(axis=1)
    series += 0.05 * rng.standard_normal(series.shape)
    series = series[..., np.newaxis].astype(np.float32)
    x = np.ascontiguousarray(series[:, :TIMESTEPS])
    y = np.ascontiguousarray(series[:, -1])
    return TrainData(x=x, y=y, note=f"synthetic 3-sine series {SAMPLES}x{TIMESTEPS}x1, seeded")


def build_model(keras: Any) -> Any:
    return keras.Sequential(
        [
            keras.Input(shape=(TIMESTEPS, INPUT_DIM)),
            keras.layers.LSTM(UNITS),
            keras.layers.Dense(1),
        ],
        name="lstm_forecast",
    )


def optimizer(keras: Any) -> Any:
    return keras.optimizers.Adam(learning_rate=LEARNING_RATE)


WORKLOAD = Workload(
    name="lstm-forecast",
    description="LSTM(32) -> Dense(1) forecasting the next value of a 3-sine series (30 steps)",
    build_model=build_model,
    make_data=make_data,
    loss="mse",
    optimizer=optimizer,
    batch_size=BATCH,
    flops_per_sample=training_flops_per_sample(),
    params={
        "layers": "LSTM(32) - Dense(1)",
        "units": UNITS,
        "timesteps": TIMESTEPS,
        "input": "(30, 1) float32",
        "samples": SAMPLES,
        "batch_size": BATCH,
        "optimizer": f"Adam(learning_rate={LEARNING_RATE})",
        "loss": "mse",
        "data": "synthetic sum of 3 random sines + noise, seeded",
    },
    metrics=(),
    default_seed=0,
    tags=("recurrent",),
)
