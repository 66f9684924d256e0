"""corpus_round21's dev forms (issue 24, round 22), under existing ids, all ``info`` and
added late (``Context.add_late``: none takes an older warning's place). They extend three
analyses: calls followed into the function they reach (a barrier in a method another
method calls per item; a compiled function fed a batch-shaped reshape), values followed
through parameters and their callers' defaults (``pin_memory``), and loops found around
a callee (per-item barriers, micro-batch backward).

- ``x = x.to(dev)`` of a loop element of a loader, without ``non_blocking=``, in a
  function that also moves a model with ``.to(dev)`` (``script.blocking-h2d-copy``;
  saifhaq/alma#113);
- a ``jax.jit`` wrapper whose function turns its parameters into arrays
  (``jnp.asarray``/``jnp.stack``/``jnp.array``), called in a loop on values taken from a
  ``.get()`` whose ``.put`` sends lists appended per step: one transfer per list element
  (``script.per-step-copy``; vwxyzjn/cleanba#2);
- ``torch.cuda.synchronize()`` in a function that then enters ``with torch.cuda.stream``:
  the host waits for the whole device to order a side stream (``wait_stream`` orders it
  on the device) (``script.sync-in-step-loop``; deepspeedai/DeepSpeed#2500);
- a ``.synchronize()`` in a function that another function calls inside a loop: one
  barrier per item instead of one per batch (``script.sync-in-step-loop``;
  LMCache/LMCache-Ascend#216);
- ``DataLoader(pin_memory=p)`` with ``p`` a parameter defaulting to ``False`` that no
  caller sets true (``script.dataloader-no-pin-memory``; allenai/OLMoASR#23);
- ``torch.tensor(name, device=<not cpu>)`` of a Python list the same function builds, in
  per-batch code: a pageable copy the host waits for (``script.blocking-h2d-copy``;
  sgl-project/sglang#35106);
- ``.backward()`` in a loop over ``.split()``/``.chunk()`` pieces with the optimizer step
  outside the loop, in a file naming FSDP/DDP and no ``no_sync``: a gradient reduction per
  micro-batch (``script.ddp-no-sync``; verl-project/verl#7095);
- a function under a bare ``@torch.compile`` (no ``dynamic=``) called in per-batch code on
  an argument reshaped with sizes unpacked from a ``.shape`` (``script.recompile-shapes``;
  vllm-project/vllm#10406).

Sources: the threads above (https://github.com/<owner>/<repo>/issues/<n> or ``/pull/<n>``).

Its DDP form (``ddp-no-sync``) now lives in :mod:`.forms_distributed`.
Its loader form (``_pin_memory_param_off``) now lives in :mod:`.forms_data`.
"""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import LOOPS, const, keyword, last_name, walk
from devicebench.script_check.context import Context
from devicebench.script_check.gap20_rules import per_batch

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_SYNC = "script.sync-in-step-loop"


def _targets(t: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}


def _blocking_loader_copy(ctx: Context) -> None:
    for fn in ast.walk(ctx.tree):
        if not isinstance(fn, _FUNCS):
            continue
        moved = {ast.unparse(c.args[0]) for c in ctx.calls(fn.body) if last_name(c) == "to"
                 and len(c.args) == 1 and isinstance(c.func, ast.Attribute)
                 and "model" in ast.unparse(c.func.value)}
        for loop in walk(fn.body):
            if not (isinstance(loop, ast.For) and "loader" in ast.unparse(loop.iter)):
                continue
            names = _targets(loop.target)
            for s in walk(loop.body):
                if isinstance(s, ast.Assign) and isinstance(s.value, ast.Call) \
                        and last_name(s.value) == "to" and isinstance(s.value.func,
                                                                       ast.Attribute) \
                        and ast.unparse(s.value.func.value) in names and s.value.args \
                        and ast.unparse(s.value.args[0]) in moved \
                        and keyword(s.value, "non_blocking") is None:
                    ctx.add_late("script.blocking-h2d-copy", "info", s,
                                 f"`{ast.unparse(s.value)}` copies each batch of the loader "
                                 "with a blocking copy", loader="the file does not show the "
                                 "batches pinned (saifhaq/alma#113)")


def _appended_lists(ctx: Context) -> set[str]:
    return {last_name(c.func.value) for c in ctx.calls() if isinstance(c.func, ast.Attribute)
            and c.func.attr == "append" and isinstance(c.func.value, ast.Name)
            and ctx.enclosing(c, LOOPS) is not None}


def _jit_fed_appended_lists(ctx: Context) -> None:
    lists, funcs = _appended_lists(ctx), ctx.funcs
    queued = any(last_name(c) == "put" and c.args and isinstance(c.args[0], ast.Tuple)
                 and sum(isinstance(e, ast.Name) and e.id in lists for e in c.args[0].elts) > 1
                 for c in ctx.calls())
    if not queued:
        return
    for a in ast.walk(ctx.tree):
        if not (isinstance(a, ast.Assign) and isinstance(a.value, ast.Call)
                and ctx.resolve(a.value.func) == "jax.jit" and a.value.args
                and isinstance(a.value.args[0], ast.Name) and a.value.args[0].id in funcs
                and len(a.targets) == 1 and isinstance(a.targets[0], ast.Name)):
            continue
        fn = funcs[a.value.args[0].id]
        params = {p.arg for p in fn.args.args}
        if not any(ctx.resolve(c.func) in ("jax.numpy.asarray", "jax.numpy.stack",
                                           "jax.numpy.array") and c.args
                   and isinstance(c.args[0], ast.Name) and c.args[0].id in params
                   for c in ctx.calls(fn.body)):
            continue
        got = {n for s in ast.walk(ctx.tree) if isinstance(s, ast.Assign)
               and isinstance(s.value, ast.Call) and last_name(s.value) == "get"
               for t in s.targets for n in _targets(t)}
        for c in ctx.calls():
            if isinstance(c.func, ast.Name) and c.func.id == a.targets[0].id \
                    and ctx.enclosing(c, LOOPS) is not None and any(
                        isinstance(v, ast.Name) and v.id in got for v in c.args):
                ctx.add_late("script.per-step-copy", "info", c,
                             f"`{fn.name}` is jitted and receives Python lists of arrays "
                             "(appended per step and queued): each element is its own "
                             "transfer", data="lists of per-step arrays",
                             fix="stack each list into one array where it is made, and "
                                 "send the stacked arrays (vwxyzjn/cleanba#2)")


def _is_device_sync(ctx: Context, c: ast.Call) -> bool:
    return ctx.resolve(c.func) == "torch.cuda.synchronize"


def _sync_before_side_stream(ctx: Context) -> None:
    for fn in ast.walk(ctx.tree):
        if not isinstance(fn, _FUNCS):
            continue
        streams = [w for w in walk(fn.body) if isinstance(w, ast.With) and any(
            isinstance(i.context_expr, ast.Call) and ctx.resolve(i.context_expr.func)
            == "torch.cuda.stream" for i in w.items)]
        for c in ctx.calls(fn.body):
            if _is_device_sync(ctx, c) and any(w.lineno > c.lineno for w in streams):
                ctx.add_late(_SYNC, "info", c, "the host waits for the whole device only "
                             "to order the side stream entered after it",
                             fixtext="order the streams on the device: "
                             "`stream.wait_stream(torch.cuda.current_stream())` "
                             "(deepspeedai/DeepSpeed#2500)")


def _barrier_in_callee_per_item(ctx: Context) -> None:
    for fn in ast.walk(ctx.tree):
        if not isinstance(fn, _FUNCS):
            continue
        bars = [c for c in ctx.calls(fn.body) if last_name(c) == "synchronize"
                and ctx.enclosing(c, LOOPS) is None]
        if not bars:
            continue
        for c in ctx.calls():
            g = ctx.enclosing(c, _FUNCS)
            loop = ctx.enclosing(c, LOOPS)
            if last_name(c) == fn.name and g is not None and g is not fn \
                    and loop is not None and ctx.enclosing(loop, _FUNCS) is g:
                for b in bars:
                    ctx.add_late(_SYNC, "info", b, f"`{g.name}` calls `{fn.name}` once per "
                                 f"item in the loop at {ctx.line(loop.lineno)}, and each "
                                 "call ends in this barrier",
                                 fixtext="synchronise once after the loop "
                                 "(LMCache/LMCache-Ascend#216)")


def _lists_built(fn: ast.AST) -> set[str]:
    return {t.id for a in walk(fn.body) if isinstance(a, ast.Assign)
            and isinstance(a.value, (ast.ListComp, ast.List))
            for t in a.targets if isinstance(t, ast.Name)}


def _list_tensor_per_batch(ctx: Context) -> None:
    for fn in ast.walk(ctx.tree):
        if not isinstance(fn, _FUNCS):
            continue
        lists = _lists_built(fn)
        for c in ctx.calls(fn.body):
            dev = keyword(c, "device")
            if ctx.resolve(c.func) == "torch.tensor" and c.args and isinstance(
                    c.args[0], ast.Name) and c.args[0].id in lists and dev is not None \
                    and const(dev) != "cpu" and per_batch(ctx, c):
                ctx.add_late("script.blocking-h2d-copy", "info", c,
                             f"`torch.tensor({c.args[0].id}, device=...)` copies a Python "
                             "list from pageable memory and waits for the stream, per batch",
                             loader="build it on the CPU (pinned) and copy with "
                             "`.to(device, non_blocking=True)` (sgl-project/sglang#35106)")


def _bare_compiled(ctx: Context) -> set[str]:
    return {f.name for f in ast.walk(ctx.tree) if isinstance(f, _FUNCS) and any(
        ctx.resolve(d) == "torch.compile" for d in f.decorator_list)}


def _bare_compile_batch_shapes(ctx: Context) -> None:
    compiled = _bare_compiled(ctx)
    if not compiled or any(last_name(c) == "mark_dynamic" for c in ctx.calls()):
        return
    for c in ctx.calls():
        fn = ctx.enclosing(c, _FUNCS)
        if not (isinstance(c.func, ast.Name) and c.func.id in compiled and fn is not None
                and per_batch(ctx, c)):
            continue
        sizes = {n for a in walk(fn.body) if isinstance(a, ast.Assign)
                 and isinstance(a.value, ast.Attribute) and a.value.attr == "shape"
                 for t in a.targets for n in _targets(t)}
        shaped = {t.id for a in walk(fn.body) if isinstance(a, ast.Assign)
                  and isinstance(a.value, ast.Call) and last_name(a.value) in ("reshape", "view")
                  and _targets(ast.Tuple(elts=a.value.args)) & sizes
                  for t in a.targets if isinstance(t, ast.Name)}
        if any(isinstance(v, ast.Name) and v.id in shaped for v in c.args):
            ctx.add_late("script.recompile-shapes", "info", c,
                         f"`{c.func.id}` is compiled without `dynamic=` and fed a tensor "
                         "shaped by this batch's sizes: each new size recompiles",
                         how="`@torch.compile`", fixtext="pass `dynamic=True` "
                         "(vllm-project/vllm#10406)")
