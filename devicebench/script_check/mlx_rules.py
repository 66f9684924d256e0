"""Rules for MLX scripts (issue 24): MLX evaluates lazily, so what a timed region or a
training loop actually computes is decided by where arrays are evaluated."""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import LOOPS, blocks, last_name, target_names, walk
from devicebench.script_check.context import Context, rule
from devicebench.script_check.dataflow import callees
from devicebench.script_check.kinds import loop_carried
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
    never = unevaluated_loops(ctx)
    _partly_evaluated(ctx, {id(loop) for loop, _ in never})
    for loop, call in never:
        stmt = ctx.enclosing(call, (ast.stmt,)) if not isinstance(call, ast.stmt) else call
        ctx.add("script.mlx-no-eval", "warning", stmt or call,
                f"the loop at {ctx.line(loop.lineno)} takes a gradient here on every iteration "
                "and nothing in it calls `mx.eval`")


def _eval_names(ctx: Context, stmts: list[ast.AST]) -> tuple[list[ast.Call], set[str]]:
    """The ``mx.eval`` calls under ``stmts`` and what they evaluate: the names (and
    ``a.b`` paths) in their arguments, a list named ``state`` counting as its elements."""
    evals = [n for n in walk(stmts) if isinstance(n, ast.Call)
             and ctx.resolve(n.func) in ("mlx.core.eval", "mlx.core.async_eval")]
    names: set[str] = set()
    for e in evals:
        for a in e.args:
            for n in ast.walk(a):
                if isinstance(n, ast.Name):
                    names.add(n.id)
                    for v in ctx.assigns.get(n.id, []):  # state = [model.state, opt.state]
                        if isinstance(v, ast.List | ast.Tuple):
                            names |= {m.id for m in ast.walk(v) if isinstance(m, ast.Name)}
    for n in walk(stmts):  # x.item() / x.tolist() evaluate x too
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in (
                "item", "tolist") and isinstance(n.func.value, ast.Name):
            names.add(n.func.value.id)
    return evals, names


def _model_like(ctx: Context, loop: ast.AST) -> bool:
    """The loop runs a model, a loss or a step each iteration (not ``for layer in layers``)."""
    return any(isinstance(c, ast.Call) and (ctx.is_step(c) or any(
        w in ast.unparse(c.func).lower() for w in ("loss", "step", "model")))
        for c in walk(getattr(loop, "body", [])))


def _partly_evaluated(ctx: Context, skip: set[int]) -> None:
    """Loops that evaluate some of what they change but not all of it (issue 24, round 7):
    ``mx.eval(loss)`` after ``optimizer.update(model, grads)`` leaves the model and the
    optimizer state as graphs (ml-explore/mlx#999); ``total += loss`` with the evaluation
    only after the loop keeps one graph over every iteration
    (Goekdeniz-Guelmez/mlx-lm-lora#47, #81)."""
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, LOOPS) or id(loop) in skip or not _model_like(ctx, loop):
            continue
        body = list(getattr(loop, "body", []))
        evals, covered = _eval_names(ctx, body)
        updates = [c for c in walk(body) if isinstance(c, ast.Call) and ctx.is_step(c)
                   and last_name(c) == "update" and c.args]
        updates += [c for call, fn in callees(ctx, body) for c in walk(fn.body)
                    if isinstance(c, ast.Call) and ctx.is_step(c) and last_name(c) == "update"
                    and c.args and call is not None]
        missing = []
        for u in updates:  # optimizer.update(model, grads) changes model and optimizer
            model, opt = ast.unparse(u.args[0]), ast.unparse(u.func.value)  # type: ignore[attr-defined]
            if root(model) not in covered and root(opt) not in covered and not any(
                    "state" in c or "parameters" in c for c in covered):
                missing.append(f"`{model}` and `{opt}` (changed by `{ast.unparse(u)[:40]}`)")
        assigned = {t for s in walk(body) if isinstance(s, ast.Assign) and isinstance(
            s.value, ast.Call) for tg in s.targets for t in target_names(tg)}
        fed = _feeding(body, covered)  # evaluating y evaluates what y was computed from
        grown = {name: stmts for name, stmts in loop_carried(ctx, loop).items()
                 if name not in fed and any(isinstance(n, ast.Name) and n.id in assigned
                                               for st in stmts for n in ast.walk(st.value))}
        if evals and (missing or grown):
            what = missing + [f"`{n}`" for n in sorted(grown)]
            ctx.add("script.mlx-no-eval", "warning", ctx.enclosing(evals[0], (ast.stmt,))
                    or evals[0], f"the loop at {ctx.line(loop.lineno)} evaluates only part of "
                    "what it changes: " + ", ".join(what) + " stay unevaluated graphs that "
                    "grow with every iteration")
        elif not evals:
            for name, stmts in grown.items():
                for st in stmts:
                    ctx.add("script.mlx-no-eval", "warning", st,
                            f"`{name}` accumulates over the loop at {ctx.line(loop.lineno)} "
                            "and nothing in the loop evaluates it: one graph over every "
                            "iteration, evaluated (and held in memory) only at the end")


def _feeding(stmts: list[ast.AST], names: set[str]) -> set[str]:
    """``names`` and every name assigned in ``stmts`` whose value feeds one of them: MLX
    evaluates an array's whole graph, so ``mx.eval(y)`` (or ``mx.async_eval(y)``) also
    materialises ``tokens`` when ``y`` was computed from it (ml-explore/mlx-lm's
    generate_step: the token history feeds the logits processors, which feed ``y``)."""
    deps: dict[str, set[str]] = {}
    for s in walk(stmts):
        if isinstance(s, ast.Assign | ast.AugAssign | ast.AnnAssign) and s.value is not None:
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            used = {n.id for n in ast.walk(s.value) if isinstance(n, ast.Name)}
            for t in (t for tg in targets for t in target_names(tg)):
                deps.setdefault(t, set()).update(used - {t})
    out, todo = set(names), list(names)
    while todo:
        for d in deps.get(todo.pop(), ()):
            if d not in out:
                out.add(d)
                todo.append(d)
    return out


def root(path: str) -> str:
    """``model`` of ``model.parameters()``."""
    return path.split(".")[0].split("(")[0]
