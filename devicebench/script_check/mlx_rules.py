"""Rules for MLX scripts (issue 24): MLX evaluates lazily, so what a timed region or a
training loop actually computes is decided by where arrays are evaluated."""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import LOOPS, blocks, target_names, walk
from devicebench.script_check.context import Context, rule
from devicebench.script_check.timing_rules import _clock_pairs

_FORCE = {"item", "tolist", "eval"}  # x.item(), x.tolist(), mx.eval(x) evaluate x


def _evaluates(ctx: Context, stmts: list[ast.stmt], names: set[str]) -> bool:
    for n in (n for s in stmts for n in ast.walk(s)):
        if not isinstance(n, ast.Call):
            continue
        if ctx.resolve(n.func) in ("mlx.core.eval", "numpy.array", "numpy.asarray") and any(
                isinstance(a, ast.Name) and a.id in names for x in n.args for a in ast.walk(x)):
            return True
        if isinstance(n.func, ast.Attribute) and n.func.attr in _FORCE and isinstance(
                n.func.value, ast.Name) and n.func.value.id in names:
            return True
    return False


@rule("script.lazy-input-timed",
      "MLX input computed inside the timed region",
      "MLX is lazy: `{name}` is only a recipe until something evaluates it, and the first "
      "evaluation is inside the timed region, so the clock also measures making the input "
      "(ml-explore/mlx#270: \"the timings will include the time of the randint\")",
      "evaluate the inputs before starting the clock: `mx.eval({name})`, then time the "
      "operation and evaluate its result (`mx.eval(out)`) before reading the clock again")
def lazy_input_timed(ctx: Context) -> None:
    if not ctx.uses("mlx"):
        return
    never = {id(loop) for loop, _ in unevaluated_loops(ctx)}
    for stmts in blocks(ctx.tree):
        for a, b in _clock_pairs(ctx, stmts):
            if any(id(n) in never for n in walk(stmts[a + 1:b])):
                continue  # the loop never evaluates: script.mlx-no-eval says so, once
            read = {n.id for s in stmts[a + 1:b] for n in ast.walk(s)
                    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
            for i, s in enumerate(stmts[:a]):
                if not (isinstance(s, ast.Assign) and isinstance(s.value, ast.Call)
                        and ctx.resolve(s.value.func).startswith("mlx.")):
                    continue
                names = {n for t in s.targets for n in target_names(t)} & read
                if names and not _evaluates(ctx, stmts[i + 1:a + 1], names):
                    name = sorted(names)[0]
                    ctx.add("script.lazy-input-timed", "warning", s,
                            f"`{name}` is first evaluated in the region timed between "
                            f"{ctx.line(stmts[a].lineno)} and {ctx.line(stmts[b].lineno)}",
                            name=name)


_GRADS = ("mlx.core.value_and_grad", "mlx.nn.value_and_grad", "mlx.core.grad")


def unevaluated_loops(ctx: Context) -> list[tuple[ast.AST, ast.Call]]:
    """(loop, gradient call) for loops that take a gradient step every iteration and never
    call ``mx.eval`` -- not in their body, not in a branch, not in a function they call."""
    grads = {name for name, values in ctx.assigns.items() for v in values
             if isinstance(v, ast.Call) and ctx.resolve(v.func) in _GRADS}
    out = []
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, LOOPS):
            continue
        call = next((n for n in walk(loop.body) if isinstance(n, ast.Call) and isinstance(
            n.func, ast.Name) and n.func.id in grads), None)
        if call is None:
            continue
        if ctx.search(loop.body, lambda n: isinstance(n, ast.Call) and ctx.resolve(
                n.func) == "mlx.core.eval") is None:
            out.append((loop, call))
    return out


@rule("script.mlx-no-eval",
      "the MLX training loop never evaluates its updates",
      "MLX is lazy: without `mx.eval(...)` in the loop each step only adds to one growing "
      "graph of every update so far, which runs when something finally reads a value (a print, "
      "`.item()`) -- memory grows and the graph can hang or exceed its depth limit "
      "(ml-explore/mlx#1711, angeloskath: \"you don't evaluate the parameters\"; "
      "neobundy/Deep-Dive-Into-AI-With-MLX-PyTorch#9)",
      "evaluate the state each step (or every few steps): `mx.eval(model.parameters(), "
      "optimizer.state)` after `optimizer.update(model, grads)`")
def mlx_no_eval(ctx: Context) -> None:
    if not ctx.uses("mlx"):
        return
    for loop, call in unevaluated_loops(ctx):
        stmt = ctx.enclosing(call, (ast.stmt,)) if not isinstance(call, ast.stmt) else call
        ctx.add("script.mlx-no-eval", "warning", stmt or call,
                f"the loop at {ctx.line(loop.lineno)} takes a gradient here on every iteration "
                "and nothing in it calls `mx.eval`")
