"""Forms the earlier rules did not read (issue 24, round 11's step 0): the same pitfalls
written the way users write them.

Grouped from the seen misses of rounds 6-9 by the analysis gap behind them:

* framework-driven loops -- a ``Dataset``'s ``__getitem__``/``__iter__`` is a loop body the
  ``DataLoader`` drives (once per item), though the file shows no loop around it;
* decorator factories -- ``@run_with(...)`` whose factory wraps the function in
  ``tf.function``/``jax.jit``: applied to a ``def`` inside a loop, a new compiled function
  (and a trace) per iteration;
* loop bounds held on object attributes -- ``for i in range(model.NB)`` in a jitted function
  is a Python int fixed at trace time, unrolled like a literal bound;
* expressions in other positions -- a concatenation in a conditional expression
  (``t = mx.concat([t, y]) if t is not None else y``) grows the array like a plain one.

Each is called by the rule whose form it widens and reports under that rule's id, at
``info`` severity where the cost depends on a value the file does not fix.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from devicebench.script_check.ast_tools import LOOPS, last_name, target_names, walk
from devicebench.script_check.context import Context

_DATASET_BASES = ("Dataset", "IterableDataset")
_PER_ITEM = ("__getitem__", "__getitems__", "__iter__")
_CONCAT = ("torch.cat", "torch.concat", "numpy.concatenate", "numpy.append", "numpy.vstack",
           "numpy.hstack", "jax.numpy.concatenate", "tensorflow.concat", "mlx.core.concatenate",
           "mlx.core.concat")


def dataset_item_methods(ctx: Context) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Methods a data loader calls once per item: ``__getitem__``/``__iter__`` of a class of
    this file that derives from ``Dataset``/``IterableDataset`` (directly or through another
    class of the file)."""
    def is_dataset(cls: ast.ClassDef, depth: int = 3) -> bool:
        return depth > 0 and any(last_name(b) in _DATASET_BASES or isinstance(b, ast.Name)
                                 and b.id in ctx.classes and b.id != cls.name
                                 and is_dataset(ctx.classes[b.id], depth - 1) for b in cls.bases)
    return [m for cls in ctx.classes.values() if is_dataset(cls) for m in cls.body
            if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef) and m.name in _PER_ITEM]


def _divisor(ctx: Context, node: ast.AST, stop: ast.AST) -> ast.AST | None:
    """The divisor of an ``if n % k == 0:`` around ``node`` (below ``stop``), if any."""
    cur = ctx.parents.get(node)
    while cur is not None and cur is not stop:
        if isinstance(cur, ast.If):
            for b in ast.walk(cur.test):
                if isinstance(b, ast.BinOp) and isinstance(b.op, ast.Mod):
                    return b.right
        cur = ctx.parents.get(cur)
    return None


def gc_collect_per_item(ctx: Context) -> None:
    """``gc.collect()`` in a method the DataLoader calls per item
    (``script.empty-cache-in-loop``)."""
    for method in dataset_item_methods(ctx):
        for n in walk(method.body):
            if not (isinstance(n, ast.Call) and ctx.resolve(n.func) == "gc.collect"):
                continue
            if method.name == "__iter__" and not any(
                    isinstance(a, LOOPS) for a in ctx.between(n, method)):
                continue  # once per pass over the data, not per item
            k = _divisor(ctx, n, method)
            if isinstance(k, ast.Constant):
                continue  # every N items, N fixed in the file: housekeeping, not per item
            every = "" if k is None else f" (every `{ast.unparse(k)}` items; when that is 1, each)"
            ctx.add("script.empty-cache-in-loop", "warning" if k is None else "info", n,
                    f"in `{method.name}`, which the data loader calls for every item{every}",
                    why="a full garbage collection walks every Python object; run per item "
                        "(or per sample in each worker) it dominates the input pipeline "
                        "(NVIDIA/Megatron-Energon#66 made it configurable and rare)",
                    fix="remove it, or call it every few thousand items (a counter and "
                        "`if n % 10_000 == 0:`); the loader's workers free their batches anyway")


def _compiling_factory(ctx: Context, dec: ast.AST) -> str:
    """"tf"/"jax"/"torch" when ``dec`` is ``@factory(...)`` (or ``@factory``) of a function of
    this file whose body compiles what it wraps (a nested ``@tf.function`` def, or a
    ``jax.jit(fn)`` call)."""
    name = dec.func if isinstance(dec, ast.Call) else dec
    if not (isinstance(name, ast.Name) and name.id in ctx.funcs):
        return ""
    for n in ast.walk(ctx.funcs[name.id]):
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef):
            kind = next((ctx.compiler(d) for d in n.decorator_list if ctx.compiler(d)), "")
            if kind:
                return kind
        if isinstance(n, ast.Call) and n.args and ctx.compiler(n.func):
            return ctx.compiler(n.func)
    return ""


def decorator_factory_in_loop(ctx: Context) -> None:
    """A ``def`` inside a loop decorated by a factory that compiles (``script.jit-in-loop``)."""
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, LOOPS) or ctx.is_compiled_scope(loop):
            continue
        defs = [c for n in [loop, *walk(loop.body)] for c in ast.iter_child_nodes(n)
                if isinstance(c, ast.FunctionDef | ast.AsyncFunctionDef)]
        for fn in defs:
            for dec in fn.decorator_list:
                kind = _compiling_factory(ctx, dec)
                if not kind:
                    continue
                ctor = {"jax": "jax.jit", "tf": "tf.function", "torch": "torch.compile"}[kind]
                ctx.add("script.jit-in-loop", "warning", fn,
                        f"`@{ast.unparse(dec)[:50]}` wraps `{fn.name}` in `{ctor}`, and this "
                        f"`def` runs on every iteration of the loop at {ctx.line(loop.lineno)}",
                        how=f"`{ctor}` (through a decorator factory)", ctor=ctor,
                        reason="the decorator runs each time the `def` does: a new compiled "
                               "function each iteration, traced and compiled again "
                               "(microsoft/onnxruntime#27665)")
                break


def attribute_bounded_loops(ctx: Context, name: str, fn: ast.FunctionDef | ast.AsyncFunctionDef,
                            structural: Callable[[ast.AST], bool]) -> None:
    """``for i in range(model.n)`` in jitted ``fn`` (``script.python-loop-in-jit``): the bound
    is an attribute of one of its arguments, a Python number at trace time."""
    params = {a.arg for a in fn.args.args}
    for loop in walk(fn.body):
        if not isinstance(loop, ast.For):
            continue
        it = loop.iter
        if isinstance(it, ast.Call) and last_name(it) == "reversed" and it.args:
            it = it.args[0]
        if not (isinstance(it, ast.Call) and last_name(it) == "range" and it.args):
            continue
        hi = it.args[1] if len(it.args) > 1 else it.args[0]
        if not (isinstance(hi, ast.Attribute) and isinstance(hi.value, ast.Name)
                and hi.value.id in params and structural(hi)):
            continue
        ctx.add("script.python-loop-in-jit", "info", loop,
                f"in `{name}`, which is jitted; `{ast.unparse(hi)}` is a Python number "
                "fixed at trace time, so the loop is unrolled that many times",
                n=f"`{ast.unparse(hi)}`")


def concat_in_conditional(ctx: Context) -> None:
    """``t = cat([t, y]) if t is not None else y`` in a loop (``script.growing-tensor``);
    also MLX's ``mx.concatenate``, which the plain rule does not list."""
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, LOOPS) or ctx.is_compiled_scope(loop):
            continue
        for n in walk(loop.body, lambda x: isinstance(x, LOOPS)):
            if not (isinstance(n, ast.Assign) and len(n.targets) == 1):
                continue
            value = n.value
            options = [value.body, value.orelse] if isinstance(value, ast.IfExp) else [value]
            names = set(target_names(n.targets[0]))
            for call in options:
                q = ctx.resolve(call.func) if isinstance(call, ast.Call) else ""
                if q not in _CONCAT or not call.args or (
                        not isinstance(value, ast.IfExp) and not q.startswith("mlx.")):
                    continue
                first = call.args[0]
                parts = first.elts if isinstance(first, ast.Tuple | ast.List) else [first]
                if any(isinstance(p, ast.Name) and p.id in names for p in parts):
                    ctx.add("script.growing-tensor", "info", n,
                            f"`{ast.unparse(n)[:60]}` in the loop at {ctx.line(loop.lineno)}",
                            fn=q, compiled="")
