"""Round 25's step 0 (issue 24): corpus_round23's held-out misses (seen since its one
measurement, f827cc8), written as general forms under existing ids, all ``info`` and added
late (``Context.add_late``), so no older finding changes:

- a clock pair in one block around a call of a parameter fed a value moved to the device in
  the same function (``x = x.to(device)``; ``model(x)``) (``script.unsynced-timing``;
  saifhaq/alma#115);
- ``timer.start()`` ... ``timer.stop()`` of a file timer class around cupy/cuNumeric work,
  no device synchronize between (``script.unsynced-timing``; nv-legate/cupynumeric#747);
- a timer method that reads the clock and keeps the last reading in ``self`` (a "tick")
  called in a loop that calls a jitted function, with nothing blocked in the loop: each tick
  reads dispatch time, and the first includes the compile (``script.unsynced-timing``;
  bytedance/jaqmc#34);
- a clock read right before a loop over a generator function of the file that calls its
  model parameter, with no earlier call of it: the first item (the prompt) is timed cold
  (``script.cold-call-timed``; ml-explore/mlx-examples#380);
- ``start.elapsed_time(end)`` of CUDA events with no ``end.synchronize()`` or device
  synchronize after ``end.record()`` (``script.unsynced-timing``; pytorch/tutorials#3166);
- ``.predict(x)`` in a loop where ``x`` is built outside it with a leading dimension of 1:
  one sample per call (``script.keras-call-per-sample``; stackoverflow.com/q/58378374);
- ``xm.mark_step()``/``torch_xla.sync()`` without ``wait=True`` in a clock-timed loop, no
  ``wait_device_ops`` before the closing read: the clock measures tracing
  (``script.unsynced-timing``; pytorch/xla#8858);
- a worker count capped by a parameter whose default is a small constant (at most 4)
  (``n_max_processes=max_workers``, ``min(..., max_workers)``) and passed on as
  ``workers=``/``num_workers=`` (``script.dataloader-workers``; brainglobe/cellfinder#396).

Sources: https://github.com/<owner>/<repo>/pull/<n> or ``/issues/<n>`` as named above;
https://stackoverflow.com/questions/58378374.
"""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import LOOPS, blocks, const, keyword, last_name, walk
from devicebench.script_check.context import Context
from devicebench.script_check.dataflow import waits
from devicebench.script_check.timing_rules import CLOCKS, _clock_pairs

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_TIMING = "script.unsynced-timing"
_JAX_SYNC = "`jax.block_until_ready(result)`"
_TORCH_SYNC = "`torch.cuda.synchronize()` before each clock read, or CUDA events"
_GRAPH = "batch the ops, `torch.compile`"
_GPU_ARRAYS = ("cupy", "cunumeric", "cupynumeric")


def _moved(ctx: Context, fn: ast.AST) -> set[str]:
    return {t.id for s in walk(fn.body) if isinstance(s, ast.Assign)  # type: ignore[attr-defined]
            for n in [s.value] if isinstance(n, ast.Call) and last_name(n) in ("to", "cuda")
            for t in s.targets if isinstance(t, ast.Name)}


def _timed_param_on_device_input(ctx: Context) -> None:
    for stmts in blocks(ctx.tree):
        fn = ctx.enclosing(stmts[0], _FUNCS)
        if fn is None:
            continue
        params, moved = {a.arg for a in fn.args.args}, _moved(ctx, fn)  # type: ignore[attr-defined]
        for a, b in _clock_pairs(ctx, stmts):
            region = stmts[a + 1:b]
            if not region or waits(ctx, region + [stmts[b]]) or any(
                    isinstance(s, LOOPS) for s in region):
                continue
            call = next((n for n in walk(region) if isinstance(n, ast.Call)
                         and isinstance(n.func, ast.Name) and n.func.id in params
                         and any(isinstance(x, ast.Name) and x.id in moved for x in n.args)),
                        None)
            if call is not None:
                ctx.add_late(_TIMING, "info", call,
                             f"`{call.func.id}` (a parameter) is called on a tensor moved to "  # type: ignore[attr-defined]
                             "the device above; it returns once the work is queued, and "
                             f"nothing waits before {ctx.line(stmts[b].lineno)} reads the clock",
                             sync=_TORCH_SYNC, graph=_GRAPH)


def _reads_clock(ctx: Context, node: ast.AST) -> bool:
    return any(isinstance(c, ast.Call) and ctx.resolve(c.func) in CLOCKS for c in ast.walk(node))


def _stamp_pairs(ctx: Context, cls: ast.ClassDef) -> list[tuple[str, str]]:
    """(start, stop) methods: ``start`` keeps a clock-derived value in ``self.<attr>``
    (``self.t0 = time.perf_counter_ns() / 1e3`` too), ``stop`` reads the clock and it."""
    methods = [f for f in cls.body if isinstance(f, ast.FunctionDef)]
    stamps = {f.name: {t.attr for s in walk(f.body) if isinstance(s, ast.Assign)
                       and _reads_clock(ctx, s.value) for t in s.targets
                       if isinstance(t, ast.Attribute)} for f in methods}
    return [(a, f.name) for a, attrs in stamps.items() if attrs for f in methods
            if f.name != a and _reads_clock(ctx, f) and any(
                isinstance(n, ast.Attribute) and n.attr in attrs
                and isinstance(n.ctx, ast.Load) for n in ast.walk(f))]


def _gpu_array_class_timer(ctx: Context) -> None:
    pairs = {(a, b) for cls in ctx.classes.values() for a, b in _stamp_pairs(ctx, cls)}
    if not pairs:
        return
    for stmts in blocks(ctx.tree):
        calls = [(i, s.value.func.attr) for i, s in enumerate(stmts) if isinstance(s, ast.Expr)
                 and isinstance(s.value, ast.Call) and isinstance(s.value.func, ast.Attribute)]
        calls += [(i, s.value.func.attr) for i, s in enumerate(stmts)
                  if isinstance(s, ast.Assign | ast.Return) and isinstance(s.value, ast.Call)
                  and isinstance(s.value.func, ast.Attribute)]
        for i, start in calls:
            j = next((j for j, stop in sorted(calls) if j > i and (start, stop) in pairs), None)
            if j is None:
                continue
            region = stmts[i + 1:j]
            if any("synchronize" in last_name(c) for c in ctx.calls(region)):
                continue
            op = next((c for c in ctx.calls(region)
                       if ctx.resolve(c.func).split(".")[0] in _GPU_ARRAYS), None)
            if op is not None:
                ctx.add_late(_TIMING, "info", op,
                             f"timed by `.{start}()` ({ctx.line(stmts[i].lineno)}) and the "
                             f"`.{stmts[j].value.func.attr}()` after it; GPU array calls "  # type: ignore[attr-defined]
                             "return once the kernel is queued",
                             sync="`cupy.cuda.Device().synchronize()` before the stop",
                             graph="one large op, timed with `cupyx.profiler.benchmark`")


def _tick_methods(ctx: Context) -> set[str]:
    out = set()
    for cls in ctx.classes.values():
        for f in cls.body:
            if isinstance(f, ast.FunctionDef) and any(
                    isinstance(c, ast.Call) and ctx.resolve(c.func) in CLOCKS
                    for c in ast.walk(f)) and any(
                    isinstance(s, ast.Assign) and any(isinstance(t, ast.Attribute)
                                                      for t in s.targets)
                    for s in walk(f.body)):
                out.add(f.name)
    return out


def _tick_timer_around_jit(ctx: Context) -> None:
    ticks = _tick_methods(ctx)
    jitted = {n for n, vs in ctx.assigns.items() for v in vs if isinstance(v, ast.Call)
              and ctx.resolve(v.func) in ("jax.jit", "jax.pmap")} | set(ctx.compiled)
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, LOOPS) or not ticks:
            continue
        body = list(loop.body)
        if not any(isinstance(c.func, ast.Attribute) and c.func.attr in ticks
                   for c in ctx.calls(body)) or any(
                last_name(c) == "block_until_ready" for c in ctx.calls(body)):
            continue
        call = next((c for c in ctx.calls(body) if isinstance(c.func, ast.Name)
                     and c.func.id in jitted), None)
        if call is not None:
            ctx.add_late(_TIMING, "info", call,
                         f"the timer ticks once per iteration of the loop at "
                         f"{ctx.line(loop.lineno)} and `{call.func.id}` only dispatches: "  # type: ignore[attr-defined]
                         "each tick reads queueing time, and the first includes the compile",
                         sync=_JAX_SYNC, graph="`jax.jit` + `jax.lax.fori_loop`")


def _cold_generator_timed(ctx: Context) -> None:
    gens = {n: f for n, f in ctx.funcs.items() if any(isinstance(y, ast.Yield)
                                                      for y in ast.walk(f))}
    for stmts in blocks(ctx.tree):
        for i, s in enumerate(stmts):
            if not (isinstance(s, ast.Assign) and isinstance(s.value, ast.Call)
                    and ctx.resolve(s.value.func) in CLOCKS):
                continue
            loop = next((x for x in stmts[i + 1:i + 3] if isinstance(x, ast.For)), None)
            if loop is None:
                continue
            gen = next((c for c in ast.walk(loop.iter) if isinstance(c, ast.Call)
                        and isinstance(c.func, ast.Name) and c.func.id in gens), None)
            if gen is None or any(isinstance(c.func, ast.Name) and c.func.id == gen.func.id
                                  for c in ctx.calls(stmts[:i])):
                continue
            ctx.add_late("script.cold-call-timed", "info", loop,
                         f"the clock starts before the first item of `{gen.func.id}(...)`, "  # type: ignore[attr-defined]
                         "whose model call runs cold (kernels loaded, memory allocated) "
                         "on that first item", name=gen.func.id, grad="",  # type: ignore[attr-defined]
                         no_grad="with torch.inference_mode():")


def _one_row(ctx: Context, name: str) -> bool:
    for v in ctx.assigns.get(name, []):
        while isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and last_name(
                v) == "astype":
            v = v.func.value
        if isinstance(v, ast.Call) and v.args:
            first = v.args[0]
            if isinstance(first, ast.Tuple) and first.elts:
                first = first.elts[0]
            if const(first) == 1 and (len(v.args) > 1 or isinstance(v.args[0], ast.Tuple)):
                return True
    return False


def _predict_one_sample_in_loop(ctx: Context) -> None:
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, LOOPS):
            continue
        inside = {t.id for s in walk(loop.body) if isinstance(s, ast.Assign)
                  for t in s.targets if isinstance(t, ast.Name)}
        for c in ctx.calls(loop.body):
            if last_name(c) == "predict" and isinstance(c.func, ast.Attribute) and c.args \
                    and isinstance(c.args[0], ast.Name) and c.args[0].id not in inside \
                    and _one_row(ctx, c.args[0].id):
                ctx.add_late("script.keras-call-per-sample", "info", c,
                             f"`{c.args[0].id}` has one row, and the loop at "
                             f"{ctx.line(loop.lineno)} calls predict on it every iteration",
                             method=".predict()",
                             remedy="call the model directly, `model(x, training=False)`, "
                                    "or predict all the inputs as one batch")


def _elapsed_before_sync(ctx: Context) -> None:
    for c in ctx.calls():
        if last_name(c) != "elapsed_time" or not c.args or not isinstance(c.args[0], ast.Name):
            continue
        end = c.args[0].id
        fn = ctx.enclosing(c, _FUNCS)
        scope = ctx.calls(fn.body if fn is not None else ctx.tree.body)  # type: ignore[attr-defined]
        before = [n for n in scope if n.lineno < c.lineno]
        recorded = [n for n in before if last_name(n) == "record" and isinstance(
            n.func, ast.Attribute) and isinstance(n.func.value, ast.Name)
            and n.func.value.id == end]
        if not recorded:
            continue
        last = max(n.lineno for n in recorded)
        if any(n.lineno >= last and (last_name(n) in ("synchronize", "wait") or ctx.is_sync(n))
               for n in before if n not in recorded):
            continue
        ctx.add_late(_TIMING, "info", ctx.enclosing(c, (ast.stmt,)) or c,
                     f"`{end}` was recorded at {ctx.line(last)} and nothing waits for it "
                     "before `elapsed_time` reads it: the GPU work may not have reached it",
                     sync=f"`{end}.synchronize()` before `elapsed_time`", graph=_GRAPH)


def _mark_step_timed(ctx: Context) -> None:
    if not ctx.uses("torch_xla"):
        return
    for stmts in blocks(ctx.tree):
        for a, b in _clock_pairs(ctx, stmts):
            region = stmts[a + 1:b]
            calls = list(ctx.calls(region))
            if any(last_name(n) == "wait_device_ops" or const(keyword(n, "wait")) is True
                   for n in calls):
                continue
            for n in calls:
                if ctx.enclosing(n, LOOPS) is not None and (
                        ctx.resolve(n.func).endswith("mark_step")
                        or ctx.resolve(n.func) == "torch_xla.sync"):
                    ctx.add_late(_TIMING, "info", n,
                                 "`mark_step`/`sync` cuts and dispatches the graph; the "
                                 "device runs it while Python traces on, so the clock "
                                 f"read at {ctx.line(stmts[b].lineno)} measures tracing",
                                 sync="`torch_xla.sync(wait=True)` or "
                                      "`xm.wait_device_ops()` before the clock",
                                 graph="`torch_xla.compile`")


def _small_default_params(fn: ast.AST) -> set[str]:
    args = fn.args  # type: ignore[attr-defined]
    pos = args.args[len(args.args) - len(args.defaults):]
    pairs = list(zip(pos, args.defaults, strict=True)) + [
        (a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None]
    return {a.arg for a, d in pairs if isinstance(const(d), int) and 0 < const(d) <= 4}


def _capped_workers(ctx: Context) -> None:
    for fn in ast.walk(ctx.tree):
        if not isinstance(fn, _FUNCS):
            continue
        small = _small_default_params(fn)
        if not small:
            continue
        passed = {k.value.id for c in ctx.calls(fn.body) for k in c.keywords
                  if k.arg in ("workers", "num_workers") and isinstance(k.value, ast.Name)}
        for s in walk(fn.body):
            if not (isinstance(s, ast.Assign) and len(s.targets) == 1
                    and isinstance(s.targets[0], ast.Name) and s.targets[0].id in passed
                    and isinstance(s.value, ast.Call)):
                continue
            caps = [x for x in list(s.value.args) + [k.value for k in s.value.keywords]
                    if isinstance(x, ast.Name) and x.id in small]
            if caps:
                ctx.add_late("script.dataloader-workers", "info", s,
                             f"the worker count is capped by `{caps[0].id}`, which defaults to "
                             "a few processes: loading stays behind the device on a machine "
                             "with more cores",
                             work="the data generator loads and preprocesses in Python",
                             dev="GPU")
