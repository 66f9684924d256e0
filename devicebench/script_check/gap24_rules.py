"""Round 24's step 0 (issue 24): corpus_round22's held-out misses (seen since its one
measurement, 97e97c7), written as general forms under existing ids, all ``info`` and added
late (``Context.add_late``), so no older finding changes:

- in a Lightning ``Callback``'s per-batch hook (``on_train_batch_end``, ...):
  ``torch.distributed.all_reduce``, ``.item()``, and ``log``/``log_dict`` with
  ``on_step=True, sync_dist=True`` (a collective per batch) (``script.sync-in-step-loop``;
  alex-hh/profam#519);
- ``.cpu().<reduction>()`` in a method of a ``*Trainer`` subclass whose name says loss or
  metrics: the whole tensor is copied before it is reduced (``script.sync-in-step-loop``;
  hiyouga/LLaMA-Factory commit 2383e54);
- ``<x>.gather(...)`` in a function a ``run_step``/``train_step``/``training_step`` method
  calls on ``self`` (``script.sync-in-step-loop``; facebookresearch/detectron2#4785);
- ``s = t.cpu().numpy()`` whose value (also after a call on it) goes back with
  ``torch.tensor(s, device=...)`` in the same function: a host round trip per call
  (``script.sync-in-step-loop`` at the copy out, ``script.per-step-copy`` at the copy back),
  and a ``for i in range(t.shape[0])`` loop doing it per row
  (``script.per-sample-python-loop``; Radical-AI/torch-sim#87);
- ``x = jnp.append(x, v)`` in a loop (``script.growing-tensor``; kazewong/flowMC#31);
- ``eqx.apply_updates``/``optax.apply_updates`` of an ``.update(...)`` result in a loop
  outside a jitted function (``script.jax-update-outside-jit``; patrick-kidger/equinox#235);
- ``max(n, t)``/``min(n, t)`` of a name assigned from a tensor's ``.sum()``: Python's
  builtin compares on the host (``script.sync-in-step-loop``; Lightning-AI/litgpt#1374);
- ``.cpu().numpy()`` in a comprehension in a Lightning ``*_step`` method
  (``script.sync-in-step-loop``; CAREamics/careamics#218).

Sources: the threads above (https://github.com/<owner>/<repo>/pull/<n>, ``/issues/<n>``
or ``/commit/<hash>``).
"""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import LOOPS, keyword, last_name, walk
from devicebench.script_check.context import Context

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_SYNC = "script.sync-in-step-loop"
_HOOKS = ("on_train_batch_end", "on_train_batch_start", "on_validation_batch_end",
          "on_before_backward", "on_after_backward", "on_before_optimizer_step")
_REDUCE = ("mean", "sum", "max", "min", "std")
_STEPS = ("run_step", "train_step", "training_step")
_LIGHTNING_STEPS = ("training_step", "validation_step", "test_step", "predict_step")


def _methods(cls: ast.ClassDef) -> list[ast.AST]:
    return [f for f in cls.body if isinstance(f, _FUNCS)]


def _callback_hook_syncs(ctx: Context) -> None:
    for cls in ast.walk(ctx.tree):
        if not (isinstance(cls, ast.ClassDef) and any(last_name(b) == "Callback"
                                                      for b in cls.bases)):
            continue
        for fn in _methods(cls):
            if fn.name not in _HOOKS:
                continue
            for c in ctx.calls(fn.body):
                name = last_name(c)
                step_log = name in ("log", "log_dict") and all(
                    isinstance(keyword(c, k), ast.Constant) and keyword(c, k).value is True
                    for k in ("on_step", "sync_dist"))
                if name in ("all_reduce", "item") or step_log:
                    ctx.add_late(_SYNC, "info", c,
                                 fixtext=f"`{fn.name}` runs every batch: count on the host "
                                         "and reduce once per epoch or logging step "
                                         "(alex-hh/profam#519)")


def _trainer_cpu_reductions(ctx: Context) -> None:
    for cls in ast.walk(ctx.tree):
        if not (isinstance(cls, ast.ClassDef)
                and any(last_name(b).endswith("Trainer") for b in cls.bases)):
            continue
        for fn in _methods(cls):
            if not ("loss" in fn.name or "metric" in fn.name):
                continue
            for c in ctx.calls(fn.body):
                if last_name(c) in _REDUCE and isinstance(c.func, ast.Attribute) \
                        and isinstance(c.func.value, ast.Call) \
                        and last_name(c.func.value) == "cpu":
                    ctx.add_late(_SYNC, "info", c,
                                 fixtext="reduce on the device first, then copy the scalar "
                                         "(hiyouga/LLaMA-Factory commit 2383e54)")


def _gather_in_step_callee(ctx: Context) -> None:
    called = {c.func.attr for f in ast.walk(ctx.tree) if isinstance(f, _FUNCS)
              and f.name in _STEPS for c in ctx.calls(f.body)
              if isinstance(c.func, ast.Attribute) and isinstance(c.func.value, ast.Name)
              and c.func.value.id == "self"}
    for fn in ast.walk(ctx.tree):
        if isinstance(fn, _FUNCS) and fn.name in called:
            for c in ctx.calls(fn.body):
                if last_name(c) == "gather" and isinstance(c.func, ast.Attribute):
                    ctx.add_late(_SYNC, "info", c,
                                 fixtext="gather metrics every logging period, not every "
                                         "iteration (facebookresearch/detectron2#4785)")


def _cpu_numpy(v: ast.AST) -> ast.expr | None:
    """``t`` of ``t.cpu().numpy()``."""
    if isinstance(v, ast.Call) and last_name(v) == "numpy" and isinstance(v.func, ast.Attribute) \
            and isinstance(v.func.value, ast.Call) and last_name(v.func.value) == "cpu" \
            and isinstance(v.func.value.func, ast.Attribute):
        return v.func.value.func.value
    return None


def _host_round_trip(ctx: Context) -> None:
    for fn in ast.walk(ctx.tree):
        if not isinstance(fn, _FUNCS):
            continue
        host: dict[str, ast.stmt] = {}
        for s in walk(fn.body):
            if not (isinstance(s, ast.Assign) and len(s.targets) == 1):
                continue
            name = ast.unparse(s.targets[0])
            if _cpu_numpy(s.value) is not None and isinstance(s.targets[0], ast.Name):
                host[name] = s
            elif isinstance(s.value, ast.Call) and ctx.resolve(s.value.func) == "torch.tensor" \
                    and keyword(s.value, "device") is not None and s.value.args \
                    and isinstance(s.value.args[0], ast.Name) and s.value.args[0].id in host:
                out = host[s.value.args[0].id]
                ctx.add_late(_SYNC, "info", out,
                             fixtext="do the conversion with torch ops on the device "
                                     "(Radical-AI/torch-sim#87)")
                ctx.add_late("script.per-step-copy", "info", s,
                             data=f"`{s.value.args[0].id}`, copied out and back each call")
                loop = ctx.enclosing(out, LOOPS)
                if isinstance(loop, ast.For) and isinstance(loop.iter, ast.Call) \
                        and last_name(loop.iter) == "range" and ".shape[" in ast.unparse(
                            loop.iter):
                    ctx.add_late("script.per-sample-python-loop", "info", loop,
                                 what="a host round trip per row")
            elif isinstance(s.value, ast.Call) and any(
                    isinstance(a, ast.Name) and a.id in host for a in s.value.args):
                host[name] = host[next(a.id for a in s.value.args
                                       if isinstance(a, ast.Name) and a.id in host)]


def _jnp_append_in_loop(ctx: Context) -> None:
    for s in ast.walk(ctx.tree):
        if isinstance(s, ast.Assign) and isinstance(s.value, ast.Call) \
                and ctx.resolve(s.value.func) == "jax.numpy.append" and s.value.args \
                and len(s.targets) == 1 and ast.unparse(s.targets[0]) == ast.unparse(
                    s.value.args[0]) and ctx.enclosing(s, LOOPS) is not None:
            fn = ctx.enclosing(s, _FUNCS)
            ctx.add_late("script.growing-tensor", "info", s, fn="jnp.append",
                         compiled=f"`{fn.name if fn else 'the loop'}` (kazewong/flowMC#31)")


def _apply_updates_outside_jit(ctx: Context) -> None:
    updated = {n.id for s in ast.walk(ctx.tree) if isinstance(s, ast.Assign)
               and isinstance(s.value, ast.Call) and last_name(s.value) == "update"
               for t in s.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    for c in ctx.calls():
        if ctx.resolve(c.func) in ("equinox.apply_updates", "optax.apply_updates") \
                and ctx.enclosing(c, LOOPS) is not None and not ctx.is_compiled_scope(c) \
                and any(isinstance(a, ast.Name) and a.id in updated for a in c.args):
            ctx.add_late("script.jax-update-outside-jit", "info", c, api=ast.unparse(c.func))


def _builtin_minmax_of_sum(ctx: Context) -> None:
    for fn in ast.walk(ctx.tree):
        if not isinstance(fn, _FUNCS):
            continue
        sums = {t.id for s in walk(fn.body) if isinstance(s, ast.Assign)
                and isinstance(s.value, ast.Call) and last_name(s.value) == "sum"
                and isinstance(s.value.func, ast.Attribute)
                and isinstance(s.value.func.value, (ast.Compare, ast.Call, ast.Name))
                for t in s.targets if isinstance(t, ast.Name)}
        for c in ctx.calls(fn.body):
            if isinstance(c.func, ast.Name) and c.func.id in ("max", "min") and any(
                    isinstance(a, ast.Name) and a.id in sums for a in c.args) and any(
                    isinstance(a, ast.Constant) for a in c.args):
                ctx.add_late(_SYNC, "info", c,
                             fixtext="use t.clamp(min=1) so the value stays on the device "
                                     "(Lightning-AI/litgpt#1374)")


def _cpu_numpy_comprehension_in_step(ctx: Context) -> None:
    steps = set(_LIGHTNING_STEPS) | {
        c.func.attr for f in ast.walk(ctx.tree) if isinstance(f, _FUNCS)
        and f.name in _LIGHTNING_STEPS for c in ctx.calls(f.body)
        if isinstance(c.func, ast.Attribute) and isinstance(c.func.value, ast.Name)
        and c.func.value.id == "self"}
    for comp in ast.walk(ctx.tree):
        if not isinstance(comp, (ast.ListComp, ast.DictComp, ast.GeneratorExp)):
            continue
        fn = ctx.enclosing(comp, _FUNCS)
        if fn is not None and fn.name in steps and any(
                _cpu_numpy(n) is not None for n in ast.walk(comp)):
            ctx.add_late(_SYNC, "info", ctx.enclosing(comp, (ast.stmt,)) or comp,
                         fixtext="compute the metric with torch ops on the device "
                                 "(CAREamics/careamics#218)")
