"""Worker side of a captured script: the :class:`Workload` a trial trains.

Two ways to get the model, chosen at capture: the saved ``model.keras`` when it reloads
with Keras' own classes (the usual Sequential/functional model: fast, no user code runs
in the worker), else the script re-run up to its ``fit()`` in the worker under the
worker's backend (custom layers, subclassed models, a custom loss: their classes exist
only in the script). Either way the captured initial weights are loaded as NumPy arrays,
so every candidate starts from the same point as the script's own fit would.

The saved model's layers carry the dtype policy they were built with: when it or the
candidate's is not float32, the model is rebuilt from its config without those, so the
candidate's global policy applies as it would in the user's script.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from devicebench.workloads.arrays import from_npz, n_samples, take
from devicebench.workloads.base import TrainData, Workload


def _strip_dtypes(config: Any) -> Any:
    """A model config whose layers (not inputs) take the global dtype policy."""
    if isinstance(config, dict):
        out = {k: _strip_dtypes(v) for k, v in config.items()}
        inner = out.get("config")
        if isinstance(inner, dict) and out.get("class_name") != "InputLayer" \
                and isinstance(inner.get("dtype"), dict):
            inner.pop("dtype")
        return out
    if isinstance(config, list):
        return [_strip_dtypes(v) for v in config]
    return config


def capture_tags(info: dict[str, Any]) -> tuple[str, ...]:
    """The facts the advisor reasons with, from a capture: ``recurrent`` (an RNN layer:
    a per-timestep loop), ``embedding`` (an Embedding layer: TF's sparse updates)."""
    return tuple(t for t in ("recurrent", "embedding") if info.get(t))


def compile_loss(config: Any, keras: Any) -> Any:
    """The loss ``compile()`` takes, from the loss a capture serialised: one loss (a name,
    or a serialised Keras object), or a dict or list of them (a model with several named
    or listed outputs: ``loss={"priority": ..., "department": ...}``), each rebuilt with
    ``keras.losses.get``. ``keras.losses.get`` alone refuses such a dict ("Unknown
    `config` as a `dict`")."""
    if isinstance(config, dict) and "class_name" in config and "config" in config:
        return keras.losses.get(config)
    if isinstance(config, dict):
        return {k: compile_loss(v, keras) for k, v in config.items()}
    if isinstance(config, list | tuple):
        return [compile_loss(v, keras) for v in config]
    return config  # a name ("mse") or None


def _weights(directory: Path) -> list[np.ndarray]:
    with np.load(directory / "weights.npz") as npz:
        return [npz[f"arr_{i}"] for i in range(len(npz.files))]


def _rerun(directory: Path, info: dict[str, Any]) -> Any:
    """The model object the script builds, from a run up to its fit() in this process."""
    from devicebench.workloads.capture_worker import run_script

    script = os.path.realpath(info["script_path"])
    got: dict[str, Any] = {}

    def on_fit(model: Any, *_: Any) -> dict[str, Any]:
        got["model"] = model
        return {"status": "captured"}

    result = run_script(script, list(info.get("args") or []), on_fit)
    if "model" not in got:
        raise RuntimeError(f"re-running {script} did not reach fit() ({result})")
    return got["model"]


def captured_workload(workload_py: str) -> Workload:
    """The Workload recorded in the capture directory holding ``workload_py``."""
    import keras

    directory = Path(workload_py).resolve().parent
    info = json.loads((directory / "capture.json").read_text(encoding="utf-8"))
    weights = _weights(directory)
    structures = info.get("structures") or {}
    with np.load(directory / "data.npz") as npz:
        stored = {k: npz[k] for k in npz.files}
    arrays = {name: from_npz(name, stored, structures.get(name))
              for name in ("x", "y", "x_val", "y_val") if name in structures or name in stored}
    models: list[Any] = []
    if not info.get("reloadable"):
        models.append(_rerun(directory, info))  # its loss/optimizer come from the script

    def build_model(k: Any) -> Any:
        if models:
            model = models.pop()
        elif info.get("reloadable"):
            with zipfile.ZipFile(directory / "model.keras") as z:
                config = json.loads(z.read("config.json"))
            if "float32" != k.config.dtype_policy().name or \
                    "float32" != info.get("dtype_policy", "float32"):
                model = k.models.model_from_json(json.dumps(_strip_dtypes(config)))
            else:
                model = k.saving.load_model(directory / "model.keras", compile=False)
        else:
            model = _rerun(directory, info)
        if not model.built:  # a subclassed model builds at its first call
            model(take(arrays["x"], 0, 1))
        model.set_weights(weights)
        return model

    first = models[0] if models else None
    comp = info.get("compile") or {}
    if first is not None:  # the script's own loss object and optimizer class
        loss: Any = first.loss
    else:
        loss = compile_loss(comp.get("loss"), keras)

    def optimizer(k: Any) -> Any:
        if first is not None:
            return type(first.optimizer).from_config(first.optimizer.get_config())
        return k.optimizers.get(comp["optimizer"])

    validation = (arrays["x_val"], arrays["y_val"]) if "x_val" in arrays else None
    note = f"the data your script passes to fit() ({n_samples(arrays['x'])} samples)"
    if info.get("source") and info["source"] != "arrays":
        note = (f"{info.get('batches')} batches materialised from your {info['source']} "
                "(your pipeline is timed apart, at capture)")

    def make_data(seed: int) -> TrainData:
        return TrainData(arrays["x"], arrays["y"], validation=validation, note=note)

    metrics = tuple(m for m in info.get("metrics") or [] if isinstance(m, str))
    return Workload(
        name=Path(info.get("script_path", "script")).name,
        description=f"the first fit() of {info.get('script_path')}",
        build_model=build_model, make_data=make_data, loss=loss, optimizer=optimizer,
        batch_size=int(info["batch_size"]), metrics=metrics, epochs=int(info["epochs"]),
        params={"parameters": info.get("params")},
        tags=capture_tags(info),
        loss_weights=info.get("loss_weights"))
