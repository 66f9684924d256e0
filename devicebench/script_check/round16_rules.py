"""Pitfall forms first seen in corpus_round15's dev half (issue 24, round 16), under the
existing id ``script.sync-in-step-loop`` (all ``info``: the cost depends on sizes and world
sizes the file does not show):

- ``self.log(..., sync_dist=True)`` / ``self.log_dict(..., sync_dist=True)`` in a
  LightningModule's ``training_step`` or a method it calls: a cross-device reduction on
  every step, where only epoch-level and validation aggregates need one (SeanNaren,
  NVIDIA-NeMo/Speech#4876, 2022: removed from the training step "to prevent too much
  communication overhead per step");
- a collective (``dist.all_reduce``) inside a loop over a dict of metrics in code a step
  runs: one synchronising collective per metric per step, where one packed reduction per
  logging step is enough (hallerite, hallerite/ludic#8, 2025);
- ``x[mask] = value`` with a boolean mask computed in the step from device tensors: the
  assignment becomes ``nonzero()`` and the host waits for the count (lgeiger and ngimel,
  pytorch/pytorch#156384, 2025; ``masked_fill_`` or ``torch.where`` need no sync);
- ``.item()`` of the elements of a tensor handed to a function every forward runs
  (``for t, h, w in grid_thw: ... h.item()``): one device-to-host sync per element, where
  one ``.tolist()`` at the start is one sync (cyyever, huggingface/transformers#44005, 2026).
"""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import LOOPS, keyword, last_name, target_names, walk
from devicebench.script_check.context import Context, FuncDef
from devicebench.script_check.dataflow import callees
from devicebench.script_check.gap14_rules import forward_reach
from devicebench.script_check.kinds import repeat_site

_COLLECTIVES = ("torch.distributed.all_reduce", "torch.distributed.reduce",
                "torch.distributed.all_gather")
_COMPARE_OPS = (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)


def _training_steps(ctx: Context) -> list[FuncDef]:
    steps = [m for cls in ctx.classes.values() for m in cls.body
             if isinstance(m, ast.FunctionDef) and m.name == "training_step"]
    return steps + [fn for s in steps for _, fn in callees(ctx, list(s.body), depth=2)]


def _sync_dist_in_training_step(ctx: Context) -> None:
    for fn in _training_steps(ctx):
        for c in ctx.calls(fn.body):
            if last_name(c) not in ("log", "log_dict") or not ast.unparse(c.func).startswith(
                    "self."):
                continue
            sync = keyword(c, "sync_dist")
            if isinstance(sync, ast.Constant) and sync.value is True:
                ctx.add("script.sync-in-step-loop", "info", c,
                        f"`sync_dist=True` in `{fn.name}`, which runs every training step: "
                        "an all-reduce across devices per logged value per step "
                        "(NVIDIA-NeMo/Speech#4876)",
                        fixtext="log the local value on the step (`sync_dist=False`) and sync "
                                "epoch-level or validation aggregates only")


def _collective_per_metric(ctx: Context) -> None:
    for call in ctx.calls():
        if ctx.resolve(call.func) not in _COLLECTIVES:
            continue
        loop = ctx.enclosing(call, (ast.For,))
        if not (isinstance(loop, ast.For) and isinstance(loop.iter, ast.Call)
                and last_name(loop.iter) in ("items", "values")):
            continue
        fn = ctx.enclosing(loop, (ast.FunctionDef, ast.AsyncFunctionDef))
        if fn is None or repeat_site(ctx, fn.body[0]) is None:
            continue
        ctx.add("script.sync-in-step-loop", "info", call,
                f"`{ast.unparse(call.func)}` once per metric of `{ast.unparse(loop.iter)[:40]}`"
                f", in `{fn.name}`, which runs every step: one collective each "
                "(hallerite/ludic#8)",
                fixtext="stack the metrics into one tensor and reduce it once, on logging "
                        "steps only")


def _is_mask(node: ast.AST, masks: set[str]) -> bool:
    return (isinstance(node, ast.Compare) and all(isinstance(o, _COMPARE_OPS)
                                                  for o in node.ops)) or (
        isinstance(node, ast.Name) and node.id in masks)


def _mask_assignment_in_step(ctx: Context) -> None:
    text = "\n".join(ctx.lines)
    if "cuda" not in text and "device" not in text:
        return
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, LOOPS) or not any(ctx.is_step(n) for n in walk(loop.body)):
            continue
        masks = {t for s in walk(loop.body) if isinstance(s, ast.Assign)
                 and _is_mask(s.value, set()) for x in s.targets for t in target_names(x)}
        for s in walk(loop.body):
            if isinstance(s, ast.Assign) and any(
                    isinstance(t, ast.Subscript) and _is_mask(t.slice, masks) for t in s.targets):
                ctx.add("script.sync-in-step-loop", "info", s,
                        f"`{ast.unparse(s)[:50]}` assigns through a boolean mask on every "
                        "step: it becomes `nonzero()`, and the host waits for the count "
                        "(pytorch/pytorch#156384)",
                        fixtext="`x.masked_fill_(mask, value)` or `torch.where(mask, value, x)`")


def _item_per_element_in_forward(ctx: Context) -> None:
    for _call, fn in forward_reach(ctx):
        params = {a.arg for a in fn.args.args} - {"self"}
        elems = {t for n in walk(fn.body) if isinstance(n, ast.For)
                 and isinstance(n.iter, ast.Name) and n.iter.id in params
                 for t in target_names(n.target)}
        for n in walk(fn.body):
            if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                    and n.func.attr == "item" and not n.args
                    and isinstance(n.func.value, ast.Name) and n.func.value.id in elems):
                ctx.add("script.sync-in-step-loop", "info", n,
                        f"`{ast.unparse(n)}` of an element of a tensor `{fn.name}` is given, "
                        "in code every forward runs: one device-to-host sync per element "
                        "(huggingface/transformers#44005)",
                        fixtext="read the tensor once with `.tolist()` at the start (or pass "
                                "the host-side list the caller already has)")
