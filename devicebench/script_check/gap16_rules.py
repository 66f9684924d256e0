"""corpus_round14's held-out misses written generally (issue 24, round 16, step 0): analysis
gaps, under existing ids, all ``info`` (the cost depends on sizes the file does not show).

- a DataLoader over a data set class of the file whose per-item method copies to the GPU,
  with no ``pin_memory``: the copies the fix moves into the training loop then come from
  pageable memory (``script.dataloader-no-pin-memory``). Before this, the unpinned loader
  was reported only when the loop itself copied the batch -- rtnet_4's loop does not, since
  its data set already did (jonashaag, Andong-Li-speech/RTNet#4, 2020: ~8x faster training
  once the copies left the data set and the loader pinned memory);
- a tensor made on the host and copied to the device in the same expression
  (``torch.zeros(...).cuda()``) in the body of a loop that runs an optimisation step, not
  only in a module's forward (``script.host-built-in-forward``; the same PR);
- ``torch.tensor(<literal>, device=...)`` in a function every forward runs: the list is
  turned into a tensor on the host and copied, even with ``device=`` (sanandaraj5597,
  NVIDIA/TransformerEngine#1941, 2025);
- ``torch.as_tensor(x).to(<device>)`` in a converter a step loop or a forward calls
  (haifeng-jin, keras-team/keras-core#393, 2023: build the tensor on the device with
  ``device=``).
"""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import last_name, walk
from devicebench.script_check.context import Context, FuncDef
from devicebench.script_check.dataflow import callees
from devicebench.script_check.form_rules import dataset_item_methods
from devicebench.script_check.gap14_rules import forward_reach
from devicebench.script_check.round10_rules import _to_gpu
from devicebench.script_check.torch_rules import _loader_calls, _pinned

_FACTORIES = ("torch.zeros", "torch.ones", "torch.full", "torch.empty", "torch.arange",
              "torch.eye", "torch.randn", "torch.rand", "torch.linspace", "torch.tensor",
              "torch.as_tensor", "torch.from_numpy")


def _loader_over_cuda_dataset(ctx: Context) -> None:
    cuda = {getattr(ctx.parents.get(m), "name", "") for m in dataset_item_methods(ctx)
            if any(_to_gpu(ctx, n) for n in walk(m.body))}
    if not cuda:
        return
    for c in _loader_calls(ctx):
        made = c.args[0] if c.args else next(
            (k.value for k in c.keywords if k.arg == "dataset"), None)
        name = last_name(made.func) if isinstance(made, ast.Call) else ""
        if name in cuda and not _pinned(ctx, c) and not any(k.arg is None for k in c.keywords):
            ctx.add("script.dataloader-no-pin-memory", "info", c,
                    f"no `pin_memory=True`; its data set `{name}` copies every item to the "
                    "GPU itself, from pageable memory", copy=f"`{name}.__getitem__`")


def _host_copy(ctx: Context, n: ast.AST) -> bool:
    """``factory(...).cuda()`` / ``factory(...).to(<device>)`` with no ``device=``."""
    if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr in ("cuda", "to") and (n.args or n.func.attr == "cuda")):
        return False
    inner = n.func.value
    return isinstance(inner, ast.Call) and ctx.resolve(inner.func) in _FACTORIES and not any(
        k.arg == "device" for k in inner.keywords) and (
        n.func.attr == "cuda" or not (isinstance(n.args[0], ast.Constant)
                                      and str(n.args[0].value).startswith("cpu")))


def _step_loops(ctx: Context) -> list[ast.For | ast.While]:
    return [n for n in ast.walk(ctx.tree) if isinstance(n, ast.For | ast.While)
            and any(ctx.is_step(x) for x in walk(n.body))]


def _host_made_in_step_loop(ctx: Context) -> None:
    loops = _step_loops(ctx)
    fns: list[FuncDef] = [fn for loop in loops for _, fn in callees(ctx, list(loop.body))]
    fns += [fn for _, fn in forward_reach(ctx)]
    seen: set[int] = set()
    for body, where in [(list(loop.body), f"the step loop at {ctx.line(loop.lineno)}")
                        for loop in loops] + [(list(fn.body), f"`{fn.name}`") for fn in fns]:
        for n in walk(body):
            if _host_copy(ctx, n) and id(n) not in seen:
                seen.add(id(n))
                stmt = _statement(ctx, n)
                ctx.add("script.host-built-in-forward", "info", stmt,
                        f"`{ast.unparse(n)[:50]}` in {where}, on every step",
                        what=ctx.code(stmt.lineno)[:50])


def _statement(ctx: Context, n: ast.AST) -> ast.AST:
    cur = n
    while cur is not None and not isinstance(cur, ast.stmt):
        cur = ctx.parents.get(cur)
    return cur or n


def _literal(node: ast.AST) -> bool:
    return isinstance(node, ast.List | ast.Tuple | ast.Constant) and all(
        isinstance(x, ast.Constant) for x in ast.walk(node) if isinstance(x, ast.expr)
        and not isinstance(x, ast.List | ast.Tuple))


def _literal_tensor_per_forward(ctx: Context) -> None:
    for _, fn in forward_reach(ctx):
        for n in walk(fn.body):
            dev = next((k.value for k in getattr(n, "keywords", []) if k.arg == "device"), None)
            if (isinstance(n, ast.Call) and ctx.resolve(n.func) == "torch.tensor" and n.args
                    and _literal(n.args[0]) and dev is not None
                    and not (isinstance(dev, ast.Constant) and str(dev.value) == "cpu")):
                stmt = _statement(ctx, n)
                ctx.add("script.host-built-in-forward", "info", stmt,
                        f"`{ast.unparse(n)[:50]}` in `{fn.name}`, which every forward runs: "
                        "the literal becomes a host tensor that is then copied to the device",
                        what=ctx.code(stmt.lineno)[:50])
