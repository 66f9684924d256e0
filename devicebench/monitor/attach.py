"""Attach a :class:`TrainingMonitor` to an unmodified script's ``fit`` calls.

``DEVICEBENCH_MONITOR`` turns it on: ``1`` for the defaults, or a JSON object of
``TrainingMonitor`` arguments (``{"csv_path": "m.csv", "stop_on_nan": true}``).
``devicebench monitor -- python train.py`` sets it and puts a ``sitecustomize`` on the
child's ``PYTHONPATH`` that calls :func:`install_from_env`; a script may also call it
itself. Keras is not imported here: ``keras.Model.fit`` is wrapped by the attach seam
(:mod:`devicebench.backends.fit_seam`, shared with ``advise train.py``) when the script
imports Keras in any style (the backend it chose is kept), or at once if it already has.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from devicebench.backends.fit_seam import attach_fit, patch_model
from devicebench.monitor import ENV_VAR, FITS_ENV_VAR

ALLOWED_OPTIONS = ("batch_size", "block_steps", "target_block_seconds", "csv_path",
                   "tensorboard_dir", "db", "stop_on_nan", "stall_factor", "nvml",
                   "nvml_interval", "verbose")


def parse_options(value: str) -> dict[str, Any]:
    """``"1"`` -> {}; a JSON object -> its items (only known ``TrainingMonitor`` args).

    Raises:
        ValueError: not ``1`` and not a JSON object of known options (the message says
            which key or why).

    Example:
        >>> parse_options('{"stop_on_nan": true}')
        {'stop_on_nan': True}
    """
    value = value.strip()
    if value in ("1", "true", "on", "yes"):
        return {}
    try:
        data = json.loads(value)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{ENV_VAR}={value[:60]!r} is neither 1 nor a JSON object ({exc.msg})"
                         ) from None
    if not isinstance(data, dict):
        raise ValueError(f"{ENV_VAR} must be 1 or a JSON object, got {type(data).__name__}")
    unknown = sorted(set(data) - set(ALLOWED_OPTIONS))
    if unknown:
        raise ValueError(f"{ENV_VAR} has unknown option(s) {', '.join(unknown)}; known: "
                         f"{', '.join(ALLOWED_OPTIONS)}")
    return data


def _numbered(path: Any, n: int) -> Any:
    """``m.csv`` for the first fit, ``m-fit2.csv`` for the second, ... (a dir: ``d/fit2``)."""
    if n == 1 or not isinstance(path, str):
        return path
    root, ext = os.path.splitext(path)
    return f"{root}-fit{n}{ext}" if ext else os.path.join(path, f"fit{n}")


def monitor_wrapper(options: dict[str, Any]):
    """The seam's fit wrapper: each fit call without a TrainingMonitor gets one."""
    fits = {"n": 0}

    def wrap(original: Any, model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        from devicebench.monitor.callback import TrainingMonitor

        callbacks = list(kwargs.get("callbacks") or [])
        _count_fit()  # a fit ran under the monitor (ours, or the script's own TrainingMonitor)
        if not any(isinstance(cb, TrainingMonitor) for cb in callbacks):
            fits["n"] += 1
            opts = dict(options)
            for key in ("csv_path", "tensorboard_dir"):
                if key in opts:
                    opts[key] = _numbered(opts[key], fits["n"])
            callbacks.append(TrainingMonitor(**opts))
            kwargs["callbacks"] = callbacks
        return original(model, *args, **kwargs)

    return wrap


def _count_fit() -> None:
    """One line in the parent's count file per fit monitored, from any process of the
    script (never raises: counting must not stop a training)."""
    path = os.environ.get(FITS_ENV_VAR)
    if not path:
        return
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(f"{os.getpid()}\n")
    except OSError:
        pass


def patch_fit(keras_module: Any, options: dict[str, Any]) -> None:
    """Wrap ``keras.Model.fit`` so each call without a TrainingMonitor gets one."""
    patch_model(keras_module, monitor_wrapper(options))


def install_from_env(environ: dict[str, str] | None = None) -> bool:
    """Attach the monitor to every later ``fit`` when ``DEVICEBENCH_MONITOR`` is set.

    Returns:
        True when attached (or armed for Keras' import); False when the variable is unset
        or invalid (an invalid one prints one line on stderr saying why).
    """
    env = os.environ if environ is None else environ
    value = env.get(ENV_VAR, "")
    if not value or value.strip() in ("0", "false", "off", "no"):
        return False
    try:
        options = parse_options(value)
    except ValueError as exc:
        print(f"devicebench monitor: not attached: {exc}", file=sys.stderr)
        return False
    attach_fit(monitor_wrapper(options), who="devicebench monitor")
    return True
