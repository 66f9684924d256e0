"""Count devicebench's import graph, and the modules the main job's call path passes
through, in this checkout or another one (``--tree DIR``: a directory holding
``devicebench/`` and ``tests/unit/test_layers.py``, e.g. ``git archive REV devicebench
tests/unit/test_layers.py | tar -x -C DIR``).

    python bench/import_graph.py [--tree DIR] [--entry devicebench.cli:_root] [--list]

Figures (the walk is ``tests/layer_scan.py``'s, as ``tests/unit/test_layers.py`` runs it:
every import counts, inside functions too):

- modules, packages (a package is a layer: ``devicebench.X``; ``api.py`` is one too);
- edges between packages: distinct (importing package, imported package) pairs, and the
  module-to-module imports that cross a package boundary;
- edges pointing up: imports of a package from one below it in that tree's ``LAYERS``;
  ``from devicebench import __version__`` (a constant of the package root) is counted
  apart;
- cycles: module import cycles;
- the main job's call path: from ``--entry`` (``module:function``; default the root
  command, which runs the main job), the functions and classes it names — imported by
  name, or defined in the same module and called by name — followed transitively; the
  modules they live in are the path. Calls through an attribute of an object (a
  method of a value returned elsewhere) are not followed, so this is the static
  skeleton of the path, the same rule for both trees.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests import layer_scan  # noqa: E402


def _layers(tree: Path) -> tuple[str, ...]:
    """The LAYERS tuple of the tree's tests/unit/test_layers.py, read without importing."""
    src = (tree / "tests" / "unit" / "test_layers.py").read_text(encoding="utf-8")
    for node in ast.parse(src).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "LAYERS"
                                                for t in node.targets):
            return tuple(ast.literal_eval(node.value))
    raise SystemExit(f"no LAYERS in {tree}/tests/unit/test_layers.py")


class CallPath:
    """The static call skeleton from one function (see the module docstring)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.files = {layer_scan.module_name(p, root): p for p in root.rglob("*.py")}
        self.trees: dict[str, ast.Module] = {}
        self.seen: set[tuple[str, str]] = set()
        self.modules: set[str] = set()

    def _tree(self, module: str) -> ast.Module:
        if module not in self.trees:
            self.trees[module] = ast.parse(self.files[module].read_text(encoding="utf-8"))
        return self.trees[module]

    def _module_bindings(self, module: str) -> dict[str, tuple[str, str | None]]:
        """Top-level ``from devicebench.X import name``: name -> (module, attr)."""
        out: dict[str, tuple[str, str | None]] = {}
        for node in self._tree(module).body:
            out.update(self._bindings(node))
        return out

    def _bindings(self, node: ast.AST) -> dict[str, tuple[str, str | None]]:
        out: dict[str, tuple[str, str | None]] = {}
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] == "devicebench":
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                if sub in self.files:
                    out[a.asname or a.name] = (sub, None)
                elif node.module in self.files:
                    out[a.asname or a.name] = (node.module, a.name)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name in self.files:
                    out[a.asname or a.name] = (a.name, None)
        return out

    def visit(self, module: str, name: str | None) -> None:
        if module not in self.files or (module, str(name)) in self.seen:
            return
        self.seen.add((module, str(name)))
        self.modules.add(module)
        if name is None:
            return
        tree = self._tree(module)
        defs = {n.name: n for n in tree.body
                if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}
        node = defs.get(name)
        if node is None:  # a re-export: follow the package's own binding
            target = self._module_bindings(module).get(name)
            if target is not None:
                self.visit(*target)
            return
        used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        local: dict[str, tuple[str, str | None]] = {}
        for inner in ast.walk(node):
            local.update(self._bindings(inner))
        for alias, target in local.items():  # imported inside: imported to be used
            self.visit(*target)
            if target[1] is None:
                self._attributes(node, alias, target[0])
        for alias, target in self._module_bindings(module).items():
            if alias in used:
                self.visit(*target)
                if target[1] is None:
                    self._attributes(node, alias, target[0])
        for called in used & set(defs):
            self.visit(module, called)

    def _attributes(self, node: ast.AST, alias: str, module: str) -> None:
        """``alias.f(...)`` where ``alias`` is a module: follow ``module.f``."""
        for n in ast.walk(node):
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) \
                    and n.value.id == alias:
                self.visit(module, n.attr)


def measure(tree: Path, entry: str) -> dict:
    root = tree / "devicebench"
    g = layer_scan.graph(root)
    layers = _layers(tree)
    edges = layer_scan.module_edges(g)
    pkg_pairs = {(layer_scan.package(m), layer_scan.package(t))
                 for m, ts in edges.items() for t in ts
                 if layer_scan.package(m) != layer_scan.package(t)}
    crossing = sum(layer_scan.package(m) != layer_scan.package(t)
                   for m, ts in edges.items() for t in ts)
    constants = sum(1 for p in root.rglob("*.py")
                    for n in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
                    if isinstance(n, ast.ImportFrom) and n.module == "devicebench"
                    and any(a.name in layer_scan.ROOT_CONSTANTS for a in n.names))
    path = CallPath(root)
    module, _, func = entry.partition(":")
    path.visit(module, func or None)
    return {"modules": len(g), "packages": len({layer_scan.package(m) for m in g}),
            "package_edges": len(pkg_pairs), "crossing_imports": crossing,
            "upward": layer_scan.upward(g, layers), "version_imports": constants,
            "cycles": layer_scan.cycles(edges), "path": sorted(path.modules)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", type=Path, default=Path(__file__).resolve().parent.parent)
    ap.add_argument("--entry", default="devicebench.cli:_root")
    ap.add_argument("--list", action="store_true", help="list the call path's modules")
    args = ap.parse_args()
    m = measure(args.tree.resolve(), args.entry)
    print(f"modules: {m['modules']}")
    print(f"packages (layers): {m['packages']}")
    print(f"edges between packages: {m['package_edges']} distinct package pairs, "
          f"{m['crossing_imports']} module imports crossing a package")
    print(f"edges pointing up the LAYERS: {len(m['upward'])} "
          f"(plus {m['version_imports']} `from devicebench import __version__`)")
    for line in m["upward"]:
        print(f"  {line}")
    print(f"import cycles between modules: {len(m['cycles'])}")
    by_pkg: dict[str, list[str]] = defaultdict(list)
    for mod in m["path"]:
        by_pkg[layer_scan.package(mod)].append(mod)
    print(f"main job call path from {args.entry}: {len(m['path'])} modules in "
          f"{len(by_pkg)} packages")
    for pkg, mods in sorted(by_pkg.items()):
        names = ", ".join(x.split(".", 1)[1] if "." in x else x for x in mods)
        print(f"  {pkg}: {len(mods)}" + (f"  ({names})" if args.list else ""))


if __name__ == "__main__":
    main()
