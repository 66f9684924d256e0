"""Generate the script check's snapshot of frameworks' public module names (issue 24, round 8).

The rule ``script.attribute-does-not-exist`` asks "does this module have this attribute?"
of a shipped list, never of the frameworks installed where devicebench runs (a doctor on a
machine without TensorFlow must still see that ``torch.backends.cudnn.benchmarks`` is a
typo, and a script is judged against a known release, not whatever happens to be here).
This script writes that list from the installed frameworks, with their versions:

    python bench/framework_names.py [--extra-path DIR] > \
        devicebench/script_check/data/framework_names.json

The shipped file was written from torch 2.13.0+cpu, TensorFlow 2.21.0 and JAX 0.10.2 (the
shared virtualenv) and MLX 0.32.4 installed aside with ``pip install --target DIR
"mlx[cpu]"`` and ``--extra-path DIR`` (MLX's Linux CPU build has the same Python API).
``tensorflow.compat.v1`` was added on 2026-12-04 from the same TensorFlow 2.21.0 (its row
written by this script's ``_names``; the other rows unchanged).

Only modules whose attributes a script sets or calls by their full dotted name are listed
(backends' flags, device/config namespaces, the top-level op namespaces); Keras is left out
on purpose: Keras 2 and Keras 3 differ, and a script's Keras is read from its own pins.
For each module: the public names of ``dir(module)`` and, for a package, its submodules.
"""

from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
import sys
import types

MODULES = {
    "torch": ["torch", "torch.backends", "torch.backends.cudnn", "torch.backends.cuda",
              "torch.backends.cuda.matmul", "torch.backends.mps", "torch.backends.mkldnn",
              "torch.backends.cpu", "torch.backends.opt_einsum", "torch.cuda", "torch.cuda.amp",
              "torch.amp", "torch.mps", "torch.nn", "torch.nn.functional", "torch.optim",
              "torch.utils.data", "torch.compiler", "torch.autograd", "torch.jit",
              "torch.profiler"],
    "tensorflow": ["tensorflow", "tensorflow.config", "tensorflow.config.experimental",
                   "tensorflow.config.optimizer", "tensorflow.config.threading",
                   "tensorflow.data", "tensorflow.data.experimental", "tensorflow.distribute",
                   "tensorflow.experimental", "tensorflow.debugging", "tensorflow.random",
                   "tensorflow.summary", "tensorflow.profiler.experimental",
                   "tensorflow.compat.v1"],  # TF1's API: names a TF1-era script reads
    "jax": ["jax", "jax.numpy", "jax.lax", "jax.random", "jax.nn", "jax.tree_util",
            "jax.profiler", "jax.experimental", "jax.sharding"],
    "mlx": ["mlx.core", "mlx.nn", "mlx.optimizers", "mlx.core.metal", "mlx.core.random"],
}


def _resolve(dotted: str) -> object:
    """What a script reaches as ``dotted``: attributes from the top module down (TensorFlow's
    public ``tf.distribute`` is not its internal package of that name), else the import."""
    top, *rest = dotted.split(".")
    obj: object = importlib.import_module(top)
    try:
        for attr in rest:
            obj = getattr(obj, attr)
        return obj
    except AttributeError:
        return importlib.import_module(dotted)


def _names(obj: object) -> list[str]:
    names = {n for n in dir(obj) if not n.startswith("_")}
    if isinstance(obj, types.ModuleType) and type(obj) is not types.ModuleType:
        # torch.backends.cudnn is a module subclass: its flags are properties of the class
        names |= {n for n in dir(type(obj)) if not n.startswith("_")}
        inner = getattr(obj, "m", None)  # ... and its functions those of the module it wraps
        if isinstance(inner, types.ModuleType):
            names |= {n for n in dir(inner) if not n.startswith("_")}
    path = getattr(obj, "__path__", None)
    if path is not None:
        names |= {m.name for m in pkgutil.iter_modules(path) if not m.name.startswith("_")}
    return sorted(names)


def snapshot() -> dict:
    """{"frameworks": {dist: version}, "modules": {dotted: [names]}, "open": [dotted]} of
    what is installed; "open" modules answer more names than they list (a ``__getattr__``)."""
    out: dict = {"frameworks": {}, "modules": {}, "open": []}
    for dist, modules in MODULES.items():
        try:
            top = importlib.import_module(dist)
        except ImportError:
            print(f"{dist} is not installed: left out", file=sys.stderr)
            continue
        out["frameworks"][dist] = getattr(top, "__version__", "") or getattr(
            importlib.import_module(modules[0]), "__version__", "")
        for m in modules:
            try:
                names = _names(_resolve(m))
            except (ImportError, AttributeError) as exc:
                print(f"{m}: {exc}: left out", file=sys.stderr)
                continue
            if names:  # an object answering by __getattr__ lists nothing: left out
                out["modules"][m] = names
            if "__getattr__" in getattr(obj := _resolve(m), "__dict__", {}) or (
                    "__getattr__" in type(obj).__dict__ and type(obj) is not types.ModuleType):
                out["open"].append(m)  # more names than it lists: only stores are judged
    return out


def main() -> None:
    """Print the snapshot as JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--extra-path", action="append", default=[],
                    help="a directory to import frameworks from (e.g. a --target install)")
    args = ap.parse_args()
    sys.path[:0] = args.extra_path
    snap = snapshot()
    rows = [f" {json.dumps(m)}: {json.dumps(names)}" for m, names in sorted(
        snap["modules"].items())]  # one module a line: a diff between releases reads per module
    print("{\n" + f' "frameworks": {json.dumps(snap["frameworks"], sort_keys=True)},\n'
          + f' "open": {json.dumps(snap["open"])},\n' + ' "modules": {\n'
          + ",\n".join(rows) + "\n }\n}")


if __name__ == "__main__":
    main()
