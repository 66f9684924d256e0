"""How the corpus tests judge a finding's line (one rule for every corpus set).

Convention (where a finding points, and where a collector puts the ``# pitfall:`` mark):
the statement of the costly operation the expert named -- the slow, syncing, copying,
recompiling or unguarded call itself; for a whole function that runs eagerly or un-jitted
and whose fix is to compile it, the function's ``def``.

Judging: a finding is at the marked line when both lines belong to the same statement. A
simple statement owns all its physical lines (a call spread over three lines is one
statement); a compound statement (``def``, ``class``, ``for``, ``while``, ``with``, ``if``,
``try``) owns only its header -- its decorators through the line before its body -- so a
finding on a loop header never matches a mark on a line of the loop's body, nor the reverse.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

from devicebench.script_check.source import read_notebook


def _spans(tree: ast.AST) -> list[tuple[int, int]]:
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt):
            continue
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
            end = max(node.lineno, body[0].lineno - 1)
        else:
            end = node.end_lineno or node.lineno
        out.append((start, end))
    return out


def _keys_of_source(source: str) -> dict[int, tuple[int, int]]:
    """line -> (first, last) line of the innermost statement (header) owning it."""
    keys: dict[int, tuple[int, int]] = {}
    for start, end in sorted(_spans(ast.parse(source)), key=lambda s: s[0] - s[1]):
        for line in range(start, end + 1):
            keys[line] = (start, end)  # narrower spans are written last and win
    return keys


def statement_keys(path: Path) -> dict[str, tuple[int, int]]:
    """position as a finding names it ("12", or "cell 3:4") -> its statement's key."""
    if path.suffix != ".ipynb":
        return {str(k): v for k, v in _keys_of_source(path.read_text()).items()}
    nb = read_notebook(path)
    return {f"cell {c}:{r}": v for line, v in _keys_of_source(nb.source).items()
            for c, r in [nb.cell_of(line)]}


def marked_lines(path: Path) -> list[tuple[str, str]]:
    """(position as a finding names it, text) of every line: "12", or "cell 3:4" in a
    notebook (cells counted from 1, markdown cells too)."""
    if path.suffix != ".ipynb":
        return [(str(i), t) for i, t in enumerate(path.read_text().splitlines(), 1)]
    out = []
    for n, cell in enumerate(json.loads(path.read_text())["cells"], 1):
        if cell["cell_type"] == "code":
            src = "".join(cell["source"]).splitlines()
            out += [(f"cell {n}:{i}", t) for i, t in enumerate(src, 1)]
    return out
