"""Worker: ``python -m devicebench.workloads.capture_worker RESULT OUT_DIR SCRIPT [ARGS]``.

Runs the user's script as ``python SCRIPT ARGS`` would (``__main__``, its own argv, its
directory first on ``sys.path``, the caller's working directory) with the attach seam
(:mod:`devicebench.backends.fit_seam`) on ``keras.Model``. At the script's first
``fit()`` it records what that fit would train — the model (``model.keras``), its initial
weights (``weights.npz``, as NumPy arrays), the data (``data.npz``: arrays, or dicts or
lists of arrays, as given, their structure in the result; a ``tf.data.Dataset``,
``PyDataset`` or generator materialised to at most :data:`MAX_BATCHES` batches, its own
pipeline timed apart), the fit's arguments and where it was called — and stops the
script: it never trains. RESULT gets ``{"status": "captured" | "raised" | "exited" |
"ended" | "refused", ...}``; the parent turns all but the first into one line.
"""

from __future__ import annotations

import inspect
import json
import os
import runpy
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

from devicebench.backends._keras import all_layers
from devicebench.workloads.arrays import (
    check_flat,
    concat,
    describe,
    is_nested,
    n_samples,
    take,
    to_npz,
)

MAX_BATCHES = 200  # of a dataset or generator: the sample every candidate trains on
PIPELINE_SECONDS = 10.0  # at most, for the second pass that times the user's pipeline
FIT_FIELDS = ("batch_size", "epochs", "validation_split", "steps_per_epoch", "shuffle",
              "class_weight", "sample_weight", "initial_epoch", "validation_steps",
              "validation_freq", "verbose")


class StopScript(BaseException):
    """Raised at the captured fit() to unwind the user's script (not an Exception: a
    script's ``except Exception`` must not swallow it)."""


def plain_weights(value: Any) -> Any:
    """``compile(loss_weights=...)`` as JSON keeps it (a float, or a dict or list of
    floats); None when absent or not made of numbers (then Keras' default, all 1)."""
    if isinstance(value, dict):
        out = {str(k): plain_weights(v) for k, v in value.items()}
        return None if None in out.values() else out
    if isinstance(value, list | tuple):
        items = [plain_weights(v) for v in value]
        return None if None in items else items
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _site(script: str) -> dict[str, Any]:
    """The innermost frame of the stack in ``script`` (else the outermost user frame)."""
    frames = inspect.stack(0)[1:]
    for f in frames:
        if os.path.realpath(f.filename) == script:
            return {"file": f.filename, "line": f.lineno, "function": f.function}
    for f in frames:
        if "site-packages" not in f.filename and "devicebench" not in f.filename:
            return {"file": f.filename, "line": f.lineno, "function": f.function}
    return {}


def _is_dataset(x: Any) -> str:
    mod = type(x).__module__
    if mod.startswith("tensorflow") and hasattr(x, "element_spec"):
        return "tf.data.Dataset"
    if any(c.__name__ == "PyDataset" for c in type(x).__mro__):
        return "PyDataset"
    if hasattr(x, "__next__") or (hasattr(x, "__iter__") and not hasattr(x, "shape")
                                  and not isinstance(x, list | tuple | dict)):
        return "generator" if hasattr(x, "__next__") else type(x).__name__
    return ""


def _np(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _np(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_np(v) for v in value)
    return np.asarray(value.numpy() if hasattr(value, "numpy") else value)


def _pydataset_len(source: Any) -> int | None:
    """Batches in a PyDataset (Keras' ``num_batches``, else ``len``); None: endless."""
    if hasattr(source, "num_batches"):
        n = source.num_batches
        return None if n is None else int(n)
    return int(len(source))


def _batches(source: Any, kind: str, limit: int,
             times: list[float] | None = None) -> tuple[list[Any], int | None]:
    """Up to ``limit`` batches of a dataset/PyDataset/generator, and its length if known;
    ``times`` gets the seconds the source took to deliver each batch (the user's own
    input pipeline, one pass, not overlapped with training)."""
    total: int | None = None
    if kind == "PyDataset":
        total = _pydataset_len(source)  # None: an endless one (num_batches None)
        items = (source[i] for i in range(limit if total is None else min(total, limit)))
    else:
        if kind == "tf.data.Dataset":
            card = int(source.cardinality())
            total = card if card >= 0 else None
        items = iter(source)
    out = []
    it = iter(items)
    while len(out) < limit:
        t0 = time.perf_counter()
        try:
            item = next(it)
        except StopIteration:
            break
        if times is not None:
            times.append(time.perf_counter() - t0)
        out.append(_np(item))
    return out, total


def _time_pipeline(source: Any, kind: str, n: int, first: list[float],
                   budget_s: float = PIPELINE_SECONDS) -> dict[str, Any]:
    """The user's own input pipeline, timed apart from training: seconds per batch (the
    median, its first batch — the pipeline's start — left out) over a second pass of up
    to ``n`` batches where the source can be iterated again (a ``tf.data.Dataset``, a
    ``PyDataset``), else over the pass that materialised it (``first``: a generator is
    read once). Read in this one thread: a ``PyDataset``'s ``workers`` are not used."""
    out: dict[str, Any] = {}
    if len(first) > 1:
        out.update(pipeline_first_pass_seconds_per_batch=float(np.median(first[1:])),
                   pipeline_first_batch_seconds=first[0],
                   pipeline_seconds_per_batch=float(np.median(first[1:])),
                   pipeline_batches_timed=len(first) - 1, pipeline_method="first pass")
    if kind == "PyDataset" and (int(getattr(source, "workers", 1) or 1) > 1
                                or getattr(source, "use_multiprocessing", False)):
        out["pipeline_workers"] = int(getattr(source, "workers", 1) or 1)
    if kind not in ("tf.data.Dataset", "PyDataset") or n < 3:
        return out
    times: list[float] = []
    try:
        it = iter(source) if kind == "tf.data.Dataset" else (source[i] for i in range(n))
        # (a PyDataset's batches by index, as fit() reads them with workers=1)
        t_end = time.perf_counter() + budget_s
        while len(times) < n and time.perf_counter() < t_end:
            t0 = time.perf_counter()
            next(it)
            times.append(time.perf_counter() - t0)
    except StopIteration:
        pass
    except Exception:  # noqa: BLE001 - a source that cannot be read twice: the first pass
        return out
    if len(times) > 2:
        out.update(pipeline_seconds_per_batch=float(np.median(times[1:])),
                   pipeline_batches_timed=len(times) - 1, pipeline_method="second pass")
    return out


def _stack(batches: list[Any]) -> tuple[Any, Any, int]:
    """(x, y, batch size) from a list of ``(x, y)`` batches (x or y: an array, or a dict
    or list of arrays)."""
    if not batches or not isinstance(batches[0], tuple | list) or len(batches[0]) < 2:
        raise ValueError("its batches are not (x, y) pairs")
    if len(batches[0]) > 2:
        raise ValueError("its batches carry sample weights (x, y, w)")
    check_flat(batches[0][0], "batches' inputs")
    check_flat(batches[0][1], "batches' targets")
    xs, ys = [b[0] for b in batches], [b[1] for b in batches]
    return concat(xs), concat(ys), n_samples(xs[0])


def _data(fit_args: dict[str, Any]) -> dict[str, Any]:
    """The training (and validation) data as arrays, and notes on how they were made."""
    x, y = fit_args.get("x"), fit_args.get("y")
    info: dict[str, Any] = {"notes": []}
    kind = _is_dataset(x)
    if kind:
        x_source = x
        times: list[float] = []
        batches, total = _batches(x, kind, min(MAX_BATCHES, fit_args.get("steps_per_epoch")
                                                or MAX_BATCHES), times)
        x, y, batch = _stack(batches)
        info.update(_time_pipeline(x_source, kind, len(batches), times))
        info.update(source=kind, batch_size=batch, batches=len(batches), total_batches=total)
        whole = total is not None and len(batches) >= total
        info["notes"].append(
            f"the {kind} was materialised: {len(batches)} batches of {batch}"
            + ("" if whole else f" (of {total if total is not None else 'an unknown number'})")
            + "; every candidate trains on these arrays, so your input pipeline is not part "
              "of the step times (it is timed apart: "
            + ("a second pass over it" if info.get("pipeline_method") == "second pass"
               else "while its batches were read, once") + ")")
    else:
        check_flat(x, "inputs")
        check_flat(y, "targets")
        x, y = _np(x), _np(y)
        info.update(source="arrays")
        for what, value in (("inputs", x), ("targets", y)):
            if is_nested(value):  # a model with named or several inputs or outputs
                info["notes"].append(f"its {what}: {describe(value)}, kept as given")
    if y is None:
        raise ValueError("it passes no targets (y)")
    val = fit_args.get("validation_data")
    split = fit_args.get("validation_split") or 0.0
    if val is not None:
        vkind = _is_dataset(val)
        if vkind:
            vb, _ = _batches(val, vkind, MAX_BATCHES)
            xv, yv, _ = _stack(vb)
            info["notes"].append(f"validation {vkind} materialised: {len(vb)} batches")
        else:
            check_flat(val[0], "validation inputs")
            check_flat(val[1], "validation targets")
            xv, yv = _np(val[0]), _np(val[1])
        info["validation"] = "validation_data"
    elif split and kind:
        raise ValueError("validation_split is given with a dataset (Keras refuses it too)")
    elif split:
        at = int(np.floor(n_samples(x) * (1.0 - split)))  # as Keras' train_validation_split
        x, y, xv, yv = take(x, None, at), take(y, None, at), take(x, at, None), take(y, at, None)
        info["validation"] = f"validation_split={split}"
    else:
        xv = yv = None
    info["arrays"] = {"x": x, "y": y, **({"x_val": xv, "y_val": yv} if xv is not None
                                         else {})}
    return info


def _custom_step(model: Any, keras: Any) -> str:
    for cls in type(model).__mro__:
        if cls is keras.Model or cls.__module__.startswith("keras"):
            break
        # (a compute_loss override is kept: such a model is re-run from the script)
        if "train_step" in cls.__dict__:
            return f"{cls.__name__}.train_step"
    return ""


def _custom_objects(config: Any) -> list[str]:
    """Classes in a saved config that are not Keras' own (they need the script)."""
    found: list[str] = []
    if isinstance(config, dict):
        mod = config.get("module")
        if "class_name" in config and "registered_name" in config and not (
                isinstance(mod, str) and mod.startswith("keras")):
            found.append(f"{config['class_name']} (defined in {mod or 'the script'})")
        for v in config.values():
            found += _custom_objects(v)
    elif isinstance(config, list):
        for v in config:
            found += _custom_objects(v)
    return found


def capture(model: Any, original: Any, args: tuple, kwargs: dict, out_dir: Path,
            script: str, compiles: list[dict[str, Any]]) -> dict[str, Any]:
    """Record the first fit() (see the module docstring); returns the result JSON."""
    import keras

    bound = inspect.signature(original).bind(model, *args, **kwargs)
    fit_args = {k: v for k, v in bound.arguments.items() if k != "self"}
    fit_args.update(fit_args.pop("kwargs", {}) or {})
    site = _site(script)
    res: dict[str, Any] = {"status": "captured", "fit_site": site,
                           "compile_site": compiles[-1]["site"] if compiles else {},
                           "compile_kwargs": compiles[-1]["kwargs"] if compiles else [],
                           "compile_jit": compiles[-1]["jit_compile"] if compiles else "'auto'",
                           "loss_weights": compiles[-1].get("loss_weights") if compiles else None,
                           "keras_backend": keras.backend.backend(),
                           "keras_version": keras.__version__,
                           "model_class": type(model).__name__}
    tf = sys.modules.get("tensorflow")
    if tf is not None and not getattr(tf, "executing_eagerly", lambda: True)():
        # tf.compat.v1.disable_eager_execution(): Keras 3 cannot train in TF1 graph mode.
        return {**res, "status": "refused", "kind": "graph_mode", "what": ""}
    step = _custom_step(model, keras)
    if step:
        return {**res, "status": "refused", "kind": "custom_train_step", "what": step}
    if getattr(model, "optimizer", None) is None or not getattr(model, "compiled", True):
        return {**res, "status": "refused", "kind": "not_compiled", "what": ""}
    try:
        data = _data(fit_args)
    except ValueError as exc:
        return {**res, "status": "refused", "kind": "data", "what": str(exc)}
    arrays = data.pop("arrays")
    batch = data.pop("batch_size", None) or fit_args.get("batch_size") or 32
    if not model.built:
        model(take(arrays["x"], 0, 1))
    stored: dict[str, np.ndarray] = {}
    structures: dict[str, Any] = {}
    for name, value in arrays.items():
        flat, structures[name] = to_npz(name, value)
        stored.update(flat)
    np.savez(out_dir / "data.npz", **stored)
    weights = [np.asarray(w) for w in model.get_weights()]
    np.savez(out_dir / "weights.npz", *weights)
    saved_error, custom = "", []
    try:
        model.save(out_dir / "model.keras")
        import zipfile

        with zipfile.ZipFile(out_dir / "model.keras") as z:
            config = json.loads(z.read("config.json"))
        custom = _custom_objects(config)
    except Exception as exc:  # noqa: BLE001 - the re-run fallback covers it
        saved_error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    ser = keras.saving.serialize_keras_object
    compile_info: dict[str, Any] = {}
    for key, value in (("loss", getattr(model, "loss", None)),
                       ("optimizer", model.optimizer)):
        try:
            compile_info[key] = json.loads(json.dumps(ser(value)))
        except (TypeError, ValueError):
            compile_info[key] = None
    custom += _custom_objects(compile_info)
    metrics = compiles[-1]["metrics"] if compiles else []
    recurrent = any(type(layer).__name__ in ("SimpleRNN", "LSTM", "GRU", "RNN")
                    for layer in getattr(model, "layers", []))
    embedding = any(type(layer).__name__ == "Embedding" for layer in all_layers(model))
    callbacks = [type(c).__name__ for c in (fit_args.get("callbacks") or [])]
    res.update(
        params=int(model.count_params()), batch_size=int(batch),
        epochs=int(fit_args.get("epochs") or 1), samples=n_samples(arrays["x"]),
        validation_samples=n_samples(arrays["x_val"]) if "x_val" in arrays else 0,
        callbacks=callbacks, structures=structures,
        steps_per_execution=int(getattr(model, "steps_per_execution", 1) or 1),
        jit_compile=str(getattr(model, "jit_compile", "auto")),
        dtype_policy=keras.config.dtype_policy().name,
        fit_kwargs={k: repr(fit_args[k])[:80] for k in FIT_FIELDS if k in fit_args},
        reloadable=not saved_error and not custom and compile_info["loss"] is not None,
        saved_error=saved_error, custom_objects=custom, compile=compile_info,
        metrics=metrics, weights=len(weights), recurrent=recurrent, embedding=embedding,
        script_path=script,
        timesteps=int(arrays["x"].shape[1]) if recurrent and isinstance(arrays["x"], np.ndarray)
        and arrays["x"].ndim == 3 else None,
        args=list(sys.argv[1:]), **data)
    return res


def _error_site(exc: BaseException, script: str) -> dict[str, Any]:
    frames = traceback.extract_tb(exc.__traceback__)
    mine = [f for f in frames if os.path.realpath(f.filename) == script]
    f = mine[-1] if mine else (frames[-1] if frames else None)
    return {"file": f.filename, "line": f.lineno, "code": (f.line or "")[:160]} if f else {}


def run_script(script: str, args: list[str], on_fit: Any) -> dict[str, Any]:
    """Run ``script`` as ``__main__`` with ``on_fit(model, original, args, kwargs,
    compiles)`` at its first fit (it returns the result); how it ended otherwise."""
    from devicebench.backends.fit_seam import attach_fit

    state: dict[str, Any] = {"result": None, "compiles": []}

    def fit_wrapper(original: Any, model: Any, a: tuple, kw: dict) -> Any:
        if state["result"] is not None:  # after the capture: Keras' own fit
            return original(model, *a, **kw)
        state["result"] = on_fit(model, original, a, kw, state["compiles"])
        raise StopScript

    def compile_hook(model: Any, a: tuple, kw: dict) -> None:
        metrics = kw.get("metrics") if isinstance(kw.get("metrics"), list | tuple) else []
        state["compiles"].append({"site": _site(script), "kwargs": sorted(kw),
                                  "jit_compile": repr(kw.get("jit_compile", "auto")),
                                  "steps_per_execution": kw.get("steps_per_execution", 1),
                                  "loss_weights": plain_weights(kw.get("loss_weights")),
                                  "metrics": [m for m in metrics if isinstance(m, str)]})

    attach_fit(fit_wrapper, compile_hook, who="devicebench advise")
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [script, *args]
    sys.path.insert(0, os.path.dirname(script))
    try:
        runpy.run_path(script, run_name="__main__")
    except StopScript:
        return state["result"]
    except SystemExit as exc:
        if state["result"] is not None:
            return state["result"]
        return {"status": "exited", "code": exc.code if isinstance(exc.code, int) else 1,
                "message": "" if isinstance(exc.code, int | None) else str(exc.code)}
    except BaseException as exc:  # noqa: BLE001 - the user's own error, reported
        if state["result"] is not None:
            return state["result"]
        return {"status": "raised", "type": type(exc).__name__,
                "message": str(exc).strip().splitlines()[0][:300] if str(exc).strip() else "",
                "site": _error_site(exc, script)}
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    return state["result"] or {"status": "ended"}


def main(argv: list[str]) -> int:
    result_path, out_dir, script, args = argv[0], Path(argv[1]), argv[2], argv[3:]
    script = os.path.realpath(script)

    def on_fit(model: Any, original: Any, a: tuple, kw: dict, compiles: list) -> dict:
        try:
            return capture(model, original, a, kw, out_dir, script, compiles)
        except Exception as exc:  # noqa: BLE001 - a capture bug is reported, not hidden
            return {"status": "refused", "kind": "capture_failed",
                    "what": f"{type(exc).__name__}: {str(exc)[:300]}",
                    "trace": traceback.format_exc()[-2000:]}

    result = run_script(script, args, on_fit)
    with open(result_path, "w", encoding="utf-8") as fh:
        json.dump(result, fh, default=str)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # the script's atexit handlers and threads are not ours to run


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
