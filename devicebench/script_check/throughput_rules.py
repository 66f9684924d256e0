"""Throughput averaged over the compiling iterations (issue 24, class 17): a training loop
that calls a compiled step and reports its speed as a running average over every
iteration so far -- the first, compiling, iteration included (alpa-projects/alpa#823,
ecmwf/anemoi-core#1254). Per-iteration timing read one iteration at a time shows the
first iteration apart and stays quiet here."""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import LOOPS, last_name, walk
from devicebench.script_check.context import Context


def _clock(ctx: Context, node: ast.AST, clocks: set[str]) -> bool:
    return isinstance(node, ast.Call) and ctx.resolve(node.func) in clocks


def _stamps_before(ctx: Context, loop: ast.AST, clocks: set[str]) -> set[str]:
    """Names given a clock reading before ``loop`` in its block and never inside it."""
    block = getattr(ctx.parents.get(loop), "body", [])
    if loop not in block:
        return set()
    out = {t.id for s in block[:block.index(loop)] if isinstance(s, ast.Assign)
           and _clock(ctx, s.value, clocks) for t in s.targets if isinstance(t, ast.Name)}
    inside = {t.id for s in walk(getattr(loop, "body", [])) if isinstance(s, ast.Assign)
              for t in s.targets if isinstance(t, ast.Name)}
    return out - inside


def _elapsed(ctx: Context, node: ast.AST, clocks: set[str]) -> bool:
    return isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub) and _clock(
        ctx, node.left, clocks)


def _skips_warmup(loop: ast.AST) -> bool:
    """``if step < warmup: continue``, ``if i == 0``, ``times[warmup:]``: the first
    iterations are left out of the figure."""
    for n in walk(getattr(loop, "body", [])):
        tests = [c for c in ast.walk(n.test) if isinstance(c, ast.Compare) and not (
            isinstance(c.left, ast.BinOp) and isinstance(c.left.op, ast.Mod))] if isinstance(
            n, ast.If) else []  # (`step % 50 == 0` picks the iterations that log)
        for c in tests:
            if "warm" in ast.unparse(c).lower() or any(
                    isinstance(v, ast.Constant) and v.value in (0, 1) for v in c.comparators):
                return True
        if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Slice) and (
                n.slice.lower is not None):
            return True
    return False


def averaged_over_compile(ctx: Context, clocks: set[str], sync: dict[str, str]) -> None:
    """``script.compile-in-timing`` for a compiled call in a loop whose reported speed is a
    running figure over all iterations: the clock is read before the loop and again inside
    it, or per-iteration durations are appended/added up and the total is used in the loop."""
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, LOOPS) or ctx.is_compiled_scope(loop):
            continue
        call = next((n for n in walk(loop.body, lambda x: isinstance(x, LOOPS))
                     if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                     and n.func.id in ctx.compiled), None)
        if call is None or _skips_warmup(loop) or any(
                isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
                and c.func.id == call.func.id and c.lineno < loop.lineno  # type: ignore[attr-defined]
                for c in ctx.calls()):
            continue  # warmed up (called before the loop) or the first iterations skipped
        stamps = _stamps_before(ctx, loop, clocks)
        body = list(walk(loop.body))
        running = next((n for n in body if _elapsed(ctx, n, clocks) and isinstance(
            n.right, ast.Name) and n.right.id in stamps), None)  # type: ignore[attr-defined]
        how = "the clock started before the loop is read on every iteration"
        if running is None:
            kept = {c.func.value.id for c in body if isinstance(c, ast.Call)  # type: ignore[union-attr]
                    and last_name(c) == "append" and isinstance(c.func, ast.Attribute)
                    and isinstance(c.func.value, ast.Name) and c.args
                    and _elapsed(ctx, c.args[0], clocks)}
            running = next((n for n in body if isinstance(n, ast.Call) and last_name(n) in (
                "sum", "mean") and any(isinstance(a, ast.Name) and a.id in kept
                                       for a in n.args)), None)
            how = "each iteration's time is kept and the loop reports the average of all of them"
        if running is None:
            continue
        kind = ctx.compiled[call.func.id]  # type: ignore[attr-defined]
        ctx.add("script.compile-in-timing", "warning", call,
                f"{how} ({ctx.line(running.lineno)}), so the figure includes the first, "  # type: ignore[attr-defined]
                f"compiling, call of `{call.func.id}`",  # type: ignore[attr-defined]
                how={"jax": "jax.jit", "tf": "tf.function", "torch": "torch.compile"}[kind],
                name=call.func.id, sync=sync.get(kind, sync["torch"]))  # type: ignore[attr-defined]
