"""The import graph points one way: a package imports only packages below it in LAYERS
(the README's "Layout" section draws the same order), and no two modules import each
other, directly or round a longer loop. Every import counts, the ones inside functions
too: an import deferred to call time is still an arrow."""

from __future__ import annotations

import ast
from pathlib import Path

import devicebench

ROOT = Path(devicebench.__file__).resolve().parent

# Lowest first. A package may import the packages before it, never one after it.
LAYERS = (
    "errors", "fmt", "schema", "measure",  # leaves: no devicebench import
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
    "fleet",  # the same jobs on every node of a Ray cluster
    "report",  # renderers
    "api",  # the public library calls
    "cli", "__main__", "__init__",
)
# `from devicebench import __version__`: a constant of the package root, which Python
# has loaded before any of its modules.
ROOT_CONSTANTS = {"__version__"}


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every devicebench import in ``path``, at any depth."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            # A bare `import devicebench` reads the package's own path (a constant too).
            out += [(node.lineno, a.name) for a in node.names
                    if a.name.split(".")[0] == "devicebench" and a.name != "devicebench"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] == "devicebench":
            if node.module == "devicebench":
                out += [(node.lineno, f"devicebench.{a.name}") for a in node.names
                        if a.name not in ROOT_CONSTANTS]
            else:
                out.append((node.lineno, node.module))
    return out


def _graph() -> dict[str, list[tuple[int, str]]]:
    return {_module_name(p): _imports(p) for p in sorted(ROOT.rglob("*.py"))}


def test_every_package_has_a_layer() -> None:
    packages = {_package(m) for m in _graph()}
    assert packages <= set(LAYERS), f"add to LAYERS: {sorted(packages - set(LAYERS))}"


def test_no_package_imports_a_higher_layer() -> None:
    rank = {name: i for i, name in enumerate(LAYERS)}
    upward = []
    for module, imports in _graph().items():
        src = _package(module)
        for line, target in imports:
            dst = _package(target)
            if dst != src and rank.get(dst, -1) >= rank[src]:
                upward.append(f"{module}:{line} imports {target} ({src} -> {dst})")
    assert not upward, "imports pointing up the layers:\n" + "\n".join(upward)


def test_no_import_cycle_between_modules() -> None:
    graph = _graph()
    known = set(graph)

    def resolve(target: str) -> str | None:
        # `from pkg.mod import name` names a module; `from pkg import mod` may too.
        while target and target not in known:
            target = target.rpartition(".")[0]
        return target or None

    edges = {m: {t for _, imp in imports if (t := resolve(imp)) and t != m}
             for m, imports in graph.items()}
    # A package's __init__ re-exporting its own modules is not a cycle worth naming.
    for m in edges:
        edges[m] = {t for t in edges[m] if not (m.startswith(t + ".") and
                                                 graph.get(t) is not None)}
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for t in sorted(edges[m]):
            if state.get(t) == 1:
                cycles.append(path[path.index(t):] + [t] if t in path else [m, t])
            elif t not in state:
                visit(t, [*path, t])
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            visit(m, [m])
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_scan_sees_an_upward_import(tmp_path: Path) -> None:
    """The scan itself works: an upward import in a module is found."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from devicebench.report.run import render_comparison\n")
    assert _imports(bad) == [(2, "devicebench.report.run")]
