"""Resolve a workload reference: a built-in name, ``path/to/file.py:func``,
``package.module:func`` or a saved ``model.keras`` (``model.keras::data.npz``).

The parent only validates (:func:`validate_workload_ref`, never executing user code);
the worker loads (:func:`load_workload`)."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
from pathlib import Path

from devicebench.errors import SpecError
from devicebench.workloads.base import Workload


def _split(ref: str) -> tuple[str, str]:
    target, _, func = ref.rpartition(":")
    if not target or not func.isidentifier():
        raise SpecError(
            f"bad workload reference {ref!r}",
            fix="use a built-in name (`devicebench workloads`), path/to/file.py:function "
                "or package.module:function",
        )
    return target, func


def _bound_names(target: ast.expr) -> set[str]:
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, ast.Tuple | ast.List):
        return {n for elt in target.elts for n in _bound_names(elt)}
    if isinstance(target, ast.Starred):
        return _bound_names(target.value)
    return set()


def _top_level_names(body: list[ast.stmt]) -> tuple[set[str], bool]:
    """The names a module binds at its top level (functions, classes, assignments,
    ``w = lambda: ...``, imports, those inside top-level ``if``/``try``/``with``), and
    whether a ``from x import *`` makes the set open-ended."""
    names: set[str] = set()
    star = False
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {n for t in node.targets for n in _bound_names(t)}
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            names |= _bound_names(node.target)
        elif isinstance(node, ast.Import):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            star = star or any(a.name == "*" for a in node.names)
            names |= {a.asname or a.name for a in node.names if a.name != "*"}
        for block in ("body", "orelse", "finalbody", "handlers"):
            if isinstance(node, ast.If | ast.Try | ast.With | ast.ExceptHandler) \
                    and hasattr(node, block):
                inner = getattr(node, block)
                sub, sub_star = _top_level_names(inner)
                names |= sub
                star = star or sub_star
    return names, star


def is_builtin(ref: str) -> bool:
    from devicebench.workloads import BUILTIN_WORKLOADS

    return ref in BUILTIN_WORKLOADS


def validate_workload_ref(ref: str) -> None:
    """Check a reference without running user code (the parent imports no framework)."""
    from devicebench.workloads import get_workload, saved

    if saved.is_keras_ref(ref):
        saved.validate(ref)
        return
    if ":" not in ref:
        get_workload(ref)  # raises SpecError listing the built-in names
        return
    target, func = _split(ref)
    try:
        Path(target).stat()
    except FileNotFoundError:
        pass
    except OSError as exc:  # a 5,000-character name (ENAMETOOLONG), a loop, no access
        raise SpecError(f"workload file {target[:80]}{'...' if len(target) > 80 else ''} "
                        f"cannot be read: {exc.strerror or exc}",
                        fix="pass a shorter, readable path: path/to/file.py:function") from None
    if not target.endswith(".py") and Path(target).is_file():
        raise SpecError(f"workload file {target} is not a Python file",
                        fix="point at a .py file: path/to/file.py:function "
                            "(or a saved model: model.keras)")
    if target.endswith(".py"):
        path = Path(target)
        if not path.is_file():
            what = "is a directory" if path.is_dir() else "not found"
            raise SpecError(f"workload file {what}: {path}", fix="check the path")
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except (SyntaxError, UnicodeDecodeError, ValueError) as exc:
            raise SpecError(f"workload file {path} does not parse: {exc}",
                            fix="fix the syntax error") from None
        except OSError as exc:
            raise SpecError(f"workload file {path} cannot be read: {exc.strerror or exc}",
                            fix="check the file's permissions") from None
        names, star = _top_level_names(tree.body)
        if func not in names and not star:
            raise SpecError(f"no function {func!r} in {path}",
                            fix=f"define `def {func}(): return Workload(...)` in it")
    elif importlib.util.find_spec(target.split(".")[0]) is None:
        raise SpecError(f"module {target!r} not found", fix="check the name and sys.path")


def load_workload(ref: str) -> Workload:
    """Return the Workload for a reference (may execute user code: worker side only)."""
    from devicebench.workloads import get_workload, saved

    if saved.is_keras_ref(ref):
        return saved.keras_file_workload(ref)
    if ":" not in ref:
        return get_workload(ref)
    target, func = _split(ref)
    if target.endswith(".py"):
        path = Path(target).resolve()
        spec = importlib.util.spec_from_file_location(f"devicebench_user_{path.stem}", path)
        if spec is None or spec.loader is None:
            raise SpecError(f"cannot load workload file {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        # As `python file.py` does: the file's own directory first on sys.path, so a
        # sibling `from common import ...` resolves.
        if str(path.parent) not in sys.path:
            sys.path.insert(0, str(path.parent))
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(target)
    factory = getattr(module, func, None)
    if factory is None:
        raise SpecError(f"no function {func!r} in {target}")
    workload = factory() if callable(factory) else factory
    if not isinstance(workload, Workload):
        raise SpecError(
            f"{ref} returned {type(workload).__name__}, not a devicebench Workload",
            fix="return devicebench.workloads.base.Workload(...)",
        )
    return workload


def check_workload_runs(ref: str, backend: str, timeout: float = 180.0, *,
                        fit: bool = True, memory_limit_bytes: int | None = None,
                        builtin: bool = False) -> int | None:
    """Load a user workload in a throwaway worker and check its type and data.

    Built-in workloads are known good and skipped. ``run``, ``advise`` and the Python
    API call this once per user workload, before any trial; ``fit=False`` (``run``)
    stops after the data checks, leaving a model that fails to build to the trials.
    ``timeout`` and ``memory_limit_bytes`` are the run's own (``--timeout``,
    ``--memory-limit``); ``builtin=True`` checks a built-in too (to learn its size).

    Returns:
        the number of training samples (None for a built-in skipped).

    Raises:
        SpecError: (one line, exit 2) a function that does not load or returns the wrong
            thing; data with NaN, Inf or a non-numeric dtype; data that does not fit
            the model.
    """
    import os

    from devicebench.launch import run_worker, worker_env

    if is_builtin(ref) and not builtin:
        return None
    env = worker_env(backend, "cpu", base=dict(os.environ))
    args = [ref] if fit else [ref, "--no-fit"]
    out = run_worker("devicebench.workloads.check_worker", args, timeout=timeout, env=env,
                     memory_limit_bytes=memory_limit_bytes)
    if out.result is None:
        raise SpecError(f"workload {ref} could not be loaded: {out.describe()}",
                        fix="run its function by hand to see the error")
    if not out.result.get("ok"):
        raise SpecError(f"workload {ref}: {out.result.get('what')}",
                        fix=out.result.get("fix") or "run its function by hand to see why")
    samples = out.result.get("samples")
    return int(samples) if isinstance(samples, int) else None
