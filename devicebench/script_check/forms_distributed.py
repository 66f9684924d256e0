"""Distributed-training forms (issue 24, rounds 18, 22 and 23; run by :func:`.forms.run_forms`):
DDP gradient synchronisation left on for micro-batches (``script.ddp-no-sync``) and
``find_unused_parameters`` set by a strategy (``script.ddp-find-unused-parameters``); the
sources of each form are in the corpus READMEs of the round named in :mod:`.forms`
(corpus_round16, corpus_round17, corpus_round21, corpus_round22)."""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import LOOPS, const, last_name, target_names, walk
from devicebench.script_check.context import Context
from devicebench.script_check.round18b_rules import _names


def _find_unused_strategy(ctx: Context) -> None:
    for call in ctx.calls():
        for k in call.keywords:
            v = const(k.value)
            if k.arg == "strategy" and isinstance(v, str) and "find_unused_parameters_true" in v:
                ctx.add("script.ddp-find-unused-parameters", "info", call,
                        f"`strategy=\"{v}\"` passed to `{last_name(call)}` (Lightning's DDP "
                        "with `find_unused_parameters=True`)")




def _no_sync_after_forward(ctx: Context) -> None:
    for w in ast.walk(ctx.tree):
        if not isinstance(w, ast.With) or not any(
                isinstance(i.context_expr, ast.Call) and last_name(i.context_expr) == "no_sync"
                for i in w.items):
            continue
        back = [c for c in walk(w.body) if isinstance(c, ast.Call) and last_name(c) == "backward"]
        if not back or any(isinstance(c, ast.Call) and not ctx.is_step(c) and last_name(c) not in (
                "backward", "no_sync") and isinstance(ctx.parents.get(c), ast.Assign)
                for c in walk(w.body)):
            continue
        block = getattr(ctx.parents.get(w), "body", [])
        before = block[:block.index(w)] if w in block else []
        made = {n for s in before if isinstance(s, ast.Assign) and isinstance(s.value, ast.Call)
                for t in s.targets for n in target_names(t)}
        if made & set().union(*(_names(c.func) for c in back)):
            ctx.add_late("script.ddp-no-sync", "info", w,
                    "the forward that made the loss ran before this `no_sync`, outside it",
                    reason="DDP arms the gradient all-reduce during the forward, so a "
                           "`no_sync` around the backward alone still syncs every micro-step")


def _break_in_sync_switch(ctx: Context) -> None:
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, ast.For):
            continue
        off = any(isinstance(s, ast.Assign) and any(
            isinstance(t, ast.Attribute) and t.attr == "require_backward_grad_sync"
            for t in s.targets) for s in walk(loop.body))
        if not off:
            continue
        for b in walk(loop.body, lambda x: isinstance(x, LOOPS)):
            if isinstance(b, ast.Break):
                ctx.add_late("script.ddp-no-sync", "info", b,
                        f"the loop at {ctx.line(loop.lineno)} switches gradient sync off "
                        "module by module; after this `break` the remaining modules keep "
                        "all-reducing every micro-step",
                        reason="a module left out of `no_sync` syncs on every backward")


def _backward_per_micro_batch_loop(ctx: Context) -> None:
    src = ast.unparse(ctx.tree)
    if "no_sync" in src or not any(w in src for w in ("accelerator", "DistributedDataParallel",
                                                       "torch.distributed")):
        return
    for outer in ast.walk(ctx.tree):
        if not isinstance(outer, LOOPS):
            continue
        for inner in outer.body:
            if not isinstance(inner, LOOPS):
                continue
            rest = [s for s in outer.body if s is not inner]
            if not any(isinstance(c, ast.Call) and ctx.is_step(c) for c in walk(rest)):
                continue
            for c in walk(inner.body):
                if isinstance(c, ast.Call) and last_name(c) == "backward":
                    ctx.add_late("script.ddp-no-sync", "info", c,
                            f"the micro-batch loop at {ctx.line(inner.lineno)} runs a "
                            "backward per micro-batch before one optimizer step, with no "
                            "`no_sync`", reason="every micro-batch's backward all-reduces "
                            "the gradients, though only the last one needs it")


def _names_distributed(ctx: Context) -> bool:
    ids = {n.id.lower() for n in ast.walk(ctx.tree) if isinstance(n, ast.Name)} | {
        n.attr.lower() for n in ast.walk(ctx.tree) if isinstance(n, ast.Attribute)} | {
        c.name.lower() for c in ast.walk(ctx.tree) if isinstance(c, ast.ClassDef)}
    return any(k in i for i in ids for k in ("fsdp", "ddp", "fullyshardeddataparallel",
                                             "distributeddataparallel"))


def _backward_per_split_chunk(ctx: Context) -> None:
    if not _names_distributed(ctx) or any(last_name(c) in (
            "no_sync", "set_requires_gradient_sync") for c in ctx.calls()):
        return
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, ast.For):
            continue
        src = {ast.unparse(loop.iter)} | {
            ast.unparse(a.value) for a in ast.walk(ctx.tree) if isinstance(a, ast.Assign)
            and isinstance(loop.iter, ast.Name)
            and any(isinstance(t, ast.Name) and t.id == loop.iter.id for t in a.targets)}
        if not any(".split(" in s or ".chunk(" in s for s in src):
            continue
        body = list(ctx.calls(loop.body))
        if any(last_name(c) == "step" for c in body):
            continue
        for c in body:
            if last_name(c) == "backward":
                ctx.add_late("script.ddp-no-sync", "info", c,
                             "backward per micro-batch with gradient synchronisation on; "
                             "the optimizer steps only after the loop",
                             reason="each backward reduces the gradients across ranks; wrap "
                             "the non-final micro-batches in `no_sync()` "
                             "(verl-project/verl#7095)")


def _no_sync_around_backward_only(ctx: Context) -> None:
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, LOOPS):
            continue
        for i, w in enumerate(loop.body):
            if not isinstance(w, ast.With):
                continue
            for item in w.items:
                e = item.context_expr
                if not (isinstance(e, ast.Call) and last_name(e) in ("no_backward_sync",
                                                                      "no_sync")):
                    continue
                model = ast.unparse(e.args[0]) if last_name(e) == "no_backward_sync" \
                    and e.args else ast.unparse(e.func.value) if isinstance(
                        e.func, ast.Attribute) else ""
                inside = [c for c in ctx.calls(w.body)]
                if not model or not any(last_name(c) == "backward" for c in inside) \
                        or any(ast.unparse(c.func) == model for c in inside):
                    continue
                if any(ast.unparse(c.func) == model for c in ctx.calls(loop.body[:i])):
                    ctx.add_late("script.ddp-no-sync", "info", w,
                                 reason=f"`{model}`'s forward runs before the "
                                        f"`{last_name(e)}` block, so the block covers "
                                        "only the backward (Lightning-AI/lit-llama#357)")
