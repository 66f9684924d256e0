"""The advise job's entry point: ``devicebench advise``, the main job and
:func:`devicebench.advise` call :func:`advise`, whose signature holds the defaults (the
budget, the equivalence steps) once, on whatever it is given — a training script
(:mod:`devicebench.jobs.advise_script`), a workload reference, a ``.keras`` file or a
compiled model (:func:`devicebench.jobs.advise.run_advice`)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from devicebench.errors import InputError
from devicebench.progress import OnProgress


def advise(
    workload_or_model: Any,
    data: tuple[Any, Any] | None = None,
    *,
    budget: float = 120.0,
    baseline: str | None = None,
    allow_batch_change: bool = False,
    epochs: int | None = None,
    db: str | Path | None = None,
    script_args: list[str] | None = None,
    equivalence_steps: int = 50,
    snapshot: Any = None,
    on_progress: OnProgress | None = None,
) -> Any:
    """Find the fastest safe way to train a workload or model on this machine.

    Args:
        workload_or_model: a training script (``"train.py"``: run up to its first
            ``fit()``, with ``script_args`` as its arguments; the result is a
            :class:`devicebench.jobs.advise_script.ScriptAdvice`, whose ``.patch.diff``
            is the change to the script), a built-in workload name,
            ``"path/file.py:function"``, a ``.keras`` path, or a compiled
            ``keras.Model`` (saved to a temporary file so worker processes can load it
            on every backend).
        data: ``(x, y)`` training arrays for a model (default: synthesised from its
            signature).
        budget: seconds for the search and the final comparison.
        baseline: your current configuration, e.g. ``"backend=tensorflow,device=gpu:0"``.
        epochs: the epochs you plan to train (default: the workload's own, else 10): a
            candidate whose extra compilation does not pay back within them is not
            recommended.
        equivalence_steps: steps whose losses are compared with the baseline's.
        snapshot: the machine's snapshot when the caller has probed it already.
        on_progress: progress events (:mod:`devicebench.progress`): started, each set-up
            and interleaved round with the budget left, finished. Default: one line each
            on stderr when it is a terminal, else none
            (:func:`devicebench.progress.silent` for none).

    Returns:
        an :class:`devicebench.advisor.advice.AdviceResult` (``.headline`` — does the
        accelerator speed this training up —, ``.verdict``, ``.reasons``, ``.code``,
        ``.to_dict()``).

    Raises:
        devicebench.errors.DevicebenchError: bad input (one clear message): an argument of
            the wrong type or out of range (``budget`` under 10 s), an unknown workload,
            a baseline this machine cannot run, training data with NaN or Inf.

    Example:
        >>> result = devicebench.advise("seed-rnn", budget=60)  # doctest: +SKIP
        >>> print(result.verdict)  # doctest: +SKIP
    """
    from devicebench.jobs.advise import run_advice
    from devicebench.jobs.advise_script import advise_script
    from devicebench.validate import check_advise_request
    from devicebench.workloads.script import is_script_ref

    budget = check_advise_request(budget, baseline, allow_batch_change, db, data, epochs)
    db = Path(db) if db else None
    if isinstance(workload_or_model, str | Path) and is_script_ref(str(workload_or_model)):
        return advise_script(str(workload_or_model), list(script_args or []),
                             baseline=baseline, budget=budget,
                             allow_batch_change=allow_batch_change, epochs=epochs, db=db,
                             snapshot=snapshot, equivalence_steps=equivalence_steps,
                             on_progress=on_progress)
    if script_args:
        raise InputError(f"arguments after -- ({' '.join(script_args)}) go with a training "
                         f"script, not {str(workload_or_model)!r}",
                         fix="devicebench advise train.py -- ARGS")
    with tempfile.TemporaryDirectory(prefix="devicebench-advise-") as tmp:
        ref = _as_ref(workload_or_model, data, Path(tmp))
        return run_advice(ref, baseline=baseline, budget=budget,
                          allow_batch_change=allow_batch_change, db=db, snapshot=snapshot,
                          equivalence_steps=equivalence_steps, epochs=epochs,
                          shown_as=str(workload_or_model), on_progress=on_progress)


def _as_ref(workload_or_model: Any, data: tuple[Any, Any] | None, tmp: Path) -> str:
    """A workload reference worker processes can load."""
    import numpy as np

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
