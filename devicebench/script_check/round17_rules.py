"""Pitfall forms first seen in corpus_round16's dev half (issue 24, round 17), under existing
ids, all ``info`` (the cost depends on sizes the file does not show):

- ``if torch.isnan(x) or torch.isinf(x):`` -- Python truthiness of a tensor predicate in a
  loop that runs an optimisation step (or in what it calls): the host reads the device
  boolean and waits, on every step (``script.sync-in-step-loop``; cyyever,
  huggingface/transformers#44123, 2026: ``torch.where`` keeps the filter on the device);
- ``self.table[i].to(<device>)`` in a method a loop calls on every iteration: one blocking
  host-to-device copy of an element of a table the object keeps on the host, per iteration
  (``script.blocking-h2d-copy``; adrianrfreedman, huggingface/diffusers#14589, 2026: the
  scheduler's per-step ``self.sigmas[self.step_index].to(device)``).
"""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import keyword, walk
from devicebench.script_check.context import Context
from devicebench.script_check.dataflow import callees
from devicebench.script_check.kinds import repeat_site

_PREDICATES = ("torch.isnan", "torch.isinf", "torch.isfinite", "torch.isneginf",
               "torch.isposinf", "torch.equal", "torch.any", "torch.all")


def _step_loops(ctx: Context) -> list[ast.For | ast.While]:
    return [n for n in ast.walk(ctx.tree) if isinstance(n, ast.For | ast.While)
            and any(ctx.is_step(x) for x in walk(n.body))]


def _bare_predicate(ctx: Context, test: ast.AST) -> ast.Call | None:
    """A tensor predicate whose truth Python takes (not under ``.item()`` or ``bool`` of a
    host value): ``torch.isnan(x)``, ``torch.isfinite(x).all()``."""
    for n in ast.walk(test):
        if isinstance(n, ast.Call) and ctx.resolve(n.func) in _PREDICATES:
            parent = ctx.parents.get(n)
            while isinstance(parent, ast.Attribute) and parent.attr in ("all", "any"):
                parent = ctx.parents.get(ctx.parents.get(parent))
            if not (isinstance(parent, ast.Attribute) and parent.attr == "item"):
                return n
    return None


def _predicate_truthiness_in_step(ctx: Context) -> None:
    for loop in _step_loops(ctx):
        bodies = [(list(loop.body), f"the training loop at {ctx.line(loop.lineno)}")]
        bodies += [(list(fn.body), f"`{fn.name}`, which the training loop at "
                    f"{ctx.line(loop.lineno)} calls") for _, fn in callees(ctx, list(loop.body))]
        for body, where in bodies:
            for n in walk(body):
                if not isinstance(n, ast.If | ast.While):
                    continue
                pred = _bare_predicate(ctx, n.test)
                if pred is not None:
                    ctx.add("script.sync-in-step-loop", "info", n,
                            f"`{ast.unparse(pred)[:40]}` decides a Python `if` in {where}: "
                            "the host reads the device boolean and waits, every step",
                            fixtext="keep the test on the device (`torch.where(torch.isfinite"
                                    "(x), x, fallback)`) or check it only on logging steps")


def _device_arg(n: ast.Call) -> bool:
    a = n.args[0] if n.args else keyword(n, "device")
    return a is not None and ("device" in ast.unparse(a).lower() or isinstance(
        a, ast.Constant) and "cuda" in str(a.value))


def _table_copy_per_iteration(ctx: Context) -> None:
    for cls in ctx.classes.values():
        for fn in cls.body:
            if not isinstance(fn, ast.FunctionDef) or fn.name.startswith("__"):
                continue
            if repeat_site(ctx, fn.body[0]) is None:
                continue
            for n in walk(fn.body):
                if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                        and n.func.attr == "to" and keyword(n, "non_blocking") is None
                        and _device_arg(n) and isinstance(n.func.value, ast.Subscript)
                        and isinstance(n.func.value.value, ast.Attribute)
                        and isinstance(n.func.value.value.value, ast.Name)
                        and n.func.value.value.value.id == "self"):
                    ctx.add("script.blocking-h2d-copy", "info", n,
                            f"`{ast.unparse(n)[:50]}` in `{cls.name}.{fn.name}`, which a loop "
                            "calls on every iteration: an element of a table the object keeps "
                            "on the host, copied with a blocking copy each time",
                            loader="the table is kept on the host")
