"""The `Workload` contract: what a built-in or user workload provides.

A workload module must not import any deep-learning framework at import time: the
parent lists workloads (``devicebench workloads``) without one. The worker passes the
imported ``keras`` module to :meth:`Workload.build_model`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from devicebench.workloads.arrays import n_samples


@dataclass(frozen=True)
class TrainData:
    """Training arrays, optional validation arrays, and a note on where they came from.

    ``validation`` is ``(x_val, y_val)`` when the original script validates at every
    epoch end (Keras' ``fit(..., validation_data=(x_val, y_val))``): devicebench then
    times that pass too, as ``fit`` runs it, and shows the epoch as Keras' log does.

    Example:
        >>> TrainData(x, y, validation=(x_val, y_val))  # doctest: +SKIP
    """

    x: np.ndarray
    y: np.ndarray
    note: str = "synthetic, seeded"
    validation: tuple[Any, Any] | None = None

    @property
    def samples(self) -> int:
        return n_samples(self.x)

    @property
    def validation_samples(self) -> int:
        """Samples in the validation set (0: none)."""
        if self.validation is None:
            return 0
        return len(_leaves(self.validation[0])[0][1])


@dataclass(frozen=True)
class Workload:
    """A model, its data and its training settings.

    Attributes:
        name: registry name, e.g. ``"seed-rnn"``.
        description: one line for ``devicebench workloads``.
        build_model: ``f(keras) -> keras.Model`` (uncompiled); must use only Keras APIs so
            it builds on every backend.
        make_data: ``f(seed) -> TrainData`` with numpy arrays (float32 / int32), seeded
            and deterministic; ``note`` says whether the data is real or synthetic.
        loss: Keras loss identifier, e.g. ``"mse"`` (or a dict/list of them, one per output).
        loss_weights: ``compile(loss_weights=...)`` for a model with several outputs (a dict
            or list of floats, as the script gave them), or None.
        optimizer: ``f(keras) -> optimizer`` (a fresh optimizer each call).
        batch_size: the workload's own batch size.
        flops_per_sample: analytic training FLOPs per sample (forward + backward,
            ~3x forward; a multiply-add counts 2), or None when unknown. Analytic because
            TF's profiler and JAX's cost analysis count a loop body once.
        params: human-readable parameters shown by ``devicebench workloads``.
        metrics: Keras metrics to compile with (as the original script did).
        default_seed: the seed that reproduces the original script's data.
        tags: facts the advisor reasons with, e.g. ``"recurrent"`` (a per-timestep loop).
        epochs: how many epochs the original script trains (None: not stated); one-time
            costs such as compilation are weighed against that much training, and the
            output shows how long a fit of that many epochs takes. Validation data, if
            the script validates, comes with the training data (``TrainData.validation``).
    """

    name: str
    description: str
    build_model: Callable[[Any], Any]
    make_data: Callable[[int], TrainData]
    loss: str
    optimizer: Callable[[Any], Any]
    batch_size: int
    flops_per_sample: float | None = None
    params: dict[str, Any] = field(default_factory=dict)
    metrics: tuple[str, ...] = ()
    default_seed: int = 0
    tags: tuple[str, ...] = ()
    epochs: int | None = None
    loss_weights: Any = None

    def built_model(self, keras: Any) -> Any:
        """``build_model(keras)``, checked: a TypeError that says so when it is not a
        Keras model (a str, None), not "'str' object has no attribute 'compile'" later."""
        model = self.build_model(keras)
        if not (hasattr(model, "compile") and hasattr(model, "fit")):
            raise TypeError(f"build_model returned {type(model).__name__}, not a keras.Model;"
                            " it must return keras.Sequential([...]) or keras.Model(inputs, "
                            "outputs), uncompiled")
        return model

    def flops_per_step(self, batch_size: int | None = None) -> float | None:
        """Analytic training FLOPs for one optimizer step at ``batch_size``."""
        if self.flops_per_sample is None:
            return None
        return self.flops_per_sample * (batch_size or self.batch_size)


def _leaves(value: Any) -> list[tuple[str, Any]]:
    if isinstance(value, dict):
        return [(f"[{k!r}]", v) for k, v in value.items()]
    if isinstance(value, list | tuple):
        return [(f"[{i}]", v) for i, v in enumerate(value)]
    return [("", value)]


def data_problem(data: TrainData) -> tuple[str, str] | None:
    """``(what, fix)`` for training data no trial should run on, else None.

    Checked once, before any trial: a dtype that is not numeric, and NaN or Inf values
    in x or y (TensorFlow trains on them and reports a finite loss, JAX reports NaN —
    either way the comparison would be about the data, not the device).
    """
    parts = [("x", data.x), ("y", data.y)]
    if data.validation is not None:
        if not (isinstance(data.validation, tuple | list) and len(data.validation) == 2):
            return ("its validation data is not a pair (x_val, y_val)",
                    "pass TrainData(x, y, validation=(x_val, y_val))")
        parts += [("x_val", data.validation[0]), ("y_val", data.validation[1])]
    for name, value in parts:
        for suffix, leaf in _leaves(value):
            arr = np.asarray(leaf)
            label = name + suffix
            if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
                return (f"its training data {label} has dtype {arr.dtype}, not a number type",
                        f"convert {label} to float32 (or int32 labels), e.g. "
                        f"{label}.astype('float32')")
            if np.issubdtype(arr.dtype, np.inexact):
                bad = int(arr.size - np.count_nonzero(np.isfinite(arr)))
                if bad:
                    nan = int(np.count_nonzero(np.isnan(arr)))
                    return (f"its training data {label} has {nan} NaN and {bad - nan} Inf "
                            f"values (of {arr.size}): the model would train on them",
                            f"clean {label} first, e.g. drop the rows with "
                            f"~np.isfinite({label}).any(axis=1), or np.nan_to_num({label})")
    return None

