"""Work done one sample at a time in Python (issue 24, round 6): a model's forward that
loops over the batch dimension, indexing each sample, then stacks the pieces
(ml-explore/mlx#1531, awni: "completely un-vectorized and will be very slow"); and MLX
models evaluated with dropout still on (reported as ``script.training-true-in-eval``)."""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import COMPREHENSIONS, LOOPS, dotted, last_name, walk
from devicebench.script_check.context import Context, FuncDef, rule
from devicebench.script_check.dataflow import callees

_MODULE_BASES = ("Module", "Layer", "Model")
_FORWARDS = ("forward", "__call__", "call")


def _batch_sizes(fn: ast.AST) -> set[str]:
    """Names ``fn`` binds to a batch size read from a tensor: ``n = x.shape[0]``,
    ``n = len(x)``, ``n = x.size(0)``."""
    out: set[str] = set()
    for s in ast.walk(fn):
        if not (isinstance(s, ast.Assign) and len(s.targets) == 1
                and isinstance(s.targets[0], ast.Name)):
            continue
        v = s.value
        if isinstance(v, ast.Subscript) and isinstance(v.value, ast.Attribute) and (
                v.value.attr == "shape") and isinstance(v.slice, ast.Constant) and (
                v.slice.value == 0) or isinstance(v, ast.Call) and (
                last_name(v) == "len" or last_name(v) == "size" and v.args and isinstance(
                    v.args[0], ast.Constant) and v.args[0].value == 0):
            out.add(s.targets[0].id)
    return out


def _over_batch(node: ast.AST, sizes: set[str]) -> tuple[str, ast.AST] | None:
    """(loop variable, what it repeats) for ``for i in range(batch)`` / a comprehension
    over it."""
    gens = node.generators if isinstance(node, COMPREHENSIONS) else (
        [node] if isinstance(node, ast.For) else [])
    for g in gens:
        it = g.iter
        if (isinstance(it, ast.Call) and last_name(it) == "range" and len(it.args) == 1
                and isinstance(it.args[0], ast.Name) and it.args[0].id in sizes
                and isinstance(g.target, ast.Name)):
            return g.target.id, node
    return None


def _indexes_with(body: list[ast.AST], var: str) -> bool:
    return any(isinstance(n, ast.Subscript) and any(
        isinstance(m, ast.Name) and m.id == var for m in ast.walk(n.slice)) for n in walk(body))


@rule("script.per-sample-python-loop",
      "the forward pass loops over the batch one sample at a time",
      "`{what}` runs once per sample in Python: each iteration dispatches its own small "
      "indexing ops (and their gradients), so the device works on one sample at a time and "
      "the step costs batch-size times the dispatch overhead (ml-explore/mlx#1531, awni: "
      "\"completely un-vectorized and will be very slow\")",
      "index the whole batch at once -- `take_along_axis(x, idx[..., None], axis=1)` / "
      "`gather` / advanced indexing with a batch index (`x[mx.arange(b)[:, None], idx]`) -- "
      "instead of a loop and a `stack`")
def per_sample_python_loop(ctx: Context) -> None:
    for cls in ctx.classes.values():
        if not any(last_name(b) in _MODULE_BASES for b in cls.bases):
            continue
        for fn in cls.body:
            if not (isinstance(fn, ast.FunctionDef) and fn.name in _FORWARDS):
                continue
            sizes = _batch_sizes(fn)
            if not sizes:
                continue
            for n in walk(fn.body):
                hit = _over_batch(n, sizes)
                if hit is None:
                    continue
                var, loop = hit
                body = [loop.elt] if isinstance(loop, ast.ListComp | ast.GeneratorExp) else (
                    list(getattr(loop, "body", [])))
                if not _indexes_with(body, var):
                    continue
                stmt = loop
                while not isinstance(stmt, ast.stmt):
                    stmt = ctx.parents[stmt]
                it = loop.generators[0].iter if isinstance(loop, COMPREHENSIONS) else (
                    loop.iter)  # type: ignore[attr-defined]
                ctx.add("script.per-sample-python-loop", "warning", stmt,
                        f"in `{cls.name}.{fn.name}`, over `{ast.unparse(it)}`, indexing with "
                        f"`{var}`", what=ctx.code(stmt.lineno)[:50])
    from devicebench.script_check.gap13_rules import device_row_loops

    device_row_loops(ctx)  # loops over a device tensor's rows in a callee (round 13)
    from devicebench.script_check.round12_rules import row_fill_loops

    row_fill_loops(ctx)  # a device tensor filled row by row in a forward (round 13)
    loss_method_loops(ctx)  # a loss method's loop over a batch parameter (round 14)


def _param_batch(fn: FuncDef, it: ast.AST) -> str:
    """``range(x.shape[0])`` / ``range(len(x))`` / ``range(x.size(0))`` over a parameter."""
    if not (isinstance(it, ast.Call) and last_name(it) == "range" and len(it.args) == 1):
        return ""
    a = it.args[0]
    params = {p.arg for p in fn.args.args}
    if isinstance(a, ast.Subscript) and isinstance(a.value, ast.Attribute) and (
            a.value.attr == "shape") and isinstance(a.slice, ast.Constant) and a.slice.value == 0:
        x = a.value.value
    elif isinstance(a, ast.Call) and last_name(a) == "len" and a.args:
        x = a.args[0]
    elif isinstance(a, ast.Call) and last_name(a) == "size" and isinstance(
            a.func, ast.Attribute) and a.args and isinstance(a.args[0], ast.Constant) and (
            a.args[0].value == 0):
        x = a.func.value
    else:
        return ""
    return x.id if isinstance(x, ast.Name) and x.id in params else ""


def loss_method_loops(ctx: Context) -> None:
    """``script.per-sample-python-loop`` in a method whose result a training loop
    back-propagates, looping over a batch parameter's first dimension and indexing it
    (StanfordASL/neural-network-lyapunov#121, hongkai-dai, 2020: 40% of the time)."""
    if not ctx.uses("torch"):
        return
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, ast.For | ast.While):
            continue
        backed = {last_name(c.func.value) for c in ctx.calls(loop.body)
                  if isinstance(c.func, ast.Attribute) and c.func.attr == "backward"}
        for s in loop.body:
            if not (isinstance(s, ast.Assign) and isinstance(s.value, ast.Call)
                    and any(isinstance(t, ast.Name) and t.id in backed for t in s.targets)):
                continue
            for _call, fn in callees(ctx, [s.value], depth=1):
                for inner in walk(fn.body):
                    if not isinstance(inner, ast.For):
                        continue
                    x = _param_batch(fn, inner.iter)
                    if x and isinstance(inner.target, ast.Name) and any(
                            isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name)
                            and n.value.id == x for n in walk(inner.body)):
                        ctx.add("script.per-sample-python-loop", "info", inner,
                                f"in `{fn.name}`, whose result the loop at "
                                f"{ctx.line(loop.lineno)} back-propagates: one sample of "
                                f"`{x}` per iteration", what=ctx.code(inner.lineno)[:50])


def mlx_training_mode_in_eval(ctx: Context) -> None:
    """``script.training-true-in-eval`` for MLX: a model whose class uses dropout, called in a
    loop over test/validation batches, and never put in ``eval()`` mode in the file (MLX
    modules start in training mode)."""
    if not ctx.uses("mlx"):
        return
    dropout = {c.name for c in ctx.classes.values() if any(
        isinstance(n, ast.Call) and last_name(n) == "Dropout" or isinstance(n, ast.Attribute)
        and n.attr == "dropout" for n in ast.walk(c))}
    models = {n for n, vs in ctx.assigns.items() for v in vs if isinstance(v, ast.Call)
              and isinstance(v.func, ast.Name) and v.func.id in dropout}
    evals = {dotted(c.func.value) for c in ctx.calls() if last_name(c) == "eval"
             and isinstance(c.func, ast.Attribute)}
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, LOOPS) or not any(
                w in ast.unparse(getattr(loop, "iter", ast.Constant(""))).lower()
                for w in ("test", "val", "eval")):
            continue
        call = next((n for n in walk(loop.body) if isinstance(n, ast.Call)
                     and isinstance(n.func, ast.Name) and n.func.id in models - evals), None)
        if call is not None:
            name = call.func.id  # type: ignore[attr-defined]
            ctx.add("script.training-true-in-eval", "warning", call,
                    f"the loop at {ctx.line(loop.lineno)} goes over "
                    f"`{ast.unparse(loop.iter)[:30]}` with `{name}` in training mode",
                    why="MLX modules start in training mode and `nn.Dropout` stays active "
                        "until `model.eval()`: the evaluation pass drops units (wrong figures) "
                        "and does the dropout work on every batch (ml-explore/mlx#1531, awni: "
                        "\"put the model in `eval` mode when testing\")",
                    fix=f"call `{name}.eval()` before the evaluation loop and `{name}.train()` "
                        "before training again")
