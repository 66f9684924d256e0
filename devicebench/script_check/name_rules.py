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
    versions, _ = framework_names()
    seen: set[tuple[str, int]] = set()
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
