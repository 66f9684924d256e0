"""Timing and benchmarking forms (issue 24, rounds 20, 24 and 25; run by :func:`.forms.run_forms`):
clocks read around device work that was never waited for, warm-ups left unblocked, timers
that time a first (compiling) call. They report under ``script.unsynced-timing`` and
``script.cold-call-timed``; the sources of each form are in the corpus READMEs of the round
named in :mod:`.forms` (corpus_round19, corpus_round23)."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator

from devicebench.script_check.ast_tools import LOOPS, blocks, const, keyword, last_name, walk
from devicebench.script_check.context import Context
from devicebench.script_check.dataflow import waits
from devicebench.script_check.timing_rules import CLOCKS, _clock_pairs

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_TIMING = "script.unsynced-timing"
_MODULE_METHODS = ("eval", "train", "parameters", "named_parameters", "to", "cuda",
                   "state_dict", "half")
_JAX_SYNC = "`jax.block_until_ready(result)`"
_TORCH_SYNC = "`torch.cuda.synchronize()` before each clock read, or CUDA events"
_GRAPH = "batch the ops, `torch.compile`"
_GPU_ARRAYS = ("cupy", "cunumeric", "cupynumeric")


def _module_names(ctx: Context) -> set[str]:
    return {n.func.value.id for n in ctx.calls() if isinstance(n.func, ast.Attribute)
            and n.func.attr in _MODULE_METHODS and isinstance(n.func.value, ast.Name)}


def _timed_calls(ctx: Context, pick: Callable[[ast.AST, set[str]], set[str]],
                 also: Callable[[ast.Call, ast.AST], bool] = lambda call, fn: True,
                 ) -> Iterator[tuple[ast.AST, ast.Call, ast.stmt]]:
    """(function, call, the statement reading the clock again): a call of a name of the
    enclosing function's parameters (those ``pick(fn, params)`` keeps, for which ``also``
    holds) between two clock reads of one block, with no wait and no loop between them."""
    for stmts in blocks(ctx.tree):
        fn = ctx.enclosing(stmts[0], _FUNCS)
        if fn is None:
            continue
        params = pick(fn, {a.arg for a in fn.args.args})  # type: ignore[attr-defined]
        for a, b in _clock_pairs(ctx, stmts):
            region = stmts[a + 1:b]
            if not region or waits(ctx, region + [stmts[b]]) or any(
                    isinstance(s, LOOPS) for s in region):
                continue
            call = next((n for n in walk(region) if isinstance(n, ast.Call)
                         and isinstance(n.func, ast.Name) and n.func.id in params
                         and also(n, fn)), None)
            if call is not None:
                yield fn, call, stmts[b]


def _timed_received_module(ctx: Context) -> None:
    modules = _module_names(ctx)
    for fn, call, read in _timed_calls(ctx, lambda fn, params: params & modules):
        ctx.add_late(_TIMING, "info", call,
                     f"`{call.func.id}` is a module handed in ({ctx.line(fn.lineno)}); "  # type: ignore[attr-defined]
                     "its call returns once the forward is queued, and nothing "
                     f"waits before {ctx.line(read.lineno)} reads the clock",
                     sync=_TORCH_SYNC, graph="batch the ops, `torch.compile`")


def _blocks_on(ctx: Context, loop: ast.AST, name: str) -> bool:
    return any(isinstance(c, ast.Call) and last_name(c) == "block_until_ready" and any(
        isinstance(i, ast.Call) and isinstance(i.func, ast.Name) and i.func.id == name
        for i in ast.walk(c)) for c in walk(loop.body))  # type: ignore[attr-defined]


def _unblocked_warmup(ctx: Context) -> None:
    for stmts in blocks(ctx.tree):
        for s, nxt in zip(stmts, stmts[1:], strict=False):
            if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)
                    and isinstance(s.value.func, ast.Name)
                    and ctx.compiled.get(s.value.func.id) == "jax"):
                continue
            name = s.value.func.id
            if isinstance(nxt, LOOPS) and _blocks_on(ctx, nxt, name):
                ctx.add_late(_TIMING, "info", s,
                             f"the warm-up call of `{name}` is not waited for: its queued run "
                             f"is still going when the loop at {ctx.line(nxt.lineno)} starts "
                             "timing, and is billed to it", sync=_JAX_SYNC,
                             graph="`jax.jit` + `jax.lax.fori_loop`")


def _call_timers(ctx: Context) -> set[str]:
    """Classes whose ``__call__`` reads the clock around a ``yield`` (a context timer)."""
    out = set()
    for cls in ctx.classes.values():
        for f in cls.body:
            if isinstance(f, ast.FunctionDef) and f.name == "__call__":
                for a, b in _clock_pairs(ctx, f.body):
                    if any(isinstance(s, ast.Expr) and isinstance(s.value, ast.Yield)
                           for s in f.body[a + 1:b]):
                        out.add(cls.name)
    return out


def _call_timer_instances(ctx: Context) -> None:
    timers = _call_timers(ctx)
    if not timers or ctx.uses("torch") or ctx.uses("tensorflow"):
        return
    attrs = {t.attr if isinstance(t, ast.Attribute) else getattr(t, "id", "")
             for n in ast.walk(ctx.tree) if isinstance(n, ast.Assign)
             and isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Name)
             and n.value.func.id in timers for t in n.targets}
    for w in ast.walk(ctx.tree):
        if not isinstance(w, ast.With) or not any(
                isinstance(i.context_expr, ast.Call) and last_name(i.context_expr.func) in attrs
                for i in w.items):
            continue
        if waits(ctx, list(w.body)):
            continue
        call = next((n for s in w.body if isinstance(s, ast.Assign)
                     for n in [s.value] if isinstance(n, ast.Call)
                     and ctx.resolve(n.func) not in CLOCKS), None)
        if call is not None:
            ctx.add_late(_TIMING, "info", call,
                         f"the timer's `__call__` reads the clock around its `yield`; this "
                         "JAX call returns once its work is dispatched, so the `with` at "
                         f"{ctx.line(w.lineno)} times the dispatch", sync=_JAX_SYNC,
                         graph="`jax.jit` + `jax.lax.fori_loop`")


def _moved(ctx: Context, fn: ast.AST) -> set[str]:
    return {t.id for s in walk(fn.body) if isinstance(s, ast.Assign)  # type: ignore[attr-defined]
            for n in [s.value] if isinstance(n, ast.Call) and last_name(n) in ("to", "cuda")
            for t in s.targets if isinstance(t, ast.Name)}


def _timed_param_on_device_input(ctx: Context) -> None:
    def on_moved(call: ast.Call, fn: ast.AST) -> bool:
        moved = _moved(ctx, fn)
        return any(isinstance(x, ast.Name) and x.id in moved for x in call.args)

    for _, call, read in _timed_calls(ctx, lambda fn, params: params, on_moved):
        ctx.add_late(_TIMING, "info", call,
                     f"`{call.func.id}` (a parameter) is called on a tensor moved to "  # type: ignore[attr-defined]
                     "the device above; it returns once the work is queued, and "
                     f"nothing waits before {ctx.line(read.lineno)} reads the clock",
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


def _cpu_timer_class(ctx: Context) -> None:
    if "cuda" not in "\n".join(ctx.lines):
        return
    on_device = {t.id for a in ast.walk(ctx.tree) if isinstance(a, ast.Assign)
                 and isinstance(a.value, ast.Call) and last_name(a.value) in ("to", "cuda")
                 for t in a.targets if isinstance(t, ast.Name)}  # model = model.to("cuda")
    for cls in ast.walk(ctx.tree):
        if not isinstance(cls, ast.ClassDef) or any(
                last_name(c) == "synchronize" for c in ctx.calls([cls])):
            continue
        exits = [m for m in cls.body if isinstance(m, ast.FunctionDef) and m.name == "__exit__"]
        withs = [w for w in ast.walk(ctx.tree) if isinstance(w, ast.With) and any(
            isinstance(i.context_expr, ast.Call) and last_name(i.context_expr) == cls.name
            for i in w.items)]
        # every block it times is device work in a loop (else the older rule's report at the
        # timed block says which one)
        used = bool(withs) and all(ctx.enclosing(w, LOOPS) is not None and any(
            ctx.is_tensor_op(c) or ctx.is_step(c) or last_name(c) == "backward"
            or (isinstance(c.func, ast.Name) and c.func.id in on_device)
            for c in ctx.calls(w.body)) for w in withs)
        for b in walk([s for m in exits for s in m.body]) if used else []:
            if isinstance(b, ast.BinOp) and isinstance(b.op, ast.Sub) and isinstance(
                    b.left, ast.Call) and ctx.resolve(b.left.func) in ("time.perf_counter",
                                                                       "time.time"):
                ctx.add_late("script.unsynced-timing", "info", b, "a CPU timer class around "
                             "CUDA work times the launches: no synchronize before the clock "
                             "is read", sync="`torch.cuda.synchronize()` before each clock read",
                             graph="batch the ops, `torch.compile`")
