"""Framework attributes that do not exist (issue 24, round 8: family "attribute that does not
exist").

Setting an attribute a module does not have raises nothing in Python: ``torch.backends.cudnn.
benckmark = True`` creates a new, unused attribute, and cuDNN autotuning stays off
(TradeMaster-NTU/TradeMaster#128). Reading or calling one fails only when that line runs --
an API removed in the release a script runs on, or a misspelling in a branch rarely taken.
Both are answered from a shipped snapshot of the frameworks' public names
(``data/framework_names.json``, written by ``bench/framework_names.py`` from named releases),
never from the frameworks installed where the check runs.
"""

from __future__ import annotations

import ast
import difflib
import json
from functools import lru_cache
from pathlib import Path

from devicebench.script_check.context import Context, rule
from devicebench.script_check.pins import pinned_tf1

_DATA = Path(__file__).resolve().parent / "data" / "framework_names.json"


@lru_cache(maxsize=1)
def _snapshot() -> dict:
    """The shipped snapshot, read once."""
    return json.loads(_DATA.read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def framework_names() -> tuple[dict[str, str], dict[str, frozenset[str]]]:
    """(framework -> version the snapshot was taken from, module -> its public names)."""
    raw = _snapshot()
    return raw["frameworks"], {m: frozenset(v) for m, v in raw["modules"].items()}


@lru_cache(maxsize=1)
def _open_modules() -> frozenset[str]:
    """Modules that answer more names than they list (a module ``__getattr__``)."""
    return frozenset(_snapshot().get("open", []))


def missing_attribute(dotted: str, store: bool = False) -> tuple[str, str, str] | None:
    """(module, attribute, framework) when ``dotted`` names an attribute its module, a module
    in the snapshot, does not have; None when the module is not in the snapshot or has it.
    A module that serves names through ``__getattr__`` is judged only for a ``store``."""
    module, _, attr = dotted.rpartition(".")
    _, modules = framework_names()
    names = modules.get(module)
    if names is None or not attr or attr.startswith("_") or attr in names or (
            not store and module in _open_modules()):
        return None
    return module, attr, module.split(".")[0]


def closest(module: str, attr: str) -> str:
    """The module's public name nearest to ``attr`` (a likely misspelling), or ""."""
    _, modules = framework_names()
    near = difflib.get_close_matches(attr, sorted(modules[module]), n=1, cutoff=0.8)
    return near[0] if near else ""


def basis(framework: str) -> str:
    """What the check knows the names from."""
    versions, _ = framework_names()
    return (f"checked against the public names of {framework} {versions.get(framework, '?')}, "
            f"devicebench/script_check/data/framework_names.json; later releases may add "
            f"names, older ones may have had it")


def _framework_used(ctx: Context, framework: str) -> bool:
    return ctx.uses(framework) or framework == "mlx" and ctx.uses("mlx.core")


@rule("script.attribute-does-not-exist",
      "`{name}` does not exist in {framework} {version}",
      "the module has no such attribute (checked against the public names of {framework} "
      "{version}, `devicebench/script_check/data/framework_names.json`; {framework} "
      "releases after it may add names, older ones may have had it)",
      "use the attribute's current name, or pin the release the script was written for")
def attribute_does_not_exist(ctx: Context) -> None:
    versions, modules = framework_names()
    seen: set[tuple[str, int]] = set()
    tf1 = modules.get("tensorflow.compat.v1", frozenset())
    tf1_reads: list[tuple[ast.Attribute, str]] = []
    for node in ast.walk(ctx.tree):
        if not isinstance(node, ast.Attribute):
            continue
        q = ctx.resolve(node)
        hit = missing_attribute(q, isinstance(node.ctx, ast.Store))
        if hit is None or (q, node.lineno) in seen:
            continue
        module, attr, framework = hit
        if not _framework_used(ctx, framework):
            continue
        seen.add((q, node.lineno))
        if module == "tensorflow" and attr in tf1 and not isinstance(node.ctx, ast.Store):
            tf1_reads.append((node, attr))  # TensorFlow 1's API: one finding for them all
            continue
        near = closest(module, attr)
        short = q.replace("tensorflow.", "tf.", 1) if q.startswith("tensorflow.") else q
        if isinstance(node.ctx, ast.Store):
            severity, verb = "warning", "assigned"
            effect = (f"assigning it creates a new attribute on the module and changes "
                      f"nothing: `{module}` has no `{attr}`, so the setting the script means "
                      f"never takes effect")
            fix = (f"set `{module}.{near}` (a misspelling of it, most likely)" if near else
                   f"look up the setting's name in {framework}'s documentation")
        else:
            severity, verb = "info", "read"
            effect = (f"`{module}` has no `{attr}`: this line raises AttributeError when it "
                      f"runs (a misspelling, or an API removed or renamed)")
            fix = (f"use `{module}.{near}` if that is what is meant; otherwise pin the "
                   f"{framework} release the script was written for" if near else
                   f"find its replacement in {framework}'s release notes, or pin the "
                   f"release the script was written for")
        ctx.add("script.attribute-does-not-exist", severity, node,
                f"{verb}, and `{module}` has no `{attr}`" + (
                    f" (did you mean `{near}`?)" if near else ""),
                why=f"{effect} ({basis(framework)})", fix=fix,
                name=short, framework=framework, version=versions.get(framework, "?"))
    if tf1_reads:
        _tf1_api(ctx, tf1_reads, versions.get("tensorflow", "?"))


def _tf1_api(ctx: Context, reads: list[tuple[ast.Attribute, str]], version: str) -> None:
    """A script written for TensorFlow 1 (``tf.placeholder``, ``tf.Session``): one finding at
    its first such line (a warning where TensorFlow 2 is installed, info where none is
    known), nothing when the script declares TensorFlow 1.x or this machine runs it."""
    installed = ctx.snapshot.version_of("tensorflow") if ctx.snapshot else ""
    if pinned_tf1(ctx.lines, ctx.directory) or installed.startswith("1."):
        return  # judged as the release it declares or runs on: these names exist there
    # A warning where this machine's TensorFlow 2 would raise on these lines; info when no
    # TensorFlow is known here (the script may be meant for a TF1 machine elsewhere).
    severity = "warning" if installed else "info"
    reads = sorted(reads, key=lambda r: (r[0].lineno, r[0].col_offset))  # walk is breadth-first
    names = list(dict.fromkeys(f"tf.{attr}" for _, attr in reads))
    lines = sorted({node.lineno for node, _ in reads})
    shown = ", ".join(f"`{n}`" for n in names[:5]) + (
        f" and {len(names) - 5} more" if len(names) > 5 else "")
    where = ", ".join(map(str, lines[:8])) + (" ..." if len(lines) > 8 else "")
    tutorials = any(isinstance(n, ast.ImportFrom) and (n.module or "").startswith(
        "tensorflow.examples.tutorials") for n in ast.walk(ctx.tree))
    ctx.add("script.tf1-api-on-tf2", severity, reads[0][0],
            f"{shown}: TensorFlow 1 names, read on line{'s' if len(lines) > 1 else ''} "
            f"{where}" + ("; and `tensorflow.examples.tutorials` (TF1's MNIST reader) is not "
                          "in TensorFlow 2 at all: `tf.keras.datasets.mnist.load_data()` "
                          "gives the same arrays" if tutorials else ""),
            version=installed or f"{version} (no TensorFlow installed here)")


@rule("script.tf1-api-on-tf2",
      "the script is written for TensorFlow 1: TensorFlow {version} has these names only "
      "under `tf.compat.v1`",
      "TensorFlow 2.0 moved the TF1 graph API (placeholders, sessions, tf.train optimizers, "
      "tf.log ...) to `tf.compat.v1`; on TensorFlow {version} (names checked against "
      "devicebench/script_check/data/framework_names.json) each of these lines raises "
      "AttributeError, and TensorFlow 1.15, the last 1.x, has wheels only for Python <= 3.7",
      "run it unchanged in graph mode with `import tensorflow.compat.v1 as tf` and "
      "`tf.disable_v2_behavior()` in place of `import tensorflow as tf`, or port it to "
      "TensorFlow 2 (`tf_upgrade_v2 --infile train.py --outfile train_v2.py` rewrites the "
      "names, then replace sessions with `tf.function`); if it must stay on TensorFlow 1, "
      "declare `tensorflow==1.15` in a requirements.txt beside it",
      "https://www.tensorflow.org/guide/migrate (as remembered)")
def _tf1_rule(ctx: Context) -> None:
    """Reported by :func:`attribute_does_not_exist` (one pass over the attributes)."""
