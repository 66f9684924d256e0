"""Reading a running fit from inside a callback: its batch size, and a probe that waits
for the dispatched steps and returns the running loss (the monitor's device sync)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import keras
import numpy as np


def fit_batch_size(max_depth: int = 8) -> int | None:
    """The batch size of the running fit's data, when Keras knows it (best effort: the
    fit's ``epoch_iterator`` local, found on the call stack)."""
    frame = sys._getframe(1)
    for _ in range(max_depth):
        frame = frame.f_back  # type: ignore[assignment]
        if frame is None:
            return None
        it = frame.f_locals.get("epoch_iterator")
        adapter = getattr(it, "data_adapter", None)
        if adapter is not None:
            try:
                size = adapter.batch_size
            except Exception:
                return None
            if not size:  # tf.data's `.batch(n)` leaves the batch dimension None
                size = dataset_batch_size(getattr(adapter, "_dataset", None))
            return int(size) if size else None
    return None


def dataset_batch_size(dataset: Any, max_depth: int = 32) -> int | None:
    """The ``n`` of the last ``.batch(n)`` / ``.padded_batch(n)`` in a ``tf.data``
    pipeline, walking back from ``dataset`` through its input datasets (best effort:
    tf.data's ``_batch_size`` and ``_input_dataset`` attributes); None when there is none.

    Keras knows a dataset's batch size only from a static batch dimension, which
    ``.batch(n)`` without ``drop_remainder=True`` leaves None: samples/s would then be
    missing for most tf.data pipelines (the tutorials', ``timeseries_dataset_from_array``'s).
    A ragged last batch makes the figure nominal for that one step.
    """
    for _ in range(max_depth):
        if dataset is None:
            return None
        size = getattr(dataset, "_batch_size", None)
        if size is not None:
            try:
                return int(size.numpy() if hasattr(size, "numpy") else size) or None
            except Exception:  # noqa: BLE001 - a symbolic size: unknown
                return None
        dataset = getattr(dataset, "_input_dataset", None)
    return None


def _to_float(x: Any) -> float:
    """A scalar Keras variable's value on the host (waits for the device to produce it).

    ``float`` of the backend tensor (a jax Array, tf tensor or torch tensor, on any device)
    costs a few microseconds; ``keras.ops.convert_to_numpy`` several times that.
    """
    value = getattr(x, "value", x)
    try:
        return float(value)
    except (TypeError, ValueError):
        return float(np.asarray(keras.ops.convert_to_numpy(x)).reshape(-1)[0])


def make_probe(model: Any, backend: str) -> Callable[[], float | None]:
    """A function that waits for the device to finish the dispatched steps and returns
    the epoch's running mean loss (None when the model has no loss tracker)."""
    tracker = getattr(model, "_loss_tracker", None)
    total = getattr(tracker, "total", None)
    count = getattr(tracker, "count", None)

    def live() -> float | None:
        if total is not None and count is not None:
            n = _to_float(count)
            return _to_float(total) / n if n else None
        optimizer = getattr(model, "optimizer", None)
        if optimizer is not None:
            _to_float(optimizer.iterations)  # sync only
        return None

    if backend != "jax":
        return live

    variables = list(getattr(model, "metrics_variables", []))
    i_total = next((i for i, v in enumerate(variables) if v is total), None)
    i_count = next((i for i, v in enumerate(variables) if v is count), None)

    def jax_probe() -> float | None:
        # Inside a JAX epoch the live state is model._jax_state (Keras documents it as
        # the callbacks' way in); the model's variables are stale until the epoch ends.
        state = getattr(model, "_jax_state", None)
        if state and not getattr(model, "_jax_state_synced", True):
            mv = state.get("metrics_variables")
            if mv is not None and i_total is not None and i_count is not None:
                n = float(mv[i_count])
                return float(mv[i_total]) / n if n else None
            import jax

            jax.block_until_ready(state)
            return None
        return live()

    return jax_probe
