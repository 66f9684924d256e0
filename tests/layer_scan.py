"""The ast walk of devicebench's import graph, shared by ``tests/unit/test_layers.py``
(which holds the layer order) and ``bench/import_graph.py`` (which counts the graph of
any checkout). Every import counts, the ones inside functions too."""

from __future__ import annotations

import ast
from pathlib import Path

# `from devicebench import __version__`: a constant of the package root, which Python
# has loaded before any of its modules.
ROOT_CONSTANTS = {"__version__"}


def module_name(path: Path, root: Path) -> str:
    """``root/advisor/advice.py`` -> ``devicebench.advisor.advice`` (``root`` is the
    package directory)."""
    rel = path.relative_to(root.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def package(module: str) -> str:
    """The layer a module belongs to: its first component under devicebench."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports(path: Path, tree: ast.AST | None = None) -> list[tuple[int, str]]:
    """(line, module) for every devicebench import in ``path`` (or in ``tree``, a part
    of it), at any depth."""
    out = []
    node_tree = tree if tree is not None else ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(node_tree):
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


def graph(root: Path) -> dict[str, list[tuple[int, str]]]:
    """Every module under ``root`` and the devicebench imports it makes."""
    return {module_name(p, root): imports(p) for p in sorted(root.rglob("*.py"))}


def resolver(known: set[str]):
    """``from pkg.mod import name`` names a module; ``from pkg import mod`` may too: the
    longest known module a dotted import target starts with."""
    def resolve(target: str) -> str | None:
        while target and target not in known:
            target = target.rpartition(".")[0]
        return target or None

    return resolve


def module_edges(g: dict[str, list[tuple[int, str]]]) -> dict[str, set[str]]:
    """module -> the modules it imports (a package's ``__init__`` re-exporting its own
    modules is left out: not a cycle worth naming)."""
    resolve = resolver(set(g))
    edges = {m: {t for _, imp in imps if (t := resolve(imp)) and t != m}
             for m, imps in g.items()}
    for m in edges:
        edges[m] = {t for t in edges[m] if not (m.startswith(t + ".") and g.get(t) is not None)}
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles a depth-first walk meets (each as a closed path)."""
    state: dict[str, int] = {}
    found: list[list[str]] = []

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for t in sorted(edges[m]):
            if state.get(t) == 1:
                found.append(path[path.index(t):] + [t] if t in path else [m, t])
            elif t not in state:
                visit(t, [*path, t])
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            visit(m, [m])
    return found


def upward(g: dict[str, list[tuple[int, str]]], layers: tuple[str, ...]) -> list[str]:
    """Each import of a package by one below it in ``layers``, as a line."""
    rank = {name: i for i, name in enumerate(layers)}
    out = []
    for module, imps in g.items():
        src = package(module)
        for line, target in imps:
            dst = package(target)
            if dst != src and rank.get(dst, -1) >= rank[src]:
                out.append(f"{module}:{line} imports {target} ({src} -> {dst})")
    return out
