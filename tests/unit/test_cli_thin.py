"""The CLI is a thin layer: each command parses its arguments, calls one job
(devicebench.jobs) and renders the outcome. So no module of devicebench/cli/ imports the
packages a job orchestrates — advisor, trials, store, ops, profiles, launch — at any
depth (imports inside functions count, as in test_layers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

import devicebench
from tests import layer_scan

CLI = Path(devicebench.__file__).resolve().parent / "cli"
JOB_PACKAGES = ("advisor", "trials", "store", "ops", "profiles", "launch")


def _reaching(path: Path) -> list[str]:
    return [f"{path.name}:{line} imports {target}"
            for line, target in layer_scan.imports(path)
            if layer_scan.package(target) in JOB_PACKAGES]


@pytest.mark.parametrize("path", sorted(CLI.glob("*.py")), ids=lambda p: p.name)
def test_a_cli_module_calls_jobs_not_their_parts(path: Path) -> None:
    found = _reaching(path)
    assert not found, "the CLI reaches past the jobs:\n" + "\n".join(found)


def test_the_scan_sees_a_cli_module_reaching_past_its_job(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def cmd():\n    if True:\n        from devicebench.store import ResultStore\n")
    assert _reaching(bad) == ["bad.py:3 imports devicebench.store"]
