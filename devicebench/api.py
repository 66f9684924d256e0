"""The Python API: the same results the CLI renders."""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from devicebench.errors import InputError


def _as_ref(workload_or_model: Any, data: tuple[Any, Any] | None, tmp: Path) -> str:
    """A workload reference worker processes can load."""
    if isinstance(workload_or_model, str | Path):
        ref = str(workload_or_model)
        if data is None:
            return ref
        if not ref.endswith(".keras"):
            raise InputError("data= goes with a Keras model or a .keras file",
                             fix="a workload function provides its own data")
        model_path = ref
    elif hasattr(workload_or_model, "save") and hasattr(workload_or_model, "inputs"):
        model = workload_or_model
        if getattr(model, "optimizer", None) is None or getattr(model, "loss", None) is None:
            raise InputError("the model is not compiled",
                             fix="call model.compile(loss=..., optimizer=...) first")
        model_path = str(tmp / "model.keras")
        model.save(model_path)
    else:
        raise InputError(
            f"cannot advise on a {type(workload_or_model).__name__}",
            fix="pass a built-in name, 'path/file.py:function', a .keras path or a compiled "
                "keras.Model")
    if data is None:
        return model_path
    x, y = (np.asarray(a) for a in data)
    if len(x) != len(y):
        raise InputError(f"data does not fit: x has {len(x)} samples, y has {len(y)}",
                         fix="pass data=(x, y) with one target per sample")
    if hasattr(workload_or_model, "inputs"):
        expected = tuple(workload_or_model.inputs[0].shape[1:])
        if len(expected) != x.ndim - 1 or any(
                e is not None and e != g for e, g in zip(expected, x.shape[1:], strict=False)):
            raise InputError(f"data does not fit the model: x has shape {x.shape[1:]} per "
                             f"sample, the model expects {expected}",
                             fix="reshape x to the model's input shape")
    data_path = tmp / "data.npz"
    np.savez(data_path, x=x, y=y)
    return f"{model_path}::{data_path}"


MIN_ADVISE_BUDGET_S = 10.0  # as `devicebench advise --budget`


def _check_advise_args(budget: Any, baseline: Any, allow_batch_change: Any, db: Any,
                       data: Any) -> float:
    """The CLI's rules for advise's arguments; InputError (never a TypeError from deep
    inside) for anything else. Returns the budget as a float."""
    if isinstance(budget, bool) or not isinstance(budget, int | float):
        raise InputError(f"budget must be a number of seconds, got {budget!r}",
                         fix="e.g. devicebench.advise('seed-rnn', budget=60)")
    if not math.isfinite(budget) or budget < MIN_ADVISE_BUDGET_S:
        raise InputError(f"budget must be at least {MIN_ADVISE_BUDGET_S:.0f} s, got {budget}",
                         why="a search needs time for each candidate's import and set-up",
                         fix="e.g. budget=60")
    if baseline is not None and not isinstance(baseline, str):
        raise InputError(f"baseline must be a string, got {type(baseline).__name__}",
                         fix="e.g. baseline='backend=tensorflow,device=cpu'")
    if not isinstance(allow_batch_change, bool):
        raise InputError(f"allow_batch_change must be True or False, got {allow_batch_change!r}")
    if db is not None and not isinstance(db, str | Path):
        raise InputError(f"db must be a path, got {type(db).__name__}",
                         fix="e.g. db='results.db'")
    if data is not None and (not isinstance(data, tuple | list) or len(data) != 2):
        raise InputError(f"data must be a pair (x, y), got {type(data).__name__}",
                         fix="pass data=(x_train, y_train)")
    return float(budget)


def advise(
    workload_or_model: Any,
    data: tuple[Any, Any] | None = None,
    *,
    budget: float = 120.0,
    baseline: str | None = None,
    allow_batch_change: bool = False,
    epochs: int | None = None,
    db: str | Path | None = None,
    progress: bool = False,
):
    """Find the fastest safe way to train a workload or model on this machine.

    Args:
        workload_or_model: a built-in workload name, ``"path/file.py:function"``, a
            ``.keras`` path, or a compiled ``keras.Model`` (saved to a temporary file so
            worker processes can load it on every backend).
        data: ``(x, y)`` training arrays for a model (default: synthesised from its
            signature).
        budget: seconds for the search and the final comparison.
        baseline: your current configuration, e.g. ``"backend=tensorflow,device=gpu:0"``.
        epochs: the epochs you plan to train (default: the workload's own, else 10): a
            candidate whose extra compilation does not pay back within them is not
            recommended.

    Returns:
        an :class:`devicebench.advisor.advice.AdviceResult` (``.headline`` — does the
        accelerator speed this training up —, ``.verdict``, ``.reasons``, ``.code``,
        ``.to_dict()``).

    Raises:
        devicebench.errors.DevicebenchError: bad input (one clear message): an argument of
            the wrong type or out of range (``budget`` under 10 s), an unknown workload,
            a baseline this machine cannot run, training data with NaN or Inf.

    Example:
        >>> result = devicebench.advise("seed-rnn", budget=60)
        >>> print(result.verdict)
    """
    from devicebench.advisor.job import run_advice
    from devicebench.report.advise import AdviseSpinner

    budget = _check_advise_args(budget, baseline, allow_batch_change, db, data)
    with tempfile.TemporaryDirectory(prefix="devicebench-advise-") as tmp:
        ref = _as_ref(workload_or_model, data, Path(tmp))
        bar = AdviseSpinner(str(workload_or_model)) if progress else None
        try:
            return run_advice(ref, baseline=baseline, budget=budget,
                              allow_batch_change=allow_batch_change, epochs=epochs,
                              db=Path(db) if db else None,
                              on_event=bar.event if bar else None)
        finally:
            if bar:
                bar.stop()
