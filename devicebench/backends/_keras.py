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


# Attributes through which Keras 3's random layers draw in training: Dropout and its
# kin (SpatialDropout*, GaussianDropout, AlphaDropout: ``rate``), GaussianNoise
# (``stddev``), and the RNN cells' input and recurrent dropout (keras/src/layers/rnn/
# dropout_rnn_cell.py: a mask only when ``0 < dropout < 1``). MultiHeadAttention keeps
# its attention dropout in a Dropout sublayer, found by the recursive walk. Any other
# layer that owns a ``keras.random.SeedGenerator`` (the random augmentation layers:
# RandomFlip, RandomRotation, RandomZoom...; a user's own noisy layer) is called with
# ``training=False`` instead: Keras' ``Operation.__call__`` runs ``self.call``.
_RANDOM_IN_TRAINING = {
    "Dropout": ("rate",), "SpatialDropout1D": ("rate",), "SpatialDropout2D": ("rate",),
    "SpatialDropout3D": ("rate",), "GaussianDropout": ("rate",), "AlphaDropout": ("rate",),
    "GaussianNoise": ("stddev",),
}
_RNN_CELL_ATTRS = ("dropout", "recurrent_dropout")


def all_layers(model: Any) -> list[Any]:
    """Every layer of ``model``, nested models' and sublayers included, once (Keras 3's
    ``_flatten_layers``; else the top-level ``layers``)."""
    flatten = getattr(model, "_flatten_layers", None)
    if flatten is not None:
        return list(flatten(include_self=False, recursive=True))
    return list(getattr(model, "layers", ()))


def _draws_random(layer: Any) -> bool:
    """Whether ``layer`` owns a Keras seed generator and takes a ``training`` argument."""
    if not getattr(layer, "_call_has_training_arg", False):
        return False
    return any(type(v).__name__ == "SeedGenerator" for v in vars(layer).values())


def _inference_call(call: Any) -> Any:
    def call_without_randomness(*args: Any, training: Any = None, **kwargs: Any) -> Any:
        return call(*args, training=False, **kwargs)

    return call_without_randomness


def suspend_random_layers(model: Any) -> Any:
    """Switch off the randomness ``model``'s layers draw in training; returns a callable
    that restores it and makes Keras trace the training step again (``None`` when the
    model draws nothing).

    The equivalence steps compare loss trajectories across backends, precisions and XLA
    on/off. A dropout mask or an augmentation is drawn by each backend's own generator
    (and XLA's differs from TensorFlow's kernels), so with them on, two trials of one
    model part after the first step and every candidate would read "loss differs". With
    them off, the steps compare the model's arithmetic, which is what a backend or
    precision change can break.

    Example:
        >>> suspend_random_layers(object()) is None
        True
    """
    saved: list[tuple[Any, str, Any]] = []
    calls: list[Any] = []
    for layer in all_layers(model):
        names = _RANDOM_IN_TRAINING.get(type(layer).__name__, ())
        targets = [(layer, n) for n in names]
        cell = getattr(layer, "cell", None)
        for owner in (layer, cell):
            if owner is not None and type(owner).__name__.endswith("Cell"):
                targets += [(owner, n) for n in _RNN_CELL_ATTRS]
        for owner, name in targets:
            value = getattr(owner, name, None)
            if isinstance(value, int | float) and value > 0:
                saved.append((owner, name, value))
                setattr(owner, name, 0.0)
        if not targets and "call" not in vars(layer) and _draws_random(layer):
            layer.call = _inference_call(layer.call)
            calls.append(layer)
    if not saved and not calls:
        return None

    def restore() -> None:
        for owner, name, value in saved:
            setattr(owner, name, value)
        for layer in calls:
            del layer.call  # the class's own call again
        model.train_function = None  # traced with the layers off: trace it again

    return restore
