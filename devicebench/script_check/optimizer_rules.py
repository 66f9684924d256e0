"""How the optimizer step launches its kernels (issue 24, round 9).

An optimizer step is a handful of element-wise updates per parameter tensor. Written as a
Python loop over the parameters, it launches each of them once per tensor -- hundreds of tiny
kernels per step for a real model; PyTorch's ``torch._foreach_*`` ops (the built-in optimizers'
default "foreach" implementation) launch one per group, and ``fused=True`` one for the whole
update (facebookresearch/schedule_free#10: 85 -> 65 ms per step; lightseekorg/TorchSpec#151:
"50% faster optimizer steps"; deepmodeling/deepmd-kit#4463: 22 -> 8 ms with ``fused=True``).
Both findings are info: the gain is large with many small tensors and nil with a few big ones.
"""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import last_name, walk
from devicebench.script_check.context import Context, rule
from devicebench.script_check.kinds import _PER_STEP_HOOKS, repeat_site

_INPLACE = {"mul_", "add_", "addcmul_", "addcdiv_", "lerp_", "copy_", "sub_", "div_", "sqrt_",
            "clamp_", "zero_", "maximum_"}
_FUSABLE = {"torch.optim.Adam": "1.13", "torch.optim.AdamW": "2.0"}


def _per_step(ctx: Context, loop: ast.AST) -> str:
    fn = ctx.enclosing(loop, (ast.FunctionDef, ast.AsyncFunctionDef))
    if fn is not None and fn.name == "step" and ctx.enclosing(fn, (ast.ClassDef,)) is not None:
        return f"`{fn.name}`, an optimizer's step, runs once per training step"
    site = repeat_site(ctx, loop)
    if site is not None and not isinstance(site[0], ast.FunctionDef):
        return f"it runs on every iteration of the loop at {ctx.line(site[0].lineno)}"
    if site is not None and site[0].name in _PER_STEP_HOOKS:  # type: ignore[attr-defined]
        return f"Lightning calls `{site[0].name}` on every training step"  # type: ignore[attr-defined]
    return ""


def _updates(loop: ast.For, names: set[str]) -> list[tuple[ast.AST, str]]:
    """(node, op) for each in-place update of a loop variable in ``loop``'s body: an in-place
    method (``p.mul_(d)``), an augmented assignment (``v *= d``, an EMA's form) or a
    rebinding of its storage (``p.data = ...``)."""
    out: list[tuple[ast.AST, str]] = []
    for n in walk(loop.body):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and (
                n.func.attr in _INPLACE) and any(
                    isinstance(r, ast.Name) and r.id in names for r in ast.walk(n.func.value)):
            out.append((n, n.func.attr))
        elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) and (
                n.target.id in names) and isinstance(n.op, ast.Mult | ast.Add | ast.Sub):
            out.append((n, {ast.Mult: "mul_", ast.Add: "add_", ast.Sub: "sub_"}[type(n.op)]))
        elif isinstance(n, ast.Assign) and any(
                isinstance(t, ast.Attribute) and t.attr == "data" and isinstance(t.value, ast.Name)
                and t.value.id in names for t in n.targets):
            out.append((n, "copy_"))
    return out


def _torch_for_loops(ctx: Context) -> list[tuple[ast.For, set[str]]]:
    """The ``for`` loops of a torch script outside compiled code, with their loop names."""
    if not ctx.uses("torch"):
        return []
    return [(loop, {t.id for t in ast.walk(loop.target) if isinstance(t, ast.Name)})
            for loop in ast.walk(ctx.tree)
            if isinstance(loop, ast.For) and not ctx.is_compiled_scope(loop)]


@rule("script.foreach-not-used",
      "optimizer update written as a Python loop over the parameters",
      "the loop runs {ops} once per parameter tensor: {n} small kernel launches per tensor, "
      "per step, where `torch._foreach_{op}` does each of them for the whole list in one "
      "launch (facebookresearch/schedule_free#10: ~85 -> ~65 ms per step on an SD1.5 UNet; "
      "lightseekorg/TorchSpec#151: `torch._foreach_copy_`, \"50% faster optimizer steps\")",
      "collect the tensors once (`params = [p for p in group[\"params\"] if p.grad is not "
      "None]`) and update them together with `torch._foreach_mul_`, `torch._foreach_add_`, "
      "`torch._foreach_copy_` ...; or use a built-in optimizer (foreach by default on CUDA, "
      "`fused=True` for Adam/AdamW)")
def foreach_not_used(ctx: Context) -> None:
    for loop, names in _torch_for_loops(ctx):
        ops = _updates(loop, names)
        if not ops or any(isinstance(n, ast.For | ast.While) for n in walk(loop.body)):
            continue
        why = _per_step(ctx, loop)
        if not why:
            continue
        kinds = list(dict.fromkeys(op for _, op in ops))
        ctx.add("script.foreach-not-used", "info", loop,
                f"a loop over `{ast.unparse(loop.iter)[:40]}` updating each tensor in place; {why}",
                ops=", ".join(f"`{k}`" for k in kinds[:4]), n=str(len(ops)), op=kinds[0])


def _out_of_place(loop: ast.For, names: set[str]) -> list[ast.AST]:
    """``v.copy_(f(v, w))`` / ``p.data = p.data * m + ...``: a loop variable's new value
    computed out of place from itself (a new tensor per element), then stored back."""
    out: list[ast.AST] = []
    for n in walk(loop.body):
        value, target = None, None
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and (
                n.func.attr == "copy_") and n.args and isinstance(n.func.value, ast.Name):
            value, target = n.args[0], n.func.value.id
        elif isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(
                n.targets[0], ast.Attribute) and n.targets[0].attr == "data" and isinstance(
                    n.targets[0].value, ast.Name):
            value, target = n.value, n.targets[0].value.id
        if target in names and isinstance(value, ast.Call | ast.BinOp) and any(
                isinstance(r, ast.Name) and r.id == target for r in ast.walk(value)):
            out.append(n)
    return out


@rule("script.ema-out-of-place",
      "averaged weights updated out of place, one new tensor per parameter per step",
      "the loop computes each parameter's new average as a fresh tensor (`decay * e + (1 - "
      "decay) * m` allocates two temporaries and the result) and then copies it back: three "
      "kernels and three allocations per tensor where one in-place op does it "
      "(huggingface/pytorch-image-models#1553: ~50% faster EMA in place)",
      "update in place: `e.mul_(decay).add_(m, alpha=1 - decay)` or `e.lerp_(m, 1 - decay)`; "
      "for the whole list at once `torch._foreach_lerp_(ema_params, params, 1 - decay)`")
def ema_out_of_place(ctx: Context) -> None:
    for loop, names in _torch_for_loops(ctx):
        hits = _out_of_place(loop, names)
        if hits and _per_step(ctx, loop):
            for n in hits:
                ctx.add("script.ema-out-of-place", "info", n, _per_step(ctx, loop))


@rule("script.optimizer-not-fused",
      "`{opt}` built without `fused=True` for a model on the GPU",
      "the default (foreach) Adam update runs several kernels per group of parameters; "
      "`fused=True` does the whole update in one kernel per device and dtype (PyTorch >= "
      "{since}, CUDA tensors; deepmodeling/deepmd-kit#4463: optimizer update 22 -> 8 ms, ~3% "
      "of the step; pytorch/torchtitan#355: +1.5-2% MFU). Worth it when the optimizer step is "
      "a visible part of the step",
      "`{opt}(params, lr=..., fused=True)` (parameters must be floating-point CUDA tensors; "
      "leave it out for CPU-offloaded parameters)")
def optimizer_not_fused(ctx: Context) -> None:
    if not ctx.uses("torch"):
        return
    moved = any(last_name(c) == "cuda" or last_name(c) == "to" and c.args and any(
        w in ast.unparse(c.args[0]).lower() for w in ("cuda", "dev", "gpu"))
        for c in ctx.calls())
    if not moved:  # a CPU script: fused CPU Adam is recent (PyTorch 2.4) and gains less
        return
    for call in ctx.calls():
        q = ctx.resolve(call.func)
        if q in _FUSABLE and not any(k.arg == "fused" or k.arg is None
                                     for k in call.keywords):
            foreach = any(k.arg == "foreach" for k in call.keywords)  # round 11: d2go#471
            ctx.add("script.optimizer-not-fused", "info", call,
                    f"`{last_name(call)}` without `fused=` in a script that moves its model "
                    "to a device" + ("; `foreach=` picks the multi-kernel path fused "
                                     "replaces (facebookresearch/d2go#471: ~23 ms faster "
                                     "per iteration with fused)" if foreach else ""),
                    opt=q, since=_FUSABLE[q])
