"""Pitfall forms first seen in corpus_round17's dev half (issue 24, round 18), under existing
ids, all ``info`` (the cost depends on sizes and call counts the file does not show). Each
extends what an older rule follows (calls, dataflow, loops) rather than naming one file:

- a jit wrapper built and called in the same code that a loop runs on every iteration --
  ``jax.jit(f)(x)``, ``eqx.filter_jit(f)(x)``, or ``g = jax.jit(...)`` then ``g(x)`` in one
  function a loop calls: jit caches on the wrapped callable's identity, so each call traces
  and compiles again (``script.jit-in-loop``; nstarman, GalacticDynamics/coordinax#785, 2026;
  jax-ml/jax#9672; kazewong/flowMC#133);
- ``jax.lax.scan``/``fori_loop``/``while_loop`` outside any jit, in code a loop runs: the
  loop body is traced again on every call (``script.jit-in-loop``; kazewong/flowMC#133, 2023);
- ``x.cpu().mean()`` (a reduction after a host copy): the whole tensor crosses to the host
  to give one number (``script.per-step-copy``; brcps12, huggingface/trl#1154, 2023);
- ``.item()`` in a loop whose body runs ``backward()`` (a micro-batch loop, the optimizer
  step after it): one sync per micro-batch and metric (``script.sync-in-step-loop``;
  zhangxin81, verl-project/verl#7096, 2026);
- a torchmetrics metric's ``.compute()`` in code every step runs, not under a condition: it
  syncs the metric state across ranks each step (``script.sync-in-step-loop``; epwalsh,
  allenai/OLMo#279, 2023);
- ``@torch.no_grad()`` / ``with torch.no_grad()`` in a file that never trains, where an
  RL-style ``x.step(arg)`` call had counted as training (``script.no-grad-not-inference-mode``;
  vikhyat, m87-labs/moondream#234, 2025);
- ``GradScaler()`` under a condition that holds for bf16 (a test, or a name it reads,
  mentions ``"bf16"``/``bfloat16``): bf16 needs no loss scaling (``script.gradscaler-bf16``;
  kashif, huggingface/accelerate#1036, 2023);
- ``Dataset.batch(n)`` with no ``drop_remainder`` where XLA is switched on for the whole
  program (``tf.config.optimizer.set_jit``) (``script.ragged-last-batch``; rxsang,
  tensorflow/models#6508, 2019);
- a jitted function's static argument given an object built anew in an enclosing loop
  (``optim = optax.adam(lr)`` per sweep value): one compilation per object
  (``script.recompile-shapes``; patrick-kidger, google-deepmind/optax#577, 2023).

The DDP, tf.function and data-pipeline forms of this round are in ``round18b_rules.py``.
"""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import LOOPS, const, keyword, last_name, target_names, walk
from devicebench.script_check.context import Context
from devicebench.script_check.kinds import repeat_site, scope_of
from devicebench.script_check.loop_rules import _jitted_functions, _static_params

_JITS = ("jax.jit", "jax.pmap", "equinox.filter_jit", "equinox.filter_pmap")
_LAX_LOOPS = ("jax.lax.scan", "jax.lax.fori_loop", "jax.lax.while_loop")
_REDUCE = ("mean", "sum", "max", "min", "std", "var", "norm")


def _traced(ctx: Context, node: ast.AST) -> bool:
    fn = ctx.enclosing(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    return ctx.is_compiled_scope(node) or fn is not None and fn.name in _jitted_functions(ctx)


def _loop_calls(ctx: Context, name: str) -> bool:
    return any(isinstance(c, ast.Call) and last_name(c) == name
               for lp in ast.walk(ctx.tree) if isinstance(lp, LOOPS) for c in walk(lp.body))


def per_iteration(ctx: Context, node: ast.AST) -> bool:
    """``repeat_site``, or a method a loop calls as ``obj.m(...)`` on an object of a class
    the file does not build (directly, or through another method of the class)."""
    if repeat_site(ctx, node) is not None:
        return True
    fn = ctx.enclosing(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    cls = ctx.enclosing(fn, (ast.ClassDef,)) if fn is not None else None
    if cls is None or fn.name.startswith("__"):
        return False
    if _loop_calls(ctx, fn.name):
        return True
    return any(isinstance(m, ast.FunctionDef) and m is not fn and _loop_calls(ctx, m.name)
               and any(last_name(c) == fn.name for c in ctx.calls([m])) for m in cls.body)


def _jit_built_per_call(ctx: Context) -> None:
    for call in ctx.calls():
        if ctx.resolve(call.func) not in _JITS or _traced(ctx, call):
            continue
        parent = ctx.parents.get(call)
        used = isinstance(parent, ast.Call) and parent.func is call
        if not used and isinstance(parent, ast.Assign):
            names = {n for t in parent.targets for n in target_names(t)}
            fn = ctx.enclosing(call, (ast.FunctionDef, ast.AsyncFunctionDef))
            used = fn is not None and fn.name != "__init__" and any(
                isinstance(c.func, ast.Name) and c.func.id in names for c in ctx.calls([fn]))
        if used and per_iteration(ctx, call):
            ctx.add_late("script.jit-in-loop", "info", call,
                    "the jit wrapper is built and called in code a loop runs on every "
                    "iteration: a new wrapper is traced and compiled each time",
                    how=f"`{ast.unparse(call.func)}`", reason="jit caches on the wrapped "
                    "callable's identity", ctor=ast.unparse(call.func))


def _lax_loop_outside_jit(ctx: Context) -> None:
    for call in ctx.calls():
        if ctx.resolve(call.func) in _LAX_LOOPS and not _traced(ctx, call) and per_iteration(
                ctx, call):
            ctx.add_late("script.jit-in-loop", "info", call,
                    f"`{ast.unparse(call.func)}` runs outside any jit in code a loop runs: "
                    "its body is traced again on every call",
                    how=f"`{ast.unparse(call.func)}` outside jit",
                    reason="an un-jitted lax loop traces its body on each call",
                    ctor="jax.jit")


def _static_object_per_iteration(ctx: Context) -> None:
    jitted = _jitted_functions(ctx)
    for call in ctx.calls():
        if not isinstance(call.func, ast.Name) or call.func.id not in jitted:
            continue
        fn = ctx.funcs.get(call.func.id)
        if fn is None:
            continue
        static = _static_params(fn, jitted[call.func.id])
        params = [a.arg for a in fn.args.args]
        for i, a in enumerate(call.args):
            if i >= len(params) or params[i] not in static or not isinstance(a, ast.Name):
                continue
            loop = ctx.enclosing(call, LOOPS)
            outer = ctx.enclosing(loop, LOOPS) if loop is not None else None
            for lp in (loop, outer):
                if lp is None:
                    continue
                made = [s for s in walk(lp.body) if isinstance(s, ast.Assign)
                        and isinstance(s.value, ast.Call) and a.id in
                        {n for t in s.targets for n in target_names(t)}]
                if made:
                    ctx.add_late("script.recompile-shapes", "info", call,
                            f"`{a.id}` is a static argument of `{call.func.id}`, built anew "
                            f"at {ctx.line(made[0].lineno)} on every iteration of the loop at "
                            f"{ctx.line(lp.lineno)}: one compilation per object",
                            how="jit", fixtext="pass the varying value as a traced "
                            "argument (for optax, `optax.inject_hyperparams`)")
                    break


def _reduce_after_host_copy(ctx: Context) -> None:
    for call in ctx.calls():
        f = call.func
        if not (isinstance(f, ast.Attribute) and f.attr in _REDUCE and isinstance(
                f.value, ast.Call) and last_name(f.value) in ("cpu", "numpy")):
            continue
        ctx.add_late("script.per-step-copy", "info", call,
                f"`{ast.unparse(f.value)[:40]}` copies the whole tensor to the host, then "
                f"`.{f.attr}()` reduces it there",
                data=ast.unparse(f.value.func)[:40],
                fix=f"reduce on the device first: `x.{f.attr}().cpu()` (or keep it on the "
                    "device until logging)")


def _backward_loops(ctx: Context) -> list[ast.AST]:
    return [n for n in ast.walk(ctx.tree) if isinstance(n, LOOPS) and any(
        isinstance(c, ast.Call) and last_name(c) == "backward" for c in _own(n))]


def _own(loop: ast.AST) -> list[ast.AST]:
    """The loop's body, nested loops left out (what runs once per its own iteration)."""
    return list(walk(loop.body, lambda x: isinstance(x, LOOPS)))  # type: ignore[attr-defined]


def _item_in_backward_loop(ctx: Context) -> None:
    for loop in _backward_loops(ctx):
        for c in _own(loop):
            if isinstance(c, ast.Call) and last_name(c) == "item" and not c.args and not any(
                    isinstance(p, ast.If) for p in ctx.between(c, loop)):
                ctx.add_late("script.sync-in-step-loop", "info", c,
                        f"`.item()` in the loop at {ctx.line(loop.lineno)}, which runs a "
                        "backward pass every iteration: one host sync per value, per pass",
                        fixtext="keep the detached values on the device and read them "
                                "once after the loop (`torch.stack(vals).cpu()`)")


def _metric_names(ctx: Context) -> set[str]:
    out = set()
    for s in ast.walk(ctx.tree):
        if isinstance(s, ast.Assign) and isinstance(s.value, ast.Call):
            v = s.value
            while isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and isinstance(
                    v.func.value, ast.Call) and v.func.attr == "to":
                v = v.func.value
            if ctx.resolve(v.func).startswith("torchmetrics."):
                out |= {ast.unparse(t) for t in s.targets}
    return out


def _metric_compute_per_step(ctx: Context) -> None:
    metrics = _metric_names(ctx)
    for c in ctx.calls():
        if not (isinstance(c.func, ast.Attribute) and c.func.attr == "compute"
                and ast.unparse(c.func.value) in metrics):
            continue
        fn = scope_of(ctx, c)
        if any(isinstance(p, ast.If) for p in ctx.between(c, fn)):
            continue
        steps = any(ctx.is_step(x) for x in ctx.calls([fn])) if fn is not ctx.tree else False
        if steps and repeat_site(ctx, c) is not None:
            ctx.add_late("script.sync-in-step-loop", "info", c,
                    "a torchmetrics `compute()` on every step: it syncs the metric state "
                    "across processes (an all-gather) and reads it, each step",
                    fixtext="compute (or reduce to one rank) only on logging steps")


def _trains(ctx: Context) -> bool:
    return any(last_name(c) in ("backward", "grad", "requires_grad_", "zero_grad") or (
        last_name(c) == "step" and ctx.is_step(c)) for c in ctx.calls()) or any(
        isinstance(n, ast.keyword) and n.arg == "requires_grad" for n in ast.walk(ctx.tree))


def _no_grad_in_inference_file(ctx: Context) -> None:
    if _trains(ctx) or not any(last_name(c) == "step" for c in ctx.calls()):
        return  # gap13's rule covers files without any step call
    for n in ast.walk(ctx.tree):
        heads = [i.context_expr for i in n.items] if isinstance(n, ast.With) else list(
            getattr(n, "decorator_list", [])) if isinstance(
            n, ast.FunctionDef | ast.AsyncFunctionDef) else []
        for d in heads:
            if isinstance(d, ast.Call) and ctx.resolve(d.func) == "torch.no_grad":
                ctx.add_late("script.no-grad-not-inference-mode", "info",
                        n if isinstance(n, ast.With) else d,
                        "the file has no backward pass or optimizer step (its `.step(x)` "
                        "calls take an input: decoding, not training)")


def _bf16_name(ctx: Context, test: ast.AST, scope: ast.AST) -> bool:
    def says(node: ast.AST) -> bool:
        return any(isinstance(k, ast.Constant) and isinstance(k.value, str) and k.value in (
            "bf16", "bfloat16") for k in ast.walk(node)) or "bfloat16" in ast.unparse(node)
    if says(test):
        return True
    read = {ast.unparse(n) for n in ast.walk(test) if isinstance(n, ast.Name | ast.Attribute)}
    return any(isinstance(s, ast.Assign) and any(ast.unparse(t) in read for t in s.targets)
               and says(s.value) for s in ast.walk(scope))


def _scaler_for_bf16(ctx: Context) -> None:
    for c in ctx.calls():
        if not ctx.resolve(c.func).endswith("GradScaler"):
            continue
        scope = ctx.enclosing(c, (ast.ClassDef,)) or scope_of(ctx, c)
        for p in ctx.between(c, scope):
            if isinstance(p, ast.If) and _bf16_name(ctx, p.test, scope):
                ctx.add_late("script.gradscaler-bf16", "info", c,
                        f"the condition at {ctx.line(p.lineno)} holds for bf16 too: bf16 has "
                        "fp32's exponent range and needs no loss scaling, yet every step "
                        "pays the scale, unscale and inf check",
                        fix="create the scaler for fp16 only (`mixed_precision == \"fp16\"`)")
                break


def _global_xla(ctx: Context) -> bool:
    return any(ctx.resolve(c.func) == "tensorflow.config.optimizer.set_jit" and const(
        c.args[0] if c.args else None) is not False for c in ctx.calls())


def _batch_under_global_xla(ctx: Context) -> None:
    if not _global_xla(ctx):
        return
    for c in ctx.calls():
        if (isinstance(c.func, ast.Attribute) and c.func.attr == "batch" and len(c.args) == 1
                and keyword(c, "drop_remainder") is None and "data" in ast.unparse(
                    scope_of(ctx, c))):
            ctx.add_late("script.ragged-last-batch", "info", c,
                    "XLA is switched on for the program (`tf.config.optimizer.set_jit`): the "
                    "final partial batch has another shape and the step compiles again",
                    n="the number of examples", how="XLA", extra=" (once per distinct size)",
                    fixtext="`.batch(n, drop_remainder=True)` when XLA is on")
