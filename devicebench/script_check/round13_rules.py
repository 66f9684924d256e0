"""Pitfall forms first seen in corpus_round13's dev half (issue 24, round 14), each written
as the general form its thread names (all ``info``: the cost depends on sizes the file does
not show):

- ``script.tensor-dataset-per-row``: a ``TensorDataset`` read through a ``DataLoader`` with a
  batch size: the loader fetches it row by row and collates the rows back into a batch,
  where slicing the tensors by batch is ~4x faster (huangbiubiu, shenweichen/DeepCTR-Torch#70,
  2019, citing pytorch/pytorch#4959).

Under existing ids, run by the rule above:

- ``script.ema-out-of-place``: ``avg.mul_(1 - m).add_(src, alpha=m)`` per parameter per step,
  two kernels where ``avg.lerp_(src, m)`` is one (RangiLyu, open-mmlab/mmengine#519, 2022);
- ``script.sync-in-step-loop``: a collective (``dist.all_reduce``) of a detached value --
  a reported loss -- in code every step runs: a synchronising collective per step or per
  microbatch, for logging only (gakkiri, modelscope/ms-swift#9966, 2026); and a copy to the
  host (``(positions == 0).cpu()``) of a forward's input in code every forward runs
  (vincentzed, sgl-project/sglang#9889, 2025, quoting PyTorch's documentation);
- ``script.tensor-from-python-list``: ``torch.Tensor((a, b))`` of a tuple of NumPy arrays
  (PyTorch's own warning, erizmr/UnLiteFlowNet-PIV#5, 2022) and ``torch.tensor`` of an h5py
  Dataset, converted element by element (crowsonkb, pytorch/pytorch#28761, 2019: 421 ms vs
  2.84 ms through ``np.array``), in code a loop or the data pipeline repeats.
"""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import keyword, last_name, root_name, walk
from devicebench.script_check.context import Context, FuncDef, rule
from devicebench.script_check.dataflow import callees
from devicebench.script_check.gap14_rules import forward_reach
from devicebench.script_check.kinds import repeat_site, scope_of


@rule("script.tensor-dataset-per-row",
      "a TensorDataset read through a DataLoader, one row at a time",
      "the DataLoader asks the dataset for each index of a batch separately and collates the "
      "rows back into a batch: {n} Python calls and small copies per batch, where the tensors "
      "could be sliced by batch in one indexing op (shenweichen/DeepCTR-Torch#70: ~4x faster "
      "by slicing; pytorch/pytorch#4959)",
      "index the tensors by batch: `perm = torch.randperm(n)`, then `x[perm[i:i + bs]]` per "
      "step; or give the DataLoader a `BatchSampler` as `sampler=` with `batch_size=None` so "
      "the dataset is indexed with a whole list of indices at once")
def tensor_dataset_per_row(ctx: Context) -> None:
    if ctx.uses("torch"):
        for call in ctx.calls():
            if not ctx.resolve(call.func).endswith("DataLoader"):
                continue
            ds = keyword(call, "dataset") or (call.args[0] if call.args else None)
            made = ds if isinstance(ds, ast.Call) else next(
                (v for v in ctx.assigns.get(ds.id, []) if isinstance(v, ast.Call)), None
            ) if isinstance(ds, ast.Name) else None
            size = keyword(call, "batch_size")
            if (isinstance(made, ast.Call) and last_name(made) == "TensorDataset"
                    and size is not None and keyword(call, "batch_sampler") is None
                    and keyword(call, "sampler") is None):
                ctx.add("script.tensor-dataset-per-row", "info", call,
                        "the data set is a `TensorDataset` of in-memory tensors",
                        n=f"`{ast.unparse(size)}`")
        _mul_add_chains(ctx)
        _collectives_per_step(ctx)
        _host_reads_in_forward(ctx)
        _arrays_tuple_and_h5py(ctx)


def _mul_add_chains(ctx: Context) -> None:
    """``a.mul_(x).add_(b, alpha=y)`` in a parameter loop a training step runs (directly in
    the loop's body or in a method it calls per parameter)."""
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, ast.For) or repeat_site(ctx, loop) is None:
            continue
        names = {t.id for t in ast.walk(loop.target) if isinstance(t, ast.Name)}
        if not names or "param" not in ast.unparse(loop.iter):
            continue
        bodies = [loop.body] + [fn.body for _, fn in callees(ctx, list(loop.body), depth=1)]
        for body in bodies:
            for n in walk(body):
                if (isinstance(n, ast.Call) and last_name(n) == "add_" and keyword(
                        n, "alpha") is not None and isinstance(n.func, ast.Attribute)
                        and isinstance(n.func.value, ast.Call)
                        and last_name(n.func.value) == "mul_"):
                    ctx.add("script.ema-out-of-place", "info", n,
                            f"`mul_` then `add_` per parameter of `{ast.unparse(loop.iter)[:30]}` "
                            "on every step: two kernels where `lerp_` is one "
                            "(open-mmlab/mmengine#519)")


_COLLECTIVES = ("torch.distributed.all_reduce", "torch.distributed.all_gather",
                "torch.distributed.reduce")


def _collectives_per_step(ctx: Context) -> None:
    """``dist.all_reduce(x)`` of a detached copy, in a function a training loop runs per
    step (or per microbatch); one inside ``if step % k == 0:`` is not per step."""
    for call in ctx.calls():
        if ctx.resolve(call.func) not in _COLLECTIVES or not call.args:
            continue
        fn = ctx.enclosing(call, (ast.FunctionDef, ast.AsyncFunctionDef))
        arg = call.args[0]
        bound = [s.value for s in walk(getattr(fn, "body", [])) if isinstance(s, ast.Assign)
                 and any(isinstance(t, ast.Name) and t.id == root_name(arg) for t in s.targets)]
        if not any("detach" in ast.unparse(v) for v in bound + [arg]):
            continue
        if ctx.enclosing(call, (ast.If,)) is not None or repeat_site(ctx, call) is None:
            continue
        ctx.add("script.sync-in-step-loop", "info", call,
                f"`{ast.unparse(call.func)}` of a detached value, a reported metric, on every "
                "step: a collective every rank waits for (modelscope/ms-swift#9966: reduce "
                "the local [sum, count] once per logging step)",
                fixtext="keep the local sums as device tensors and reduce them once per "
                        "logging step (`if step % log_every == 0: dist.all_reduce(...)`)")


def _host_reads_in_forward(ctx: Context) -> None:
    """``.cpu()`` / ``.tolist()`` / ``.numpy()`` of a parameter's value in code a module's
    forward runs, in a file that calls the model in a loop."""
    if not any(isinstance(n, ast.For) for n in ctx.tree.body):
        return
    for _call, fn in forward_reach(ctx):
        params = {a.arg for a in fn.args.args} - {"self"}
        returned = {id(x) for r in walk(fn.body) if isinstance(r, ast.Return)
                    for x in ast.walk(r)}  # converted as it is returned: the caller's choice
        for n in walk(fn.body):
            if id(n) in returned:
                continue
            if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                    and n.func.attr in ("cpu", "tolist", "numpy") and not n.args
                    and any(isinstance(x, ast.Name) and x.id in params
                            for x in ast.walk(n.func.value))):
                ctx.add("script.sync-in-step-loop", "info", n,
                        f"in `{fn.name}`, which every forward runs: the input is copied to the "
                        "host, and the host waits for the device (sgl-project/sglang#9889)",
                        fixtext="compute it on the device (`torch.nonzero(positions == 0)` "
                                "kept as a tensor, or sizes passed in from the host side)")


def _np_bound(ctx: Context, scope: ast.AST, name: str) -> bool:
    vals = [s.value for s in walk(getattr(scope, "body", [])) if isinstance(s, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == name for t in s.targets)]
    return bool(vals) and all(any(isinstance(c, ast.Call) and ctx.resolve(c.func).startswith(
        "numpy.") for c in ast.walk(v)) for v in vals)


def _h5py_value(ctx: Context, expr: ast.AST) -> bool:
    """``f[key]`` / ``self.file[key]`` where ``f`` / ``self.file`` is an ``h5py.File``."""
    if not isinstance(expr, ast.Subscript):
        return False
    base = ast.unparse(expr.value)
    return any(isinstance(n, ast.Assign) and any(ast.unparse(t) == base for t in n.targets)
               and isinstance(n.value, ast.Call) and ctx.resolve(n.value.func) == "h5py.File"
               for n in ast.walk(ctx.tree))


def _arrays_tuple_and_h5py(ctx: Context) -> None:
    for call in ctx.calls():
        q = ctx.resolve(call.func)
        if q not in ("torch.Tensor", "torch.tensor", "torch.as_tensor", "torch.FloatTensor") or (
                not call.args) or repeat_site(ctx, call) is None:
            continue
        arg, scope = call.args[0], scope_of(ctx, call)
        fn: FuncDef | None = scope if isinstance(scope, ast.FunctionDef) else None
        if isinstance(arg, ast.Tuple | ast.List) and len(arg.elts) >= 2 and all(
                isinstance(e, ast.Name) and _np_bound(ctx, fn, e.id) for e in arg.elts):
            ctx.add("script.tensor-from-python-list", "warning", call,
                    f"`{ast.unparse(arg)[:30]}` is a sequence of NumPy arrays, converted on "
                    "every item", ctor=q.replace("torch.", "torch."), how="a tuple of arrays")
        elif _h5py_value(ctx, arg):
            ctx.add("script.tensor-from-python-list", "info", call,
                    f"`{ast.unparse(arg)[:30]}` is an h5py Dataset: the conversion reads it "
                    "element by element, like a nested list (pytorch/pytorch#28761: 421 ms vs "
                    "2.84 ms through `np.array`)", ctor=q, how="an h5py Dataset")
