"""Rules about when the host waits for the device: timing loops, per-step syncs, tiny ops."""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import (
    LOOPS,
    blocks,
    dotted,
    last_name,
    outer_loops,
    walk,
)
from devicebench.script_check.context import Context, rule
from devicebench.script_check.dataflow import (
    is_device_work,
    search_device_work,
    torch_cpu_only,
    waits,
)
from devicebench.script_check.throughput_rules import averaged_over_compile

CLOCKS = {"time.time", "time.perf_counter", "time.monotonic", "time.time_ns",
          "time.perf_counter_ns", "time.monotonic_ns", "timeit.default_timer",
          "time.process_time", "time.process_time_ns", "time.thread_time",
          "datetime.datetime.now", "datetime.datetime.utcnow", "datetime.datetime.today"}
OPS = "run `devicebench ops` for a sweep with warm-up, sync and the CPU/GPU crossover size"


@rule("script.unsynced-timing",
      "timing loop without a device sync",
      "tensor ops are dispatched asynchronously: without a sync the clock measures Python "
      "and dispatch overhead (~10-25 us per eager op), not the device's work; with tiny "
      "tensors that overhead is all there is, so CPU vs GPU reads ~1x",
      "sync before reading the clock ({sync}), warm up first, and move the loop into the "
      "graph ({graph}) or time one large op; or " + OPS)
def unsynced_timing(ctx: Context) -> None:
    for node in ctx.calls():
        q = ctx.resolve(node.func)
        if q in ("timeit.timeit", "timeit.repeat") and node.args:
            body = node.args[0].body if isinstance(node.args[0], ast.Lambda) else node.args[0]
            if isinstance(body, ast.Name) and body.id in ctx.funcs:  # timeit.repeat(fn)
                body = ast.Module(body=ctx.funcs[body.id].body, type_ignores=[])
            op = search_device_work(ctx, [body])
            if op is not None and not waits(ctx, [body]):
                _timing(ctx, node, op, f"`{q}` times `{ctx.code(op.lineno)}`")
        elif (last_name(node) == "benchmark" or dotted(node.func) == "benchmark.pedantic") and (
                node.args and isinstance(node.args[0], ast.Name)
                and node.args[0].id in ctx.models):  # pytest-benchmark times its argument
            _timing(ctx, node, node, f"pytest-benchmark times `{node.args[0].id}` call by call, "
                    "and the call returns when the work is queued")
    for block in blocks(ctx.tree):
        _timed_block(ctx, block)
    _context_timers(ctx)


def _clock_pairs(ctx: Context, stmts: list[ast.stmt], events: bool = False,
                 ) -> list[tuple[int, int]]:
    """Pairs of clock readings in one block; ``events``: CUDA events' ``record()`` count too."""
    timers = _event_names(ctx) if events else set()
    helpers = _clock_helpers(ctx)

    def reads(s: ast.stmt) -> bool:
        if isinstance(s, ast.If):  # `if step >= warmup: elapsed += time.perf_counter() - t0`
            return any(not hasattr(b, "body") and reads(b) for b in s.body)
        return not hasattr(s, "body") and any(
            isinstance(n, ast.Call) and (ctx.resolve(n.func) in CLOCKS or (
                last_name(n) == "record" and isinstance(n.func, ast.Attribute)
                and isinstance(n.func.value, ast.Name) and n.func.value.id in timers)
                or isinstance(n.func, ast.Name) and n.func.id in helpers) for n in walk([s]))
    clocks = [i for i, s in enumerate(stmts) if reads(s)]
    return list(zip(clocks, clocks[1:], strict=False))


def _clock_helpers(ctx: Context) -> set[str]:
    """Functions of this file that return a clock reading (``def _get_time(): ...;
    return time.time()``): calling one reads the clock."""
    return {name for name, fn in ctx.funcs.items() if any(
        isinstance(r, ast.Return) and r.value is not None and any(
            isinstance(c, ast.Call) and ctx.resolve(c.func) in CLOCKS for c in ast.walk(r.value))
        for r in walk(fn.body))}


def _syncing_helper(ctx: Context, stmt: ast.stmt) -> bool:
    helpers = _clock_helpers(ctx)
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in helpers
               and ctx.search(ctx.funcs[n.func.id].body, ctx.is_sync) is not None
               for n in ast.walk(stmt))


def _event_names(ctx: Context) -> set[str]:
    return {n for n, vs in ctx.assigns.items() for v in vs if isinstance(v, ast.Call)
            and ctx.resolve(v.func) in ("torch.cuda.Event", "torch.mps.Event")}


def _timed_block(ctx: Context, stmts: list[ast.stmt]) -> None:
    for a, b in _clock_pairs(ctx, stmts):
        region = stmts[a + 1:b]
        if not region or waits(ctx, region + [stmts[b]]):
            continue  # (the closing reading counts: a clock helper may sync first)
        between = f"between {ctx.line(stmts[a].lineno)} and {ctx.line(stmts[b].lineno)}"
        loops = [lp for s in region for lp in outer_loops(s)]
        for loop in loops:
            calls = sorted((n for n in walk(loop.body) if isinstance(n, ast.Call)),
                           key=lambda n: (n.lineno, n.col_offset))
            for call in calls:
                op = search_device_work(ctx, [call])
                if op is not None:
                    via = "" if op is call else f"`{ast.unparse(call)}`, which runs "
                    _timing(ctx, call, op,
                            f"the loop timed {between} calls {via}"
                            f"`{ctx.code(op.lineno)}` ({ctx.line(op.lineno)}) on every "
                            f"iteration of the loop at {ctx.line(loop.lineno)} and never waits "
                            "for the device")
                    break
        if loops:
            continue
        # no loop: one model call / compiled call / device method timed on its own
        op = next((n for n in walk(region) if isinstance(n, ast.Call) and (
            isinstance(n.func, ast.Name) and n.func.id in ctx.models
            or not _creates_data(ctx, n) and is_device_work(ctx, n))), None)
        if op is None and _syncing_helper(ctx, stmts[b]):
            # the clock helper syncs (only sometimes): it declares the region device work
            op = next((n for n in walk(region) if isinstance(n, ast.Call)), None)
        if op is not None:
            _timing(ctx, op, op, f"timed {between}; the call returns once the work is "
                    "queued, not when the device has finished it")


def _creates_data(ctx: Context, n: ast.Call) -> bool:
    """A framework call that makes the inputs (``torch.randn``, ``tf.constant``,
    ``jax.random.normal``) or sets the framework up, rather than the work being timed;
    a framework op on existing values (``torch.einsum(q, k)``) is the work."""
    q = ctx.resolve(n.func)
    if not q.startswith(("torch.", "tensorflow.", "jax.")):
        return False
    if ctx.compiler(n) or last_name(n) in ("grad", "value_and_grad", "vmap", "pmap", "jit"):
        return True  # building a transformed function runs nothing
    return q.startswith(("jax.random.", "tensorflow.random.", "torch.random.")) or last_name(
        n) in _DATA_MAKERS or ".config." in q or q.startswith(("torch.backends.", "torch.cuda."))


_DATA_MAKERS = {"randn", "rand", "zeros", "ones", "empty", "full", "tensor", "arange", "load",
                "randint", "linspace", "from_numpy", "constant", "Variable", "convert_to_tensor",
                "normal", "uniform", "PRNGKey", "key", "split", "device", "manual_seed",
                "set_seed", "device_put", "asarray", "array", "Event", "zeros_like",
                "ones_like", "empty_like", "randn_like", "rand_like"}


def _context_timers(ctx: Context) -> None:
    """Clock pairs that bracket code written elsewhere (issue 24, class 15): a
    ``@contextmanager`` timer's ``yield`` (the ``with`` body runs there), and callback
    hooks that read the clock in ``on_*_start``/``_begin`` and again in ``on_*_end``."""
    for fn in ctx.funcs.values():
        stmts = fn.body
        for a, b in _clock_pairs(ctx, stmts):
            y = next((s for s in stmts[a + 1:b] if isinstance(s, ast.Expr)
                      and isinstance(s.value, ast.Yield)), None)
            if y is None:
                continue
            users = [w for w in ast.walk(ctx.tree) if isinstance(w, ast.With | ast.AsyncWith)
                     and any(isinstance(i.context_expr, ast.Call) and last_name(
                         i.context_expr) == fn.name for i in w.items)]
            for w in users:
                op = search_device_work(ctx, list(w.body))
                if op is not None and not waits(ctx, list(w.body) + stmts[a + 1:b]):
                    _timing(ctx, y, op, f"`{fn.name}` reads the clock around its `yield`; the "
                            f"`with` block at {ctx.line(w.lineno)} runs there, and "
                            f"`{ctx.code(op.lineno)}` ({ctx.line(op.lineno)}) only queues work")
                    break
    for cls in ctx.classes.values():
        _callback_timer(ctx, cls)
    _class_timers(ctx)


def _timer_methods(ctx: Context, cls: ast.ClassDef) -> list[tuple[str, str, list[ast.stmt]]]:
    """(start, stop, their bodies) of a timer class: ``start`` stores a clock reading in
    ``self.<attr>`` and ``stop`` reads the clock again and uses ``self.<attr>``
    (``Timer.start()``/``stop()``, or ``__enter__``/``__exit__`` of a ``with`` timer)."""
    methods = {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}
    stamps = {name: {t.attr for s in walk(f.body) if isinstance(s, ast.Assign)
                     and isinstance(s.value, ast.Call) and ctx.resolve(s.value.func) in CLOCKS
                     for t in s.targets if isinstance(t, ast.Attribute)}
              for name, f in methods.items()}
    out = []
    for start, attrs in stamps.items():
        for stop, f in methods.items():
            if stop == start or not attrs:
                continue
            nodes = list(walk(f.body))
            reads = any(isinstance(n, ast.Call) and ctx.resolve(n.func) in CLOCKS for n in nodes)
            if reads and any(isinstance(n, ast.Attribute) and n.attr in attrs
                             and isinstance(n.ctx, ast.Load) for n in nodes):
                out.append((start, stop, methods[start].body + f.body))
    return out


def _class_timers(ctx: Context) -> None:
    """Timers built as classes (issue 24): ``t.start()`` ... ``t.stop()`` in one block, or
    ``with Timer(...):`` of a class whose ``__enter__``/``__exit__`` read the clock -- the
    code between is the timed region, reported at its first device call."""
    pairs = [(cls.name, *m) for cls in ctx.classes.values() for m in _timer_methods(ctx, cls)]
    if not pairs or not (ctx.uses("torch") or ctx.uses("tensorflow") or ctx.uses("jax")):
        return
    ctx_classes = {name: body for name, a, b, body in pairs if (a, b) == ("__enter__", "__exit__")}
    for w in ast.walk(ctx.tree):
        if isinstance(w, ast.With | ast.AsyncWith) and any(
                isinstance(i.context_expr, ast.Call) and last_name(i.context_expr) in ctx_classes
                for i in w.items):
            body = ctx_classes[next(last_name(i.context_expr) for i in w.items if isinstance(
                i.context_expr, ast.Call) and last_name(i.context_expr) in ctx_classes)]
            _timed_region(ctx, list(w.body), body, f"the `with` timer at {ctx.line(w.lineno)}")
    methods = {(a, b): body for _, a, b, body in pairs if a != "__enter__"}
    for stmts in blocks(ctx.tree):
        calls = [(i, dotted(s.value.func.value), s.value.func.attr) for i, s in enumerate(stmts)
                 if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)
                 and isinstance(s.value.func, ast.Attribute) and dotted(s.value.func.value)]
        for i, recv, start in calls:
            j = next((j for j, r, stop in calls if j > i and r == recv
                      and (start, stop) in methods), None)
            if j is not None:
                stop = stmts[j].value.func.attr  # type: ignore[attr-defined]
                _timed_region(ctx, stmts[i + 1:j], methods[(start, stop)],
                              f"`{recv}.{start}()` ({ctx.line(stmts[i].lineno)}) and "
                              f"`{recv}.{stop}()` ({ctx.line(stmts[j].lineno)})")


def _timed_region(ctx: Context, region: list[ast.stmt], timer: list[ast.stmt], by: str) -> None:
    if not region or waits(ctx, region + timer):
        return
    op = search_device_work(ctx, region)
    if op is not None:
        _timing(ctx, op, op, f"timed by {by}; the call returns once the work is queued, "
                "not when the device has finished it")


_START = ("_start", "_begin")


def _callback_timer(ctx: Context, cls: ast.ClassDef) -> None:
    methods = {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}
    for name, end in methods.items():
        if not (name.startswith("on_") and name.endswith("_end")):
            continue
        start = next((methods[name[:-4] + s] for s in _START if name[:-4] + s in methods), None)
        if start is None:
            continue
        stamps = {t.attr for s in walk(start.body) if isinstance(s, ast.Assign)
                  and isinstance(s.value, ast.Call) and ctx.resolve(s.value.func) in CLOCKS
                  for t in s.targets if isinstance(t, ast.Attribute)}
        read = next((n for n in walk(end.body) if isinstance(n, ast.BinOp)
                     and isinstance(n.left, ast.Call) and ctx.resolve(n.left.func) in CLOCKS
                     and isinstance(n.right, ast.Attribute) and n.right.attr in stamps), None)
        if read is None or waits(ctx, start.body + end.body) or not (
                ctx.uses("torch") or ctx.uses("tensorflow") or ctx.uses("jax")):
            continue
        if ctx.uses("torch") and torch_cpu_only(ctx):
            continue
        # Around a whole epoch (or fit) the steps still queued when the clock is read are a
        # few of hundreds: the figure is off by that, worth knowing, not a wrong measurement.
        long = "epoch" in name or name in ("on_train_end", "on_fit_end")
        ctx.add("script.unsynced-timing", "info" if long else "warning", read,
                f"`{cls.name}` reads the clock in `{start.name}` and again here; "
                + ("the steps the framework runs between the two hooks are" if long else
                   "the batch the framework runs between the two hooks is")
                + " queued asynchronously and neither hook waits for the device"
                + ("; over a whole epoch only the last few queued steps are missed"
                   if long else ""),
                sync=_SYNC["torch" if ctx.uses("torch") else "tf"],
                graph="batch the ops, `torch.compile`")


def _kind(ctx: Context, op: ast.AST) -> str:
    q = ctx.resolve(op.func) if isinstance(op, ast.Call) else ""
    name = op.func.id if isinstance(op, ast.Call) and isinstance(op.func, ast.Name) else ""
    if q.startswith("jax.") or ctx.compiled.get(name) == "jax":
        return "jax"
    if q.startswith("torch.") or ctx.compiled.get(name) == "torch" or (
            name in ctx.models and ctx.uses("torch") and not ctx.uses("tensorflow")):
        return "torch"
    if ctx.uses("jax") and not ctx.uses("tensorflow") and not ctx.uses("torch"):
        return "jax"
    if ctx.uses("torch") and not ctx.uses("tensorflow"):
        return "torch"
    return "tf"


_SYNC = {"jax": "`jax.block_until_ready(result)`",
         "torch": "`torch.cuda.synchronize()` / `torch.mps.synchronize()`, or CUDA events, or "
                  "`torch.utils.benchmark.Timer`, which syncs and warms up for you",
         "tf": "`result.numpy()` on the last result"}


def _timing(ctx: Context, node: ast.AST, op: ast.AST, seen: str) -> None:
    kind = _kind(ctx, op)
    if kind == "torch" and torch_cpu_only(ctx):
        return  # ops on the CPU run synchronously: the clock measures them
    graph = {"jax": "`jax.jit` + `jax.lax.fori_loop`", "torch": "batch the ops, `torch.compile`",
             "tf": "`@tf.function`"}[kind]
    ctx.add("script.unsynced-timing", "warning", node, seen, sync=_SYNC[kind], graph=graph)


@rule("script.compile-in-timing",
      "first call of a compiled function inside the timed region",
      "the first call of a `{how}` function traces and compiles it (often 0.1-10 s), so the "
      "measured time is mostly compilation, not the steady-state speed",
      "call `{name}(...)` once before starting the clock (and wait for it: {sync}), then "
      "time many calls; or run `devicebench ops`, which reports compile time apart")
def compile_in_timing(ctx: Context) -> None:
    first_call: dict[str, int] = {}
    for call in sorted(ctx.calls(), key=lambda c: (c.lineno, c.col_offset)):
        if isinstance(call.func, ast.Name) and call.func.id in ctx.compiled:
            first_call.setdefault(call.func.id, call.lineno)
    for stmts in blocks(ctx.tree):
        if any(isinstance(a, LOOPS) for a in _ancestors(ctx, stmts[0])):
            continue  # per-iteration timing shows the first (compiling) iteration apart
        for a, b in _clock_pairs(ctx, stmts, events=True):
            for n in walk(stmts[a + 1:b]):
                if (isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                        and first_call.get(n.func.id) == n.lineno
                        and not _made_per_call(ctx, n.func.id)):
                    kind = ctx.compiled[n.func.id]
                    how = {"jax": "jax.jit", "tf": "tf.function", "torch": "torch.compile"}[kind]
                    sync = {"jax": "`.block_until_ready()`", "tf": "`.numpy()`",
                            "torch": "`torch.cuda.synchronize()`"}[kind]
                    ctx.add("script.compile-in-timing", "warning", n,
                            f"`{n.func.id}` is first called here, between the clock readings "
                            f"at {ctx.line(stmts[a].lineno)} and {ctx.line(stmts[b].lineno)}",
                            how=how, name=n.func.id, sync=sync)
    averaged_over_compile(ctx, CLOCKS, {"jax": "`.block_until_ready()`", "tf": "`.numpy()`",
                                        "torch": "`torch.cuda.synchronize()`"})


def _made_per_call(ctx: Context, name: str) -> bool:
    """A compiled function defined inside another function that a loop or comprehension
    calls: every call makes a new one, so script.jit-in-loop reports the tracing at its def
    (the timing of its first call is that same cost, said once)."""
    fn = ctx.funcs.get(name)
    outer = ctx.enclosing(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) if fn else None
    if outer is None:
        return False
    return any(isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id == (
        outer.name) and ctx.enclosing(c, (*LOOPS, ast.ListComp, ast.GeneratorExp, ast.SetComp,
                                          ast.DictComp)) is not None for c in ctx.calls())


def _ancestors(ctx: Context, node: ast.AST) -> list[ast.AST]:
    out, cur = [], ctx.parents.get(node)
    while cur is not None and not isinstance(cur, ast.FunctionDef | ast.AsyncFunctionDef):
        out.append(cur)
        cur = ctx.parents.get(cur)
    return out


@rule("script.gpu-tiny-op",
      "tiny tensor work placed on a GPU",
      "each GPU op costs a launch and, for host constants, a copy (tens of us), far more "
      "than the arithmetic on a few elements: CPU and GPU tie (~1x) or the CPU wins",
      "keep tiny work on the CPU; to compare devices use tensors of 1000x1000 or more, "
      "created on the device; or " + OPS)
def gpu_tiny_op(ctx: Context) -> None:
    for node, dev in ctx.gpu_device_scopes():
        op = ctx.search(node.body, lambda n: ctx.is_small_tensor(n) or (
            ctx.is_tensor_op(n) and any(isinstance(a, ast.Name) and a.id in ctx.small
                                        for a in walk(n.args))))
        if op is not None:
            ctx.add("script.gpu-tiny-op", "warning", node,
                    f"`{ctx.code(op.lineno)}` ({ctx.line(op.lineno)}) works on a tiny constant "
                    f"under tf.device({dev!r})")


@rule("script.cold-call-timed",
      "one cold call of `{name}` timed",
      "the first call of a model pays one-time costs (lazy initialisation, allocator growth, "
      "kernel selection and autotuning, CUDA context){grad}; one sample of it says little "
      "about the steady-state speed",
      "call it a few times before the clock starts, then time many calls (report the median); "
      "for inference wrap them in `{no_grad}` after `{name}.eval()`; or use "
      "`torch.utils.benchmark.Timer`, which warms up and syncs")
def cold_call_timed(ctx: Context) -> None:
    if not (ctx.uses("torch") or ctx.uses("mlx")):
        return
    # the models, and (MLX: kernels are compiled for Metal on first use) the functions of
    # this file that run one
    runners = set(ctx.models) | ({n for n, fn in ctx.funcs.items() if n not in ctx.compiled
                                  and _runs_model(ctx, fn)} if ctx.uses("mlx") else set())
    first: dict[str, int] = {}
    for call in sorted(ctx.calls(), key=lambda c: (c.lineno, c.col_offset)):
        if isinstance(call.func, ast.Name) and call.func.id in runners:
            first.setdefault(call.func.id, call.lineno)
    evals = {c.func.value.id for c in ctx.calls() if last_name(c) == "eval" and isinstance(
        c.func, ast.Attribute) and isinstance(c.func.value, ast.Name)}
    for stmts in blocks(ctx.tree):
        if any(isinstance(a, LOOPS) for a in _ancestors(ctx, stmts[0])):
            continue  # timed per iteration: the first, cold, iteration shows apart
        for a, b in _clock_pairs(ctx, stmts, events=True):
            region = stmts[a + 1:b]
            if any(outer_loops(s) for s in region):
                continue
            for n in walk(region):
                if (isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                        and n.func.id not in ctx.compiled and first.get(n.func.id) == n.lineno
                        and (n.func.id in ctx.models or not ctx.uses("torch"))):
                    torch = ctx.uses("torch")
                    grad = "" if n.func.id in evals or _no_grad(ctx, n) or not torch else (
                        "; without `torch.no_grad()` it also records the graph for a backward "
                        "pass that never comes")
                    ctx.add("script.cold-call-timed", "warning", n,
                            f"the only call between the clock readings at "
                            f"{ctx.line(stmts[a].lineno)} and {ctx.line(stmts[b].lineno)}, "
                            "and the model's first", name=n.func.id, grad=grad,
                            no_grad="with torch.inference_mode():", fix="" if torch else (
                                f"call `{n.func.id}(...)` once, untimed, before the clock "
                                "starts (MLX compiles its Metal kernels on first use; "
                                "waybarrios/vllm-mlx#408), then time several calls and "
                                "report the median"))


def _runs_model(ctx: Context, fn: ast.AST) -> bool:
    """A function whose body calls a method of one of its parameters that does model work
    (``engine.generate(...)``, ``model(...)``): a cold call of it is a cold call of that."""
    params = {a.arg for a in getattr(getattr(fn, "args", None), "args", [])}
    return any(isinstance(n, ast.Call) and (
        isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name)
        and n.func.value.id in params and n.func.attr.startswith(("generate", "forward", "predict"))
        or isinstance(n.func, ast.Name) and n.func.id in params | ctx.models)
        for n in ast.walk(fn))


def _no_grad(ctx: Context, node: ast.AST) -> bool:
    cur = ctx.parents.get(node)
    while cur is not None:
        if isinstance(cur, ast.With) and any(last_name(i.context_expr) in (
                "no_grad", "inference_mode") for i in cur.items if isinstance(
                    i.context_expr, ast.Call)):
            return True
        cur = ctx.parents.get(cur)
    return False
