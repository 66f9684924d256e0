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
from devicebench.script_check.kinds import repeat_site

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
    return ""


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
    if not ctx.uses("torch"):
        return
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, ast.For) or ctx.is_compiled_scope(loop):
            continue
        names = {t.id for t in ast.walk(loop.target) if isinstance(t, ast.Name)}
        ops = [n for n in walk(loop.body) if isinstance(n, ast.Call)
               and isinstance(n.func, ast.Attribute) and n.func.attr in _INPLACE
               and n.func.attr.endswith("_") and any(
                   isinstance(r, ast.Name) and r.id in names for r in ast.walk(n.func.value))]
        if not ops or any(isinstance(n, ast.For | ast.While) for n in walk(loop.body)):
            continue
        why = _per_step(ctx, loop)
        if not why:
            continue
        kinds = list(dict.fromkeys(o.func.attr for o in ops))  # type: ignore[attr-defined]
        ctx.add("script.foreach-not-used", "info", loop,
                f"a loop over `{ast.unparse(loop.iter)[:40]}` updating each tensor in place; {why}",
                ops=", ".join(f"`{k}`" for k in kinds[:4]), n=str(len(ops)), op=kinds[0])


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
        if q in _FUSABLE and not any(k.arg in ("fused", "foreach") or k.arg is None
                                     for k in call.keywords):
            ctx.add("script.optimizer-not-fused", "info", call,
                    f"`{last_name(call)}` without `fused=` in a script that moves its model "
                    "to a device",
                    opt=q, since=_FUSABLE[q])
