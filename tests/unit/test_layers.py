"""The import graph points one way: a package imports only packages below it in LAYERS
(the README's "Layout" section draws the same order), and no two modules import each
other, directly or round a longer loop. Every import counts, the ones inside functions
too: an import deferred to call time is still an arrow."""

from __future__ import annotations

from pathlib import Path

import devicebench
from tests import layer_scan

ROOT = Path(devicebench.__file__).resolve().parent

# Lowest first. A package may import the packages before it, never one after it.
LAYERS = (
    "errors", "fmt", "schema", "progress", "measure",  # leaves: no devicebench import
    "launch",  # worker processes
    "backends",  # per-framework code (run in workers)
    "validate",  # one check of every request's arguments (the CLI's limits), for CLI and API
    "env",  # the doctor: probe -> snapshot -> checks -> findings
    "script_check",  # static analysis of user scripts and notebooks (never runs them)
    "workloads",
    "trials",  # specs, results, the worker protocol, the engine
    "ops",  # the op sweep
    "store",  # the results database
    "results",  # figures from stored runs (report, compare)
    "monitor",  # the training monitor (stores its blocks)
    "keras",  # the monitor's former import path, kept: devicebench.keras.TrainingMonitor
    "advisor",  # the advise job: search, budget, verdict, explanations
    "profiles",  # recorded machines and their replay through the advisor
    "jobs",  # one module per command's orchestration: typed outcomes, one progress protocol
    "fleet",  # the same jobs on every node of a Ray cluster
    "report",  # renderers
    "api",  # the public library calls
    "cli", "__main__", "__init__",
)
def _graph() -> dict[str, list[tuple[int, str]]]:
    return layer_scan.graph(ROOT)


def test_every_package_has_a_layer() -> None:
    packages = {layer_scan.package(m) for m in _graph()}
    assert packages <= set(LAYERS), f"add to LAYERS: {sorted(packages - set(LAYERS))}"


def test_no_package_imports_a_higher_layer() -> None:
    upward = layer_scan.upward(_graph(), LAYERS)
    assert not upward, "imports pointing up the layers:\n" + "\n".join(upward)


def test_no_import_cycle_between_modules() -> None:
    cycles = layer_scan.cycles(layer_scan.module_edges(_graph()))
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_scan_sees_an_upward_import(tmp_path: Path) -> None:
    """The scan itself works: an upward import in a module is found."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from devicebench.report.run import render_comparison\n")
    assert layer_scan.imports(bad) == [(2, "devicebench.report.run")]
