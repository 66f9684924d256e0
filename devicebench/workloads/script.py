"""A user's training script as a workload: ``devicebench advise train.py [-- ARGS]``.

The parent never runs the script: a capture worker
(:mod:`devicebench.workloads.capture_worker`) runs it up to its first ``fit()`` and
saves the model, its initial weights, the data and the fit's settings in a cache
directory, keyed by the script's content, its arguments, ``KERAS_BACKEND`` and the
installed versions (a second ``advise train.py`` does not capture again). The directory
also holds a ``workload.py`` whose ``workload()`` returns the captured
:class:`~devicebench.workloads.base.Workload` (:mod:`.script_workload`), so every layer
above sees an ordinary ``file.py:function`` reference.

Every refusal is one :class:`~devicebench.errors.InputError` line (exit 2).
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from devicebench.errors import InputError
from devicebench.workloads.script_workload import capture_tags

CAPTURE_VERSION = 4  # 3: dicts/lists of arrays, the second pass; 4: loss_weights, embedding
SETUP_TIMEOUT_S = float(os.environ.get("DEVICEBENCH_SETUP_TIMEOUT", "180"))
VERSIONED = ("keras", "tensorflow", "jax", "jaxlib", "torch", "numpy", "devicebench")
LOOP_MARKERS = (("GradientTape", "a custom tf.GradientTape training loop"),
                ("torch", "a PyTorch training loop"),
                ("jax.grad", "a JAX training loop"), ("value_and_grad", "a JAX training loop"),
                ("optax", "a JAX (optax) training loop"))


def is_script_ref(ref: str) -> bool:
    """``train.py`` (a Python file, no ``:function``): a script to capture."""
    return ref.endswith(".py") and not re.search(r":[A-Za-z_]\w*$", ref)


def cache_root() -> Path:
    """``$DEVICEBENCH_CACHE_DIR``, else the user cache directory (platformdirs)."""
    env = os.environ.get("DEVICEBENCH_CACHE_DIR")
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_cache_dir("devicebench"))


@dataclass(frozen=True)
class ScriptCapture:
    """What the capture of a script's first ``fit()`` recorded.

    Attributes:
        script: the script as the user named it; ``args``: its arguments.
        directory: the cache directory (model.keras, weights.npz, data.npz, workload.py).
        info: the capture worker's record (fit_site, params, batch_size, epochs, ...).
        notes: what the user should know (a second fit() call, a materialised dataset).
        cached: True when this capture came from the cache.
    """

    script: str
    args: tuple[str, ...]
    directory: Path
    info: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    cached: bool = False

    @property
    def ref(self) -> str:
        """The workload reference every worker loads."""
        return f"{self.directory / 'workload.py'}:workload"

    @property
    def fit_site(self) -> str:
        s = self.info.get("fit_site") or {}
        return f"{self.script}:{s['line']}" if s.get("line") else self.script

    def figures(self) -> str:
        """``12,345 parameters, batch 32, 20 epochs, validation_data (2000 samples)``."""
        i = self.info
        parts = [f"{i['params']:,} parameters", f"batch {i['batch_size']}",
                 f"{i['epochs']} epoch{'s' if i['epochs'] != 1 else ''}",
                 f"{i['samples']:,} training samples"]
        if i.get("validation"):
            parts.append(f"{i['validation']} ({i['validation_samples']:,} samples)")
        return ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        keep = ("fit_site", "compile_site", "params", "batch_size", "epochs", "samples",
                "validation", "validation_samples", "callbacks", "steps_per_execution",
                "jit_compile", "source", "batches", "total_batches", "structures",
                "keras_backend", "model_class", "reloadable", "custom_objects", "fit_kwargs")
        return {"script": self.script, "args": list(self.args), "measured_fit": self.fit_site,
                "cache_dir": str(self.directory), "cached": self.cached, "notes": self.notes,
                **{k: self.info.get(k) for k in keep}}


def _versions() -> dict[str, str]:
    out = {}
    for name in VERSIONED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = ""
    return out


def cache_key(source: bytes, args: list[str], environ: dict[str, str] | None = None) -> str:
    """sha256 of the script's bytes, its arguments, KERAS_BACKEND and the versions."""
    env = os.environ if environ is None else environ
    blob = json.dumps({"v": CAPTURE_VERSION, "args": list(args), "versions": _versions(),
                       "backend": env.get("KERAS_BACKEND", ""), "python": sys.version,
                       "source": hashlib.sha256(source).hexdigest()}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def _fit_calls(tree: ast.AST) -> list[int]:
    """Lines of ``.fit(`` calls in the script (a static count: the first one runs)."""
    return sorted(n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call)
                  and isinstance(n.func, ast.Attribute) and n.func.attr == "fit")


def _in_loop(tree: ast.AST, line: int) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.For | ast.While) and node.lineno <= line <= (
                node.end_lineno or node.lineno):
            return True
    return False


def read_script(script: str) -> tuple[bytes, ast.AST]:
    """The script's bytes and syntax tree; InputError when it cannot be used."""
    path = Path(script)
    if path.is_dir():
        raise InputError(f"{script} is a directory", fix="pass the training script, e.g. train.py")
    if not path.is_file():
        raise InputError(f"script not found: {script}", fix="check the path")
    source = path.read_bytes()
    try:
        tree = ast.parse(source, filename=script)
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None)
        raise InputError(f"script {script} does not parse (line {line}): "
                         f"{getattr(exc, 'msg', exc)}",
                         fix=f"`python -m py_compile {script}` shows it") from None
    return source, tree


def _doctor_hint(script: str, line: int | None) -> str:
    """The script check's finding at ``line`` (or its first error), as 'doctor: ...'."""
    try:
        from devicebench.script_check import check_script

        findings = check_script(script)
    except Exception:  # noqa: BLE001 - a hint only
        return ""
    at = [f for f in findings if line and f.location.endswith(f":{line}")]
    pick = (at or [f for f in findings if f.severity == "error"])[:1]
    return f"; doctor [{pick[0].id}] {pick[0].title} — fix: {pick[0].fix}" if pick else ""


def _loop_kind(tree: ast.AST, source: str) -> str:
    for marker, what in LOOP_MARKERS:
        if marker in source:
            return what
    return ""


def refusal(script: str, args: list[str], result: dict[str, Any] | None, tree: ast.AST,
            source: str, outcome: Any = None) -> InputError:
    """The one line for a capture that did not reach a usable fit()."""
    status = (result or {}).get("status")
    if outcome is not None and outcome.status == "timeout":
        loop = _loop_kind(tree, source)
        seen = f"it looks like {loop}" if loop else "no fit() call was reached"
        return InputError(
            f"{script} did not call keras Model.fit() within the set-up timeout "
            f"({outcome.wall_seconds:.0f} s): {seen}",
            why="advise measures the model a script trains with fit()",
            fix=f"`devicebench doctor {script}` reads the loop for pitfalls, `devicebench ops` "
                "times its ops per device; a set-up that is only slow: "
                "DEVICEBENCH_SETUP_TIMEOUT=600 devicebench advise ...")
    if result is None:
        tail = (outcome.stderr_tail.strip().splitlines() or [""])[-1] if outcome else ""
        return InputError(f"capturing {script} failed: "
                          f"{outcome.describe() if outcome else 'no result'} {tail}".strip(),
                          fix=f"run `python {script}` to see the error")
    if status == "raised":
        site = result.get("site") or {}
        name = site.get("file") or script
        if os.path.realpath(name) == os.path.realpath(script):
            name = script  # as the user named it
        where = f"{name}:{site.get('line')}" if site else script
        return InputError(
            f"{script} raised before fit(): {result['type']}: {result['message']} (at {where})"
            + _doctor_hint(script, site.get("line")),
            fix=_offline_fix(str(result["message"]))
            or f"fix it so that `python {script}` runs, then advise again")
    if status == "exited":
        tail = outcome.stderr_tail if outcome is not None else ""
        usage = [ln for ln in tail.splitlines() if ": error:" in ln]
        if usage and result.get("code") == 2:
            return InputError(f"{script} needs arguments it was not given: "
                              f"{usage[-1].split(': error: ', 1)[1]}",
                              fix=f"pass them after --: devicebench advise {script} -- ARGS")
        return InputError(f"{script} exited (code {result.get('code')}) before calling fit()"
                          + (f": {result['message']}" if result.get("message") else ""),
                          fix=f"check that `{' '.join(['python', script, *args])}` trains")
    if status == "ended":
        loop = _loop_kind(tree, source)
        return InputError(
            f"{script} ran to its end without calling keras Model.fit()"
            + (f" (it looks like {loop})" if loop else ""),
            why="advise measures the model a script trains with fit()",
            fix=f"`devicebench doctor {script}` reads the script for pitfalls; `devicebench ops` "
                "times ops per device; `devicebench advise path/file.py:function` takes a "
                "Workload")
    kind = result.get("kind")
    if kind == "custom_train_step":
        return InputError(
            f"{script}: the model overrides {result['what']}",
            why="advise trains the model with Keras' own step on every backend, which would "
                "not be the training your script runs",
            fix=f"time your fit as written with `devicebench monitor -- python {script}`")
    if kind == "graph_mode":
        line = next((i for i, text in enumerate(source.splitlines(), 1)
                     if "disable_eager_execution(" in text), None)
        at = f" (at {script}:{line})" if line else ""
        return InputError(
            f"{script} turned TensorFlow's eager execution off before fit(){at}",
            why="Keras 3 trains eagerly or in its own tf.function; a TF1 graph-mode session "
                "cannot run its fit (and graph mode is not what makes TF 2 fast)",
            fix="remove the tf.compat.v1.disable_eager_execution() call (Keras compiles the "
                "step itself; jit_compile=True in compile() for XLA)")
    if kind == "not_compiled":
        return InputError(f"{script} calls fit() on a model it did not compile",
                          fix="call model.compile(optimizer=..., loss=...) before fit()")
    what = result.get("what", "")
    return InputError(f"cannot measure the fit() in {script}: {what}",
                      fix="pass NumPy arrays or a tf.data.Dataset of (x, y) batches to fit(), or "
                          f"time it as written with `devicebench monitor -- python {script}`")


def capture_facts(ref: str) -> dict[str, Any]:
    """What the advisor knows of a captured script's workload (batch, epochs, a
    recurrent loop's length), read from its capture; {} for any other reference."""
    path = Path(ref.rpartition(":")[0])
    manifest = path.parent / "capture.json"
    if path.name != "workload.py" or not manifest.is_file():
        return {}
    info = json.loads(manifest.read_text(encoding="utf-8"))
    recurrent = bool(info.get("recurrent"))
    return {"workload_batch_size": info.get("batch_size"),
            "workload_tags": capture_tags(info),
            "workload_epochs": info.get("epochs"),
            "workload_timesteps": info.get("timesteps") if recurrent else None}


def captured_script(ref: str) -> dict[str, Any] | None:
    """For the workload reference of a captured script (``CACHE/scripts/KEY/workload.py:
    workload``): the script's path and arguments and the capture directory, read from
    its ``capture.json`` (the script None when the capture was deleted since); None for
    any other reference. What ``devicebench history`` shows of a run on a script."""
    path_s, _, function = ref.rpartition(":")
    path = Path(path_s)
    if function != "workload" or path.name != "workload.py" or \
            path.parent.parent.name != "scripts":
        return None
    manifest = path.parent / "capture.json"
    if not manifest.is_file():
        if path.is_file():  # a workload.py that is not one of ours
            return None
        return {"workload": ref, "script": None, "args": [], "capture_dir": str(path.parent),
                "capture_exists": False, "fit_site": None}
    try:
        info = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        info = {}
    site = info.get("fit_site") or {}
    return {"workload": ref, "script": info.get("script_path"),
            "args": list(info.get("args") or []), "capture_dir": str(path.parent),
            "capture_exists": True, "fit_site": site.get("line")}


WORKLOAD_PY = '''"""Generated by devicebench: the first fit() of {script}."""
from devicebench.workloads.script_workload import captured_workload


def workload():
    return captured_workload(__file__)
'''


def weighting_notes(fit_kwargs: dict[str, str]) -> list[str]:
    """What the candidates leave out of the script's fit(): its ``class_weight`` or
    ``sample_weight`` (``fit_kwargs``: the captured fit()'s arguments, as reprs). They
    all train the unweighted loss, so the loss comparison between them still holds, but
    the loss figures are not the weighted ones the script's own log prints."""
    out = []
    for name in ("class_weight", "sample_weight"):
        value = fit_kwargs.get(name)
        if value not in (None, "None"):
            out.append(f"its fit() passes `{name}`: the candidates train without it "
                       "(every one alike, so speed-ups and the loss comparison hold; the "
                       "losses shown are unweighted, not the ones your script's log prints)")
    return out


def capture_script(script: str, args: list[str] | tuple[str, ...] = (), *,
                   timeout: float = SETUP_TIMEOUT_S, env: dict[str, str] | None = None
                   ) -> ScriptCapture:
    """Capture ``script``'s first ``fit()`` (or reuse the cached capture).

    Raises:
        InputError: (one line) the script is missing or does not parse, raises or exits
            before fit(), never calls fit(), needs arguments, overrides train_step, or
            passes data that cannot be captured.

    Example:
        >>> capture_script("train.py", ["--epochs", "3"]).fit_site  # doctest: +SKIP
        'train.py:31'
    """
    from devicebench.launch import run_worker

    args = list(args)
    source, tree = read_script(script)
    text = source.decode("utf-8", errors="replace")
    key = cache_key(source, args, env)
    directory = cache_root() / "scripts" / key
    manifest = directory / "capture.json"
    cached = manifest.is_file()
    if cached:
        info = json.loads(manifest.read_text(encoding="utf-8"))
    else:
        tmp = directory.with_name(key + ".partial")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        run_env = dict(os.environ if env is None else env)
        run_env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        out = run_worker("devicebench.workloads.capture_worker",
                         [str(tmp), str(Path(script).resolve()), *args],
                         timeout=timeout, env=run_env)
        info = out.result or {}
        if out.status == "timeout" or info.get("status") != "captured":
            shutil.rmtree(tmp, ignore_errors=True)
            raise refusal(script, args, out.result, tree, text, out)
        (tmp / "capture.json").write_text(json.dumps(info, indent=1), encoding="utf-8")
        (tmp / "workload.py").write_text(WORKLOAD_PY.format(script=script), encoding="utf-8")
        shutil.rmtree(directory, ignore_errors=True)
        tmp.rename(directory)
    notes = list(info.get("notes") or [])
    fits = _fit_calls(tree)
    line = (info.get("fit_site") or {}).get("line")
    if len(fits) > 1 or (line and _in_loop(tree, line)):
        where = ", ".join(f"{script}:{n}" for n in fits)
        notes.insert(0, f"the script calls fit() more than once ({where}); the first, at "
                        f"{script}:{line}, is the one measured")
    notes += weighting_notes(info.get("fit_kwargs") or {})
    if not info.get("reloadable"):
        why = info.get("saved_error") or ", ".join(info.get("custom_objects") or [])
        notes.append(f"the saved model cannot be reloaded on its own ({why}): each worker "
                     "re-runs the script up to fit() under its backend and loads the "
                     "captured initial weights")
    return ScriptCapture(script, tuple(args), directory, info, notes, cached)


_FETCH = re.compile(r"URL fetch failure on (\S+?):? ")


def _offline_fix(message: str) -> str:
    """The fix when a script's download failed (Keras ``get_file``'s "URL fetch failure on
    URL"): where Keras looks for the file without the network, and, for MNIST, the built-in
    workload of its shapes; "" for any other error.

    Example:
        >>> _offline_fix("URL fetch failure on https://storage.googleapis.com/tensorflow/"
        ...              "tf-keras-datasets/mnist.npz: None -- [Errno -2] Name or service")[:60]
        'this machine could not download https://storage.googleapis.c'
        >>> _offline_fix("division by zero")
        ''
    """
    m = _FETCH.search(message)
    if m is None:
        return ""
    url = m.group(1)
    name = url.rsplit("/", 1)[-1]
    fix = (f"this machine could not download {url}: fetch {name} on a machine with network "
           f"access and put it in ~/.keras/datasets/ ($KERAS_HOME/datasets/ if set), where "
           "Keras finds it without downloading")
    if "mnist" in name:
        fix += ("; or measure the built-in `devicebench advise mnist-cnn` (the same shapes, "
                "seeded synthetic data)")
    return fix
