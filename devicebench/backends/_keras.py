"""Keras facts for the backend this worker process was started with."""

from __future__ import annotations

from typing import Any


def probe_keras() -> dict[str, Any]:
    """Import Keras (on the backend set in KERAS_BACKEND) and resolve ``jit_compile="auto"``."""
    out: dict[str, Any] = {}
    try:
        import keras
    except Exception as exc:  # a broken Keras must not hide the framework's own facts
        out["keras_error"] = f"{type(exc).__name__}: {exc}"
        return out
    out["keras_version"] = getattr(keras, "__version__", "")
    try:
        model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(1)])
        model.compile(loss="mse", optimizer="sgd", jit_compile="auto")
        out["keras_jit_auto"] = bool(model.jit_compile)
        out.setdefault("extra", {})["keras_backend"] = keras.backend.backend()
    except Exception as exc:
        out["keras_error"] = f"{type(exc).__name__}: {exc}"
    return out
