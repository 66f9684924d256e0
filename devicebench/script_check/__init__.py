"""Static check of a user's training script: parsed with ``ast``, never imported or run.

Each pitfall becomes a :class:`~devicebench.env.finding.Finding` whose ``location`` is
``"path:line"``. The rules are heuristics over the syntax tree: they resolve import
aliases (``import tensorflow as tf``, ``from tensorflow import keras``) and follow calls
to functions defined in the same file, but know nothing about runtime values or types.

Layout: :mod:`.ast_tools` (small pure ``ast`` helpers), :mod:`.context` (what a rule
sees: aliases, models, compiled functions, snapshot; the rule registry), :mod:`.source`
(reading scripts and notebooks), and one module per family of rules
(:mod:`.keras_rules`, :mod:`.keras_usage_rules`, :mod:`.timing_rules`, :mod:`.tf_rules`,
:mod:`.jax_rules`, :mod:`.torch_rules`), each rule one function with its message beside it.
The forms that rounds 16-25 added under older rules' ids run from one dispatcher,
:func:`.forms.run_forms`, in a fixed order; :mod:`.forms_timing` holds the timing ones.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from devicebench.env.finding import Finding
from devicebench.env.snapshot import EnvSnapshot
from devicebench.errors import InputError
from devicebench.script_check import (
    api_rules,
    boundary_rules,
    compile_rules,
    data_rules,
    gap13_rules,
    gap14_rules,
    gap15_rules,
    gap_rules,
    guide_jax_tf,
    guide_torch,
    hot_rules,
    item_rules,
    jax_rules,
    keras_rules,
    keras_usage_rules,
    kind_rules,
    loop_rules,
    mlx_rules,
    name_rules,
    optimizer_rules,
    placement_rules,
    reach_rules,
    round9_rules,
    round10_rules,
    round11_rules,
    round12_rules,
    round13_rules,
    setup_rules,
    shape_rules,
    sync_rules,
    tf_rules,
    timing_rules,
    torch_rules,
    vector_rules,
)
from devicebench.script_check.context import RULES, Context
from devicebench.script_check.source import Notebook, read_notebook, read_text

__all__ = ["RULES", "ScriptReport", "ScriptSource", "check_script", "check_source",
           "inspect_script", "read_script"]
# importing the rule modules registers their rules
_RULE_MODULES = (keras_rules, keras_usage_rules, timing_rules, sync_rules, tf_rules,
                 jax_rules, torch_rules, shape_rules, placement_rules, data_rules, loop_rules,
                 reach_rules, mlx_rules, api_rules, compile_rules, setup_rules,
                 vector_rules, kind_rules, name_rules,
                 item_rules, hot_rules, boundary_rules,
                 optimizer_rules, guide_torch, guide_jax_tf, round9_rules,
                 round10_rules, round11_rules, gap_rules, gap13_rules,
                 round12_rules, gap14_rules, round13_rules, gap15_rules)


@dataclass(frozen=True)
class ScriptReport:
    """What the script check read and found.

    Attributes:
        path: the script or notebook as given.
        kind: ``"script"`` or ``"notebook"``.
        lines: lines of Python read (a notebook: of its code cells).
        code_cells: a notebook's code cells (0 for a script).
        skipped_cells: notebook cells that are not Python and were left out.
        findings: sorted by line; ``location`` is ``"path:line"`` or ``"path:cell N:line"``.
    """

    path: str
    kind: str
    lines: int
    findings: list[Finding] = field(default_factory=list)
    code_cells: int = 0
    skipped_cells: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (findings as a count; they are listed with the others)."""
        return {"path": self.path, "kind": self.kind, "lines": self.lines,
                "code_cells": self.code_cells, "skipped_cells": list(self.skipped_cells),
                "findings": len(self.findings)}


MAX_SOURCE_CHARS = 2**20
MAX_REPEATS = 10  # findings of one rule listed; the rest summed up in the last one


def cap_repeats(findings: list[Finding], keep: int = MAX_REPEATS) -> list[Finding]:
    """At most ``keep`` findings of each rule; the last one kept says how many more
    there are, and where the next ones are (a script with one pitfall on 120,000 lines
    gives 10 findings, not 120,000)."""
    by_id: dict[str, list[int]] = {}
    for i, f in enumerate(findings):
        by_id.setdefault(f.id, []).append(i)
    out = list(findings)
    drop: set[int] = set()
    for idxs in by_id.values():
        if len(idxs) <= keep:
            continue
        rest = idxs[keep:]
        where = ", ".join(findings[i].location for i in rest[:3]) + (
            ", ..." if len(rest) > 3 else "")
        last = idxs[keep - 1]
        out[last] = replace(findings[last], observed=f"{findings[last].observed} (and "
                            f"{len(rest):,} more like it: {where})")
        drop.update(rest)
    return [f for i, f in enumerate(out) if i not in drop]


@dataclass(frozen=True)
class ScriptSource:
    """A script or notebook read once and parsed (:func:`read_script`): what
    :func:`inspect_script` checks, so a pipe (``/dev/stdin``, ``<(...)``) is read once."""

    path: str
    kind: str  # "script" | "notebook"
    text: str
    tree: ast.Module
    notebook: Notebook | None = None


def read_script(path: str | Path) -> ScriptSource:
    """Read and parse a script or notebook, once.

    Raises:
        InputError: as :func:`inspect_script`.
    """
    p = Path(path)
    nb = read_notebook(p) if p.suffix.lower() == ".ipynb" and not p.is_dir() else None
    text = nb.source if nb is not None else read_text(p)
    if len(text) > MAX_SOURCE_CHARS:  # the rules take ~5 s a MB here: bound the time
        raise InputError(f"script {p} has {len(text) / 2**20:.1f} MB of Python, over the "
                         f"{MAX_SOURCE_CHARS // 2**20} MB devicebench reads",
                         why="a training script is kilobytes; this is generated code or data",
                         fix="pass the training script itself (the file that calls fit)")
    return ScriptSource(str(p), "notebook" if nb else "script", text, _parse(text, str(p)), nb)


def inspect_script(path: str | Path | ScriptSource,
                   snapshot: EnvSnapshot | None = None) -> ScriptReport:
    """Read a training script or notebook (never run it) and report what was read and found.

    ``.ipynb`` files are read cell by cell: code cells are joined in order (IPython magics
    and shell lines blanked), so imports in one cell count in the next, and each finding
    names its cell (``"nb.ipynb:cell 4:2"``: the fourth cell, counting markdown cells too).

    Raises:
        InputError: the file is missing, a directory, unreadable, not text, not a notebook
            (``.ipynb``) or does not parse.
    """
    src = path if isinstance(path, ScriptSource) else read_script(path)
    p, nb = Path(src.path), src.notebook
    if nb is not None:
        findings = check_source(nb.source, filename=str(p), snapshot=snapshot,
                                directory=p.parent, _cells=nb.cell_of, _tree=src.tree)
        return ScriptReport(str(p), "notebook", len(nb.origin), cap_repeats(findings),
                            nb.code_cells, nb.skipped)
    findings = check_source(src.text, filename=str(p), snapshot=snapshot, directory=p.parent,
                            _tree=src.tree)
    return ScriptReport(str(p), "script", len(src.text.splitlines()), cap_repeats(findings))


def check_script(path: str | Path, snapshot: EnvSnapshot | None = None) -> list[Finding]:
    """Read a training script (never run it) and report its device and speed pitfalls.

    Args:
        path: the ``.py`` file (or ``.ipynb`` notebook) to read.
        snapshot: the environment it will run in; tailors severities and fixes (e.g.
            "mixed_float16 on this CPU-only machine"). ``None``: assume Keras 3, no facts.

    Returns:
        Findings sorted by line, each with ``location="path:line"``.

    Raises:
        InputError: the file is missing, a directory, unreadable, not text, or does not parse.

    Example:
        >>> [f.id for f in check_script("train.py")]  # doctest: +SKIP
        ['script.input-shape', 'script.legacy-optimizer']
    """
    return inspect_script(path, snapshot).findings


def check_source(source: str, filename: str = "<script>",
                 snapshot: EnvSnapshot | None = None, *,
                 directory: Path | None = None,
                 _cells: Callable[[int], tuple[int, int]] | None = None,
                 _tree: ast.Module | None = None) -> list[Finding]:
    """Check Python source text: :func:`check_script` without the file handling.

    ``directory``: where the script's own modules live; imports of them are read too
    (e.g. a module that touches the GPU at import time).

    Raises:
        InputError: the source does not parse (the message names ``filename`` and the line).

    Example:
        >>> check_source("model.compile(run_eagerly=True)")[0].id
        'script.run-eagerly'
    """
    tree = _tree if _tree is not None else _parse(source, filename)
    ctx = Context(tree, source.splitlines(), filename, snapshot, cells=_cells,
                  directory=directory)
    for r in RULES.values():
        r.check(ctx)
    return ctx.findings()


def _parse(source: str, filename: str) -> ast.Module:
    try:
        return ast.parse(source, filename=filename)
    except SyntaxError as exc:
        raise InputError(f"script {filename} does not parse: line {exc.lineno}: {exc.msg}",
                         why="devicebench reads the script with Python's parser (never runs it)",
                         fix=f"fix the syntax at {filename}:{exc.lineno} "
                             f"(`python -m py_compile {filename}` shows it)") from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise InputError(f"script {filename} cannot be parsed: "
                         f"{str(exc) or type(exc).__name__}",
                         fix="pass a plain-text Python training script") from None
