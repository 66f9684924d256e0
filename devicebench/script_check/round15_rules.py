"""Pitfall forms first seen in corpus_round14's dev half (issue 24, round 15), under
existing ids:

- ``script.ddp-no-sync``: a DistributedDataParallel script whose per-batch method runs
  ``backward()`` every call and the optimizer step only under a condition computed from a
  modulo (``should_step = step % k == 0``), with no ``no_sync()`` anywhere: every
  accumulation micro-step all-reduces the gradients (pplantinga, speechbrain/speechbrain
  #1449, 2022: 10-20% faster with ``no_sync``);
- ``script.sync-in-step-loop``: a loss tensor formatted into a log message (an f-string)
  in a function every step runs -- formatting a device tensor copies it to the host, a sync
  per call (kwen2501, pytorch/pytorch#126829, 2024).
"""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import LOOPS, last_name, walk
from devicebench.script_check.context import Context
from devicebench.script_check.dataflow import callees

_DEPTH = 3


def _unconditional(ctx: Context, node: ast.AST, loop: ast.AST) -> bool:
    """``node`` runs on every pass of ``loop`` (no ``if`` between them)."""
    cur = ctx.parents.get(node)
    while cur is not None and cur is not loop:
        if isinstance(cur, ast.If):
            return False
        cur = ctx.parents.get(cur)
    return cur is loop


def _mod_names(fn: ast.AST) -> set[str]:
    """Names ``fn`` binds to an expression with a modulo (``should_step = i % k == 0``)."""
    return {t.id for n in walk(fn.body) if isinstance(n, ast.Assign)
            and any(isinstance(b, ast.BinOp) and isinstance(b.op, ast.Mod)
                    for b in ast.walk(n.value))
            for t in n.targets if isinstance(t, ast.Name)}


def _conditional_step(fn: ast.AST) -> bool:
    """An ``if`` on a modulo (or a name bound to one) around an optimizer ``.step()``."""
    names = _mod_names(fn)
    return any(isinstance(n, ast.If) and (any(
        isinstance(b, ast.BinOp) and isinstance(b.op, ast.Mod) for b in ast.walk(n.test))
        or any(isinstance(b, ast.Name) and b.id in names for b in ast.walk(n.test)))
        and any(isinstance(c, ast.Call) and last_name(c) == "step" and not c.args
                for s in n.body for c in ast.walk(s)) for n in walk(fn.body))


def round15_forms(ctx: Context) -> None:
    """This module's forms, run once per script by ``gap15_rules.tensor_per_item`` (the ids
    they report belong to older rules)."""
    _accumulating_method(ctx)
    _loss_in_fstring(ctx)


def _accumulating_method(ctx: Context) -> None:
    if not ctx.uses("torch") or any(isinstance(n, ast.Attribute) and n.attr == "no_sync"
                                    for n in ast.walk(ctx.tree)):
        return
    if not any(ctx.resolve(c.func).endswith("DistributedDataParallel") for c in ctx.calls()):
        return
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, LOOPS):
            continue
        for _, fn in callees(ctx, list(loop.body), depth=_DEPTH):
            backward = next((c for c in walk(fn.body) if isinstance(c, ast.Call)
                             and last_name(c) == "backward" and _unconditional(ctx, c, fn)),
                            None)
            if backward is not None and _conditional_step(fn):
                ctx.add("script.ddp-no-sync", "warning", backward,
                        f"`{fn.name}()` runs `backward()` on every call from the loop at "
                        f"{ctx.line(loop.lineno)} and steps the optimizer only on some of "
                        "them; the model is DistributedDataParallel and no `no_sync()` is "
                        "used", reason="every `backward()` of a DDP model all-reduces all "
                        "gradients; the micro-steps that do not update waste that "
                        "communication (speechbrain/speechbrain#1449: 10-20% faster)")


def _loss_in_fstring(ctx: Context) -> None:
    """``logger.debug(f"... {loss}")`` where ``loss`` is the function's loss tensor (bound
    from a loss call and back-propagated by the function or by its callers)."""
    if not ctx.uses("torch"):
        return
    backprop = {last_name(c.func.value) if isinstance(c.func.value, ast.Call) else
                getattr(c.func.value, "id", "") for c in ctx.calls()
                if isinstance(c.func, ast.Attribute) and c.func.attr == "backward"}
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, LOOPS):
            continue
        for _, fn in callees(ctx, list(loop.body), depth=_DEPTH):
            losses = {t.id for n in walk(fn.body) if isinstance(n, ast.Assign)
                      and isinstance(n.value, ast.Call) and "loss" in ast.unparse(
                          n.value.func).lower() for t in n.targets if isinstance(t, ast.Name)}
            returned = any(isinstance(r, ast.Return) and isinstance(r.value, ast.Name)
                           and r.value.id in losses for r in walk(fn.body))
            if not losses or not (losses & backprop or returned and backprop):
                continue
            for n in walk(fn.body):
                if isinstance(n, ast.JoinedStr) and _unconditional(ctx, n, fn) and any(
                        isinstance(v, ast.FormattedValue) and isinstance(v.value, ast.Name)
                        and v.value.id in losses for v in n.values):
                    ctx.add("script.sync-in-step-loop", "warning", n,
                            f"`{fn.name}()` runs on every step of the loop at "
                            f"{ctx.line(loop.lineno)}; formatting the loss tensor into a "
                            "message copies it to the host, a device sync per call "
                            "(pytorch/pytorch#126829)", fixtext=(
                                "log `loss.detach()` values only on the steps that report, "
                                "or keep the message lazy and leave the tensor out of it"))
