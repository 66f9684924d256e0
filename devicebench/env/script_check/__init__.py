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
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devicebench.env.finding import Finding
from devicebench.env.script_check import (
    data_rules,
    jax_rules,
    keras_rules,
    keras_usage_rules,
    placement_rules,
    shape_rules,
    tf_rules,
    timing_rules,
    torch_rules,
)
from devicebench.env.script_check.context import RULES, Context
from devicebench.env.script_check.source import read_notebook, read_text
from devicebench.env.snapshot import EnvSnapshot
from devicebench.errors import InputError

__all__ = ["RULES", "ScriptReport", "check_script", "check_source", "inspect_script"]
# importing the rule modules registers their rules
_RULE_MODULES = (keras_rules, keras_usage_rules, timing_rules, tf_rules, jax_rules,
                 torch_rules, shape_rules, placement_rules, data_rules)


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


def inspect_script(path: str | Path, snapshot: EnvSnapshot | None = None) -> ScriptReport:
    """Read a training script or notebook (never run it) and report what was read and found.

    ``.ipynb`` files are read cell by cell: code cells are joined in order (IPython magics
    and shell lines blanked), so imports in one cell count in the next, and each finding
    names its cell (``"nb.ipynb:cell 4:2"``: the fourth cell, counting markdown cells too).

    Raises:
        InputError: the file is missing, a directory, unreadable, not text, not a notebook
            (``.ipynb``) or does not parse.
    """
    p = Path(path)
    if p.suffix.lower() == ".ipynb" and not p.is_dir():
        nb = read_notebook(p)
        findings = check_source(nb.source, filename=str(p), snapshot=snapshot,
                                directory=p.parent, _cells=nb.cell_of)
        return ScriptReport(str(p), "notebook", len(nb.origin), findings, nb.code_cells,
                            nb.skipped)
    text = read_text(p)
    findings = check_source(text, filename=str(p), snapshot=snapshot, directory=p.parent)
    return ScriptReport(str(p), "script", len(text.splitlines()), findings)


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
                 _cells: Callable[[int], tuple[int, int]] | None = None) -> list[Finding]:
    """Check Python source text: :func:`check_script` without the file handling.

    ``directory``: where the script's own modules live; imports of them are read too
    (e.g. a module that touches the GPU at import time).

    Raises:
        InputError: the source does not parse (the message names ``filename`` and the line).

    Example:
        >>> check_source("model.compile(run_eagerly=True)")[0].id
        'script.run-eagerly'
    """
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as exc:
        raise InputError(f"script {filename} does not parse: line {exc.lineno}: {exc.msg}",
                         why="devicebench reads the script with Python's parser (never runs it)",
                         fix=f"fix the syntax at {filename}:{exc.lineno} "
                             f"(`python -m py_compile {filename}` shows it)") from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise InputError(f"script {filename} cannot be parsed: {exc}",
                         fix="pass a plain-text Python training script") from None
    ctx = Context(tree, source.splitlines(), filename, snapshot, cells=_cells,
                  directory=directory)
    for r in RULES.values():
        r.check(ctx)
    return ctx.findings()
