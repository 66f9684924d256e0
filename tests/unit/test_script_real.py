"""The script check over real scripts from public issues: expert-named pitfalls found at
the right line, no warning or error anywhere else.

Markers in the fixtures (see tests/fixtures/scripts/real/README.md): ``# expect: id[, id]``
on a line, ``# expect-uncovered: ...`` for a named pitfall no rule covers, ``snapshot: mac``
in the header.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from devicebench.script_check import inspect_script
from tests.unit.test_script_rules import mac_snapshot

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "scripts" / "real"
SCRIPTS = sorted(p for p in REAL.iterdir() if p.suffix in (".py", ".ipynb"))
_EXPECT = re.compile(r"#\s*expect:\s*([\w.\-, ]+)")


@dataclass
class Expected:
    where: set[tuple[str, str]] = field(default_factory=set)  # (id, "line" or "cell N:line")
    uncovered: int = 0
    mac: bool = False


def _lines(path: Path) -> list[tuple[str, str]]:
    """(position, text) of every line; position as findings name it."""
    if path.suffix == ".py":
        return [(str(i), t) for i, t in enumerate(path.read_text().splitlines(), 1)]
    out = []
    for n, cell in enumerate(json.loads(path.read_text())["cells"], 1):
        src = "".join(cell["source"]).splitlines()
        out += [(f"cell {n}:{i}", t) for i, t in enumerate(src, 1)]
    return out


def expected(path: Path) -> Expected:
    exp = Expected()
    for pos, text in _lines(path):
        m = _EXPECT.search(text)
        if m:
            exp.where |= {(fid.strip(), pos) for fid in m.group(1).split(",") if fid.strip()}
        exp.uncovered += "expect-uncovered:" in text
        exp.mac |= "snapshot: mac" in text
    return exp


def run(path: Path) -> tuple[Expected, set[tuple[str, str]], list[str]]:
    exp = expected(path)
    report = inspect_script(path, mac_snapshot() if exp.mac else None)
    found = {(f.id, f.location[len(str(path)) + 1:]) for f in report.findings}
    false_alarms = [f"{f.severity} {f.id} at {f.location}" for f in report.findings
                    if (f.id, f.location[len(str(path)) + 1:]) not in exp.where
                    and f.severity != "info"]
    return exp, found, false_alarms


@pytest.mark.parametrize("path", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_real_script(path: Path) -> None:
    exp, found, false_alarms = run(path)
    assert "Source: https://" in path.read_text()[:600], "header must name the source URL"
    missing = exp.where - found
    assert not missing, f"expert-named pitfalls not found: {sorted(missing)}"
    assert not false_alarms, false_alarms


def test_real_scripts_summary() -> None:
    """found/expected over the whole set; printed with -s for the report."""
    total = found_n = uncovered = alarms = 0
    for path in SCRIPTS:
        exp, found, false_alarms = run(path)
        total += len(exp.where) + exp.uncovered
        uncovered += exp.uncovered
        found_n += len(exp.where & found)
        alarms += len(false_alarms)
    print(f"\nreal scripts: {len(SCRIPTS)}; expert-named pitfalls found {found_n}/{total} "
          f"({uncovered} not covered by any rule); false alarms (warning/error) {alarms}")
    assert len(SCRIPTS) >= 10
    assert found_n >= 0.8 * total and alarms == 0


def test_checking_scripts_imports_no_framework() -> None:
    """Pure AST analysis: reading every real script leaves no framework in sys.modules."""
    import subprocess
    import sys

    code = ("import sys\nfrom pathlib import Path\n"
            "from devicebench.script_check import inspect_script\n"
            f"for p in sorted(Path({str(REAL)!r}).iterdir()):\n"
            "    if p.suffix in ('.py', '.ipynb'):\n        inspect_script(p)\n"
            "print(','.join(m for m in ('tensorflow', 'jax', 'torch', 'keras', 'flax', 'optax')"
            " if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == ""
