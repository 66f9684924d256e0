"""Small pure helpers over Python's ``ast`` shared by the script rules."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Iterator

KERAS_PREFIXES = ("tensorflow.keras.", "tensorflow.python.keras.", "keras.src.", "keras.api.",
                  "keras.", "tf_keras.")
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
LOOPS = (ast.For, ast.AsyncFor, ast.While)
COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def loop_body(node: ast.AST) -> list[ast.AST]:
    """What a loop repeats: a ``for``/``while`` body, or a comprehension's element
    (``[run(d) for d in dims]`` calls ``run`` once per item, like a ``for`` loop)."""
    if isinstance(node, ast.DictComp):
        return [node.key, node.value]
    if isinstance(node, COMPREHENSIONS):
        return [node.elt]
    return list(getattr(node, "body", []))


def dotted(node: ast.AST) -> str:
    """``a.b.c`` for a Name/Attribute chain, "" otherwise."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else ""


def last_name(node: ast.AST) -> str:
    """The last component of a call's callee: ``opt.step()`` -> ``"step"``."""
    func = node.func if isinstance(node, ast.Call) else node
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def root_name(node: ast.AST) -> str:
    """The variable at the root of ``a.b(c).d[0]`` ("a"), "" if there is none."""
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else ""


def target_names(target: ast.AST) -> list[str]:
    """Variables bound by an assignment target: ``a``, ``a, (b, *c)`` (not ``self.x``)."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Starred):
        return target_names(target.value)
    if isinstance(target, ast.Tuple | ast.List):
        return [n for e in target.elts for n in target_names(e)]
    return []


def keras_rel(q: str) -> str | None:
    """``"tensorflow.keras.layers.Dense"`` -> ``"layers.Dense"``; None if not Keras."""
    return next((q[len(p):] for p in KERAS_PREFIXES if q.startswith(p)), None)


def walk(roots: Iterable[ast.AST], skip: Callable[[ast.AST], bool] | None = None,
         ) -> Iterator[ast.AST]:
    """Nodes under ``roots`` in source order, not entering nested defs, classes or lambdas."""
    def keep(nodes: Iterable[ast.AST]) -> list[ast.AST]:
        return [n for n in nodes if not isinstance(n, SCOPES) and not (skip and skip(n))]

    stack = keep(reversed(list(roots)))
    while stack:
        node = stack.pop()
        yield node
        stack.extend(keep(reversed(list(ast.iter_child_nodes(node)))))


def skip_in_step(node: ast.AST) -> bool:
    """Nested loops are checked on their own; ``if step % N == 0:`` syncs only every N steps."""
    return isinstance(node, LOOPS) or isinstance(node, ast.If) and any(
        isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod) for n in ast.walk(node.test))


def outer_loops(stmt: ast.stmt) -> list[ast.stmt]:
    """The outermost loops in ``stmt`` (itself if it is one), not entering definitions."""
    if isinstance(stmt, LOOPS):
        return [stmt]
    if isinstance(stmt, SCOPES) or not hasattr(stmt, "body"):
        return []
    blocks = [stmt.body, getattr(stmt, "orelse", []), getattr(stmt, "finalbody", [])]
    blocks += [h.body for h in getattr(stmt, "handlers", [])]
    return [loop for block in blocks for s in block for loop in outer_loops(s)]


def blocks(tree: ast.AST) -> Iterator[list[ast.stmt]]:
    """Every statement list (body, orelse, finalbody, handlers) in the tree."""
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                yield block


def elements(value: object) -> int:
    """Number of scalars in a nested list/tuple literal."""
    return sum(elements(v) for v in value) if isinstance(value, list | tuple) else 1


def number(text: str) -> float | None:
    """``float(text)`` or None."""
    try:
        return float(text)
    except ValueError:
        return None


def const(node: ast.AST | None) -> object:
    """The literal value of ``node``, or None when it is not a literal."""
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def keyword(call: ast.Call, name: str) -> ast.expr | None:
    """The value of keyword argument ``name`` of ``call``, or None."""
    return next((k.value for k in call.keywords if k.arg == name), None)
