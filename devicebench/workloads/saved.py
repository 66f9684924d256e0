"""A saved Keras model (``model.keras``) as a workload.

The parent reads the archive's ``config.json`` (zip + JSON, no framework) to check it;
the worker loads the model. Without data, training data is synthesised from the model's
input and output signature and its loss; with ``model.keras::data.npz`` (arrays ``x``
and ``y``) the user's data is used. The data file may also hold the script's validation
data (``x_val`` and ``y_val``: timed as ``fit`` validates at each epoch end) and the
epochs it trains (a scalar ``epochs``: the whole-fit figure).
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from devicebench.errors import InputError
from devicebench.workloads.base import TrainData, Workload

SEPARATOR = "::"
SYNTH_SAMPLES = 2048
DEFAULT_BATCH = 32


def is_keras_ref(ref: str) -> bool:
    return ref.split(SEPARATOR, 1)[0].endswith(".keras")


def split_ref(ref: str) -> tuple[Path, Path | None]:
    model, sep, data = ref.partition(SEPARATOR)
    if sep and not data.strip():  # `model.keras::`: a data file was meant, none named
        raise InputError(f"no data file after '{SEPARATOR}' in {ref!r}",
                         fix=f"pass {model}{SEPARATOR}data.npz, or {model} alone for "
                             "synthetic data")
    return Path(model), (Path(data) if data else None)


def read_config(path: Path) -> dict[str, Any]:
    """The model archive's config.json; InputError when it is not a usable .keras file."""
    if path.is_dir():
        raise InputError(f"model path is a directory: {path}", fix="pass the .keras file")
    if not path.is_file():
        raise InputError(f"model file not found: {path}", fix="check the path")
    try:
        with zipfile.ZipFile(path) as z:
            config = json.loads(z.read("config.json"))
    except (zipfile.BadZipFile, KeyError, ValueError, OSError) as exc:
        raise InputError(f"{path} is not a Keras 3 .keras archive ({exc})",
                         fix="save it with model.save('model.keras') in Keras 3") from None
    compile_config = config.get("compile_config") or {}
    if not compile_config.get("loss") or not compile_config.get("optimizer"):
        raise InputError(f"{path} was saved without a loss or optimizer",
                         why="training needs the model's compile() settings",
                         fix="call model.compile(loss=..., optimizer=...) before model.save()")
    return config


def validate(ref: str) -> None:
    model, data = split_ref(ref)
    read_config(model)
    if data is not None:
        _load_arrays(data)


def _load_arrays(path: Path) -> dict[str, Any]:
    """``x`` and ``y``, and ``x_val``/``y_val`` and ``epochs`` when the file holds them."""
    if not path.is_file():
        raise InputError(f"data file not found: {path}",
                         fix="save it with np.savez(path, x=..., y=...)")
    try:
        with np.load(path) as npz:
            out: dict[str, Any] = {k: npz[k] for k in ("x", "y")}
            present = [k for k in ("x_val", "y_val") if k in npz.files]
            if len(present) == 1:
                raise InputError(f"{path} holds {present[0]} but not its pair",
                                 why="validation data needs both inputs and targets",
                                 fix="save both: np.savez(path, ..., x_val=..., y_val=...)")
            if present:
                out["validation"] = (npz["x_val"], npz["y_val"])
            if "epochs" in npz.files:
                epochs = npz["epochs"]
                if epochs.shape != () or not np.issubdtype(epochs.dtype, np.integer) \
                        or int(epochs) < 1:
                    raise InputError(f"{path}: epochs must be one integer >= 1, got "
                                     f"{epochs.tolist()!r}",
                                     fix="save it as np.savez(path, ..., epochs=20)")
                out["epochs"] = int(epochs)
            return out
    except (KeyError, ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        # a truncated .npz is a BadZipFile (a zip archive cut short)
        raise InputError(f"cannot read arrays x and y from {path} ({exc})",
                         fix="save them with np.savez(path, x=x_train, y=y_train)") from None


def _synthesise(model: Any, loss: Any, seed: int) -> TrainData:
    """Random inputs of the model's shape and targets its loss accepts."""
    rng = np.random.default_rng(seed)
    if len(model.inputs) != 1 or len(model.outputs) != 1:
        raise InputError("the model has several inputs or outputs",
                         fix="pass data: devicebench.advise(model, data=(x, y))")
    shape = [d if d is not None else 16 for d in model.inputs[0].shape[1:]]
    dtype = str(model.inputs[0].dtype)
    if "int" in dtype:
        first = next((layer for layer in model.layers if hasattr(layer, "input_dim")), None)
        high = getattr(first, "input_dim", 2)
        x = rng.integers(0, high, size=(SYNTH_SAMPLES, *shape)).astype(dtype)
    else:
        x = rng.standard_normal((SYNTH_SAMPLES, *shape)).astype("float32")
    out_shape = [d if d is not None else 16 for d in model.outputs[0].shape[1:]]
    name = loss if isinstance(loss, str) else json.dumps(loss)
    classes = out_shape[-1] if out_shape else 1
    if "sparse_categorical" in name:
        y = rng.integers(0, classes, size=(SYNTH_SAMPLES, *out_shape[:-1])).astype("int32")
    elif "categorical" in name:
        y = np.eye(classes, dtype="float32")[rng.integers(0, classes, size=SYNTH_SAMPLES)]
    elif "binary" in name:
        y = rng.integers(0, 2, size=(SYNTH_SAMPLES, *out_shape)).astype("float32")
    else:
        y = rng.standard_normal((SYNTH_SAMPLES, *out_shape)).astype("float32")
    return TrainData(x, y, note=f"synthetic {SYNTH_SAMPLES} samples from the model's "
                                f"signature (input {tuple(shape)}, loss {name})")


def keras_file_workload(ref: str) -> Workload:
    """Worker side: a Workload whose model and data come from the .keras file."""
    model_path, data_path = split_ref(ref)
    config = read_config(model_path)
    cc = config["compile_config"]
    loss, opt_config = cc["loss"], cc["optimizer"]

    def build_model(keras: Any) -> Any:
        model = keras.saving.load_model(model_path, compile=False)
        if keras.config.dtype_policy().name == "float32":
            return model
        # The saved layers carry the policy they were built with (float32): rebuilt from
        # the config without it, a mixed-precision trial computes in its own policy.
        from devicebench.workloads.script_workload import _strip_dtypes

        rebuilt = keras.models.model_from_json(json.dumps(_strip_dtypes(config)))
        rebuilt.set_weights(model.get_weights())
        return rebuilt

    arrays = _load_arrays(data_path) if data_path is not None else {}

    def make_data(seed: int) -> TrainData:
        if arrays:
            x = arrays["x"]
            return TrainData(x, arrays["y"], validation=arrays.get("validation"),
                             note=f"user data from {data_path} ({len(x)} samples)")
        import keras

        return _synthesise(keras.saving.load_model(model_path, compile=False), loss, seed)

    def optimizer(keras: Any) -> Any:
        return keras.optimizers.get(opt_config)

    metrics = tuple(m for m in (cc.get("metrics") or []) if isinstance(m, str))
    return Workload(name=model_path.name, description=f"saved model {model_path}",
                    build_model=build_model, make_data=make_data, loss=loss,
                    optimizer=optimizer, batch_size=DEFAULT_BATCH, metrics=metrics,
                    epochs=arrays.get("epochs"))
