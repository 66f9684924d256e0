"""``seed-rnn``: seed 000 exactly — a 1-unit SimpleRNN over 50 steps of a two-sine series.

The model is tiny (900 training FLOPs per sample), so a step is pure dispatch overhead:
this is the workload where a Metal GPU takes 140 s/epoch and a CPU 1–3 s.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from devicebench.workloads.base import TrainData, Workload

N_STEPS = 50
UNITS = 1
INPUT_DIM = 1
SERIES = 10_000  # the seed generates 10000 series and trains on the first 7000
TRAIN = 7_000
VALID = 2_000  # the seed validates on series 7000..9000 at every epoch end
BATCH = 32
LEARNING_RATE = 0.005
TRAIN_FACTOR = 3  # forward + backward ≈ 3x forward


def generate_time_series(rng: np.random.RandomState, batch_size: int, n_steps: int) -> np.ndarray:
    """Seed 000's ``generate_time_series`` drawing from ``rng`` in the same order.

    With ``rng = np.random.RandomState(42)`` it returns what the seed's script gets after
    ``np.random.seed(42)``.
    """
    freq1, freq2, offsets1, offsets2 = rng.rand(4, batch_size, 1)
    time = np.linspace(0, 1, n_steps)
    series = 0.5 * np.sin((time - offsets1) * (freq1 * 10 + 10))  # wave 1
    series += 0.2 * np.sin((time - offsets2) * (freq2 * 20 + 20))  # + wave 2
    series += 0.1 * (rng.rand(batch_size, n_steps) - 0.5)  # + noise
    return series[..., np.newaxis].astype(np.float32)


def simple_rnn_flops(timesteps: int, input_dim: int, units: int) -> int:
    """Forward FLOPs of a SimpleRNN per sample.

    Per step: ``2·(D·U + U·U)`` for the two matmuls plus ``2·U`` for bias and tanh.
    """
    per_step = 2 * (input_dim * units + units * units) + 2 * units
    return timesteps * per_step


def training_flops_per_sample() -> float:
    """``3 × 50 × (2·(1·1 + 1·1) + 2·1) = 900``."""
    return float(TRAIN_FACTOR * simple_rnn_flops(N_STEPS, INPUT_DIM, UNITS))


def make_data(seed: int) -> TrainData:
    rng = np.random.RandomState(seed)
    series = generate_time_series(rng, SERIES, N_STEPS + 1)
    x = np.ascontiguousarray(series[:TRAIN, :N_STEPS])
    y = np.ascontiguousarray(series[:TRAIN, -1])
    x_val = np.ascontiguousarray(series[TRAIN:TRAIN + VALID, :N_STEPS])
    y_val = np.ascontiguousarray(series[TRAIN:TRAIN + VALID, -1])
    origin = "the forum script's generator" + (" (its seed 42)" if seed == 42
                                                else f" (seed {seed})")
    return TrainData(x=x, y=y, note=f"synthetic two-sine series, {origin}",
                     validation=(x_val, y_val))


def build_model(keras: Any) -> Any:
    return keras.Sequential(
        [keras.Input(shape=(None, INPUT_DIM)), keras.layers.SimpleRNN(UNITS)],
        name="seed_rnn",
    )


def optimizer(keras: Any) -> Any:
    return keras.optimizers.Adam(learning_rate=LEARNING_RATE)


WORKLOAD = Workload(
    name="seed-rnn",
    description="Seed 000: SimpleRNN(1) over 50 steps of a noisy two-sine series (dispatch-bound)",
    build_model=build_model,
    make_data=make_data,
    loss="mse",
    optimizer=optimizer,
    batch_size=BATCH,
    flops_per_sample=training_flops_per_sample(),
    params={
        "layers": "SimpleRNN(1)",
        "units": UNITS,
        "timesteps": N_STEPS,
        "input": "(50, 1) float32",
        "samples": TRAIN,
        "validation": f"{VALID} samples at every epoch end (the forum script's validation_data)",
        "batch_size": BATCH,
        "optimizer": f"Adam(learning_rate={LEARNING_RATE})",
        "loss": "mse",
        "data": "the forum script's generate_time_series, np.random seed 42, first 7000 of 10000",
    },
    metrics=(),
    default_seed=42,
    tags=("recurrent",),
    epochs=20,  # seed 000's model.fit(..., epochs=20)
)
