"""Costs reached through the functions a loop calls (issue 24, classes 13, 15-17): a compiled
function created anew by a helper the loop calls, host-made tensors and module state copied
to the device on every step, un-jitted JAX functions called per batch, a ``torch.compile``
wrapper timed as if it compiled, batches imported onto the host through DLPack, and CUDA's
autocast on a script that only ever runs on MPS or the CPU."""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import (
    COMPREHENSIONS,
    LOOPS,
    blocks,
    keras_rel,
    last_name,
    loop_body,
    skip_in_step,
    target_names,
    walk,
)
from devicebench.script_check.context import Context, FuncDef, rule
from devicebench.script_check.dataflow import callees
from devicebench.script_check.hostmade import host_made
from devicebench.script_check.timing_rules import CLOCKS

_STATE = {"running_mean", "running_var", "weight", "bias", "pos_embed", "freqs", "mask"}
_KIND = {"jax": "jax.jit", "tf": "tf.function", "torch": "torch.compile"}


def _loops(ctx: Context) -> list[ast.AST]:
    """Loops outside compiled code, and comprehensions whose element calls a function of
    this file (``[get_timings(d) for d in dims]`` runs it once per item)."""
    return [n for n in ast.walk(ctx.tree) if (isinstance(n, LOOPS) or isinstance(
        n, COMPREHENSIONS) and any(isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
                                   and c.func.id in ctx.funcs for b in loop_body(n)
                                   for c in ast.walk(b))) and not ctx.is_compiled_scope(n)]


def compiled_in_callees(ctx: Context) -> None:
    """``script.jit-in-loop`` one call away: a function of this file that the loop calls
    defines a ``@tf.function``/``@jax.jit`` function or calls ``jax.jit(...)`` in its own
    body, so every call of it makes (and traces) a new compiled function."""
    done: set[int] = set()
    for loop in _loops(ctx):
        for call, fn in callees(ctx, loop_body(loop)):
            defs = [d for d in ast.walk(fn) if isinstance(d, ast.FunctionDef | ast.AsyncFunctionDef)
                    and d is not fn and ctx.enclosing(d, (ast.FunctionDef,
                                                          ast.AsyncFunctionDef)) is fn]
            for n in defs + list(walk(fn.body)):
                kind = ""
                if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef):
                    kind = next((ctx.compiler(d) for d in n.decorator_list if ctx.compiler(d)), "")
                elif isinstance(n, ast.Call) and n.args and not isinstance(n.func, ast.Call):
                    kind = ctx.compiler(n.func)
                if not kind or id(n) in done or _memoised(ctx, fn):
                    continue
                done.add(id(n))
                ctx.add("script.jit-in-loop", "warning", n,
                        f"`{fn.name}` makes this {_KIND[kind]} function each time it is called, "
                        f"and the loop at {ctx.line(loop.lineno)} calls it "
                        f"(`{ast.unparse(call)[:50]}`, {ctx.line(call.lineno)})",
                        how=f"`{_KIND[kind]}`", ctor=_KIND[kind],
                        reason="a compiled function is cached per function object: each call "
                               f"of `{fn.name}` defines a new one, traced and compiled again")


def _memoised(ctx: Context, fn: ast.AST) -> bool:
    return any("cache" in ast.unparse(d) for d in getattr(fn, "decorator_list", []))


def _host_made(ctx: Context, node: ast.AST, fn: FuncDef | None = None) -> str:
    """``torch.randn(...)`` without ``device=`` -- directly, through a local variable or a
    helper of this file (:func:`host_made`) -- or a module's state
    (``vae.bn.running_mean``): what ``node.to(device)`` copies on every call."""
    if host_made(ctx, node, fn):
        return f"`{ast.unparse(node)[:40]}` is made in host memory and then copied"
    if isinstance(node, ast.Attribute) and node.attr in _STATE and isinstance(
            node.value, ast.Attribute):
        return (f"`{ast.unparse(node)}` is a module's state: copying it on every call means it "
                "lives on another device (an offloaded module), a blocking transfer each step")
    return ""


def host_copies(ctx: Context) -> None:
    """``script.per-step-copy`` for tensors made on the host (or held by an offloaded module)
    and moved with ``.to(device)``/``.cuda()`` inside the loop or a function it runs."""
    if not ctx.uses("torch"):
        return
    for loop in _loops(ctx):
        roots = loop_body(loop)
        # (host-made tensors in the loop's own body are usually its input data: only those
        # made inside the functions it runs -- model and helper code -- are flagged)
        # (a loop inside such a function -- an optimizer's loop over its parameters -- runs
        # on every step too; only its periodic branches are skipped)
        bodies = [(call, fn, list(walk(fn.body, lambda x: isinstance(x, ast.If) and skip_in_step(
            x)))) for call, fn in callees(ctx, roots)]
        for via, fn, nodes in bodies:
            state_seen = False  # an offloaded module's state: one finding per function
            for n in nodes:
                if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                        and n.func.attr in ("to", "cuda") and (n.args or n.func.attr == "cuda")):
                    continue
                why = _host_made(ctx, n.func.value, fn)
                if not why or state_seen and "module's state" in why:
                    continue
                state_seen = state_seen or "module's state" in why
                where = (f"run by the loop at {ctx.line(loop.lineno)} through "
                         f"`{ast.unparse(via)[:40]}` ({ctx.line(via.lineno)})")
                ctx.add("script.per-step-copy", "warning", n, where, data=ast.unparse(n.func.value),
                        why=why + "; a host-to-device copy the device waits for, every step",
                        fix="create it on the device (`torch.randn(..., device=device)`), or "
                            "move the module state to the training device once, before the loop")


def _returns_compiled(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A factory: ``fn`` returns a compiled function (``return jax.jit(inner)``, or a nested
    ``@jax.jit`` def): its body runs once per factory call, not per step."""
    nested = {d.name for d in ast.walk(fn) if isinstance(d, ast.FunctionDef | ast.AsyncFunctionDef)
              and any(ctx.compiler(x) for x in d.decorator_list)}
    return any(isinstance(r, ast.Return) and r.value is not None and (
        ctx.compiler(r.value) if isinstance(r.value, ast.Call) else
        isinstance(r.value, ast.Name) and (r.value.id in nested or r.value.id in ctx.compiled))
        for r in walk(fn.body))


_TRANSFORMS = ("jax.jit", "jax.vmap", "jax.pmap", "jax.grad", "jax.value_and_grad")


def unjitted_jax_callee(ctx: Context) -> None:
    """``script.jax-host-op-in-loop`` for a function made of JAX ops, with no loop of its own,
    called by name per iteration but never jitted while the file jits other functions: its
    ops are dispatched one by one on every call (danielward27/flowjax#35)."""
    if not ctx.uses("jax") or not ctx.compiled:
        return
    inside = {c.func.id for fn in ctx.funcs.values() if fn.name in ctx.compiled
              for c in ast.walk(fn) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}
    for loop in _loops(ctx):
        for n in walk(loop_body(loop)):
            if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Name)):
                continue
            fn = ctx.funcs.get(n.func.id)
            if fn is None or fn.name in ctx.compiled or any(
                    isinstance(x, LOOPS) for x in walk(fn.body)) or any(
                    ctx.compiler(d) for d in fn.decorator_list) or _returns_compiled(ctx, fn):
                continue
            # its own body only: the ops of functions nested in it run when those are called
            # a transformation (`jax.jit(jax.vmap(f))`) builds a function, dispatches nothing
            wrapped = {id(m) for c in walk(fn.body) if isinstance(c, ast.Call)
                       and ctx.resolve(c.func) in _TRANSFORMS for m in ast.walk(c)}
            ops = [c for c in walk(fn.body) if isinstance(c, ast.Call) and id(c) not in wrapped
                   and (ctx.resolve(c.func).startswith("jax.") or isinstance(
                       c.func, ast.Attribute) and c.func.attr in ("log_prob", "apply", "mean",
                                                                  "sum"))]
            if len(ops) < 2:
                continue
            ctx.add("script.jax-host-op-in-loop", "warning", fn,
                    f"`{fn.name}` is not jitted and the loop at {ctx.line(loop.lineno)} calls "
                    f"it ({ctx.line(n.lineno)})" + (f"; only its use inside `{sorted(inside)[0]}`"
                                                   " is compiled" if fn.name in inside else ""),
                    why="outside `jax.jit` each of its ops is dispatched on its own, on every call",
                    fix=f"decorate `{fn.name}` with `@jax.jit` (or `eqx.filter_jit`)",
                    op=fn.name)


@rule("script.compile-time-at-wrap",
      "the `torch.compile(...)` call is timed as the compile time",
      "`torch.compile` only wraps the function: it returns at once, and tracing and compiling "
      "happen at the first call, so this clock reads near zero and the real compile time "
      "lands in the first (warm-up) call",
      "time the first call (with a sync) as the compile time, and time later calls apart")
def compile_time_at_wrap(ctx: Context) -> None:
    for stmts in blocks(ctx.tree):
        clocks = [i for i, s in enumerate(stmts) if not hasattr(s, "body") and any(
            isinstance(n, ast.Call) and ctx.resolve(n.func) in CLOCKS for n in ast.walk(s))]
        for a, b in zip(clocks, clocks[1:], strict=False):
            start = stmts[a]
            names = {t.id for t in getattr(start, "targets", []) if isinstance(t, ast.Name)}
            if not names or not any(isinstance(x, ast.Name) and x.id in names
                                    for x in ast.walk(stmts[b])):
                continue  # not `t0 = clock()` ... `clock() - t0`: a reading, then a new start
            region = stmts[a + 1:b]
            if region and all(isinstance(s, ast.Assign | ast.Expr) and isinstance(
                    s.value, ast.Call) and ctx.compiler(s.value.func) == "torch"
                    for s in region):
                for s in region:
                    ctx.add("script.compile-time-at-wrap", "warning", s,
                            f"only `torch.compile(...)` runs between {ctx.line(stmts[a].lineno)}"
                            f" and {ctx.line(stmts[b].lineno)}")


@rule("script.jax-batch-on-host",
      "batches imported with `from_dlpack` stay on the host",
      "`jnp.from_dlpack` of a host (NumPy / CPU) buffer gives an array committed to the CPU, "
      "and `jax.jit` runs where its committed inputs are: every step then runs on the CPU "
      "although a GPU is there",
      "place the batch on the accelerator: `jax.device_put(array, jax.devices()[0])` (or "
      "`jax.device_put(batch)`), and check `x.devices()`")
def jax_batch_on_host(ctx: Context) -> None:
    if not ctx.uses("jax") or not ctx.compiled:
        return
    for c in ctx.calls():
        if ctx.resolve(c.func) in ("jax.numpy.from_dlpack", "jax.dlpack.from_dlpack") and (
                ctx.enclosing(c, (ast.FunctionDef, ast.Lambda, ast.ListComp, ast.DictComp))
                is not None or ctx.enclosing(c, LOOPS) is not None):
            ctx.add("script.jax-batch-on-host", "warning", c,
                    "the result feeds the step without a `jax.device_put`")


def cuda_amp_without_cuda(ctx: Context) -> None:
    """``script.cuda-only-call``: ``torch.autocast("cuda")`` / ``GradScaler("cuda")`` in a
    script whose device is chosen among MPS and the CPU only: on those devices both are
    silent no-ops, so mixed precision and loss scaling are off (Stability-AI/stable-audio-3#68)."""
    choices = [n for n in ast.walk(ctx.tree) if isinstance(n, ast.IfExp) and "mps" in (
        ast.unparse(n).lower())] or _mps_only_devices(ctx)
    if not choices or any("cuda" in ast.unparse(n).lower() for n in choices):
        return
    for c in ctx.calls():
        q = ctx.resolve(c.func)
        if not (q.startswith(("torch.autocast", "torch.amp.", "torch.cuda.amp.")) and last_name(
                c) in ("autocast", "GradScaler")):
            continue
        dev = c.args[0] if c.args else next((k.value for k in c.keywords
                                             if k.arg == "device_type"), None)
        if _under_cuda_test(ctx, c):
            continue  # `if device.type == "cuda": return torch.autocast("cuda")`
        if q.startswith("torch.cuda.amp.") or isinstance(dev, ast.Constant) and dev.value == "cuda":
            ctx.add("script.cuda-only-call", "warning", c,
                    f"the device is chosen by `{ast.unparse(choices[0])[:50]}`: never CUDA",
                    call=q, backend="CUDA", kind="mps",
                    reason="for CUDA, on a script that runs on MPS or the CPU, it does nothing: "
                           "mixed precision and loss scaling are silently off")


def _under_cuda_test(ctx: Context, node: ast.AST) -> bool:
    child, cur = node, ctx.parents.get(node)
    while cur is not None:
        if isinstance(cur, ast.If) and child in cur.body and "cuda" in ast.unparse(cur.test):
            return True
        child, cur = cur, ctx.parents.get(cur)
    return False


def _mps_only_devices(ctx: Context) -> list[ast.expr]:
    """Values of a device variable that is only ever set to MPS (``device = "mps"``,
    ``torch.device("mps")``), in a script that names no CUDA device string."""
    def mps(v: ast.expr) -> bool:
        if isinstance(v, ast.Call) and ctx.resolve(v.func) == "torch.device" and v.args:
            v = v.args[0]
        return isinstance(v, ast.Constant) and v.value == "mps"
    if any(isinstance(c, ast.Constant) and isinstance(c.value, str) and c.value.startswith(
            "cuda:") for c in ast.walk(ctx.tree)):
        return []
    return [vs[0] for vs in ctx.assigns.values() if vs and all(mps(v) for v in vs)]


_FSDP2_DEFER = ("set_requires_gradient_sync", "set_requires_all_reduce", "set_is_last_backward",
                "no_sync")


def fsdp2_accumulation(ctx: Context) -> None:
    """``script.ddp-no-sync`` for FSDP2: a model sharded with ``fully_shard`` accumulates
    gradients (the optimizer steps only on some micro-steps), but nothing defers FSDP's
    reduction (``set_requires_gradient_sync(False)``); a sync helper that only handles
    ``DistributedDataParallel`` does nothing to it (NVIDIA/cosmos-framework#161)."""
    if not any(last_name(c) == "fully_shard" for c in ctx.calls()):
        return
    defers = {c.func.attr for c in ctx.calls() if isinstance(c.func, ast.Attribute)
              and c.func.attr in _FSDP2_DEFER}
    helpers = {name for name, fn in ctx.funcs.items() if any(
        isinstance(c, ast.Call) and last_name(c) == "isinstance" and len(c.args) == 2
        and "fsdp" not in ast.unparse(c.args[1]).lower() for c in ast.walk(fn))}
    for loop in _loops(ctx):
        backward = next((n for n in walk(loop_body(loop)) if isinstance(n, ast.Call)
                         and last_name(n) == "backward"), None)
        steps = [n for n in walk(loop_body(loop)) if isinstance(n, ast.Call)
                 and last_name(n) == "step" and isinstance(n.func, ast.Attribute) and not n.args]
        if backward is None or not steps or not all(
                ctx.enclosing(st, (ast.If,)) is not None for st in steps):
            continue  # no accumulation: every micro-step is an optimizer step
        with_ = ctx.enclosing(backward, (ast.With,))
        helper = next((i.context_expr for i in getattr(with_, "items", []) if isinstance(
            i.context_expr, ast.Call) and last_name(i.context_expr) in helpers), None)
        if defers - {"no_sync"} and helper is None:
            continue
        where = with_ if helper is not None else backward
        ctx.add("script.ddp-no-sync", "warning", where,
                f"the model is sharded with `fully_shard` (FSDP2) and the loop at "
                f"{ctx.line(loop.lineno)} steps the optimizer only on some micro-steps"
                + (f"; `{last_name(helper)}` only handles the types its `isinstance` test names"
                   if helper is not None else ""),
                reason="FSDP2 reduce-scatters (and all-reduces across replicas) the gradients "
                       "in every backward unless told not to: each accumulation micro-step "
                       "pays the full gradient reduction",
                fix="on the micro-steps before the boundary call "
                    "`model.set_requires_gradient_sync(False)` (and "
                    "`set_requires_all_reduce(False)` with HSDP); set it back to True on the "
                    "last one")


@rule("script.model-built-in-loop",
      "a Keras model built anew on every iteration, then used with `{method}`",
      "each new model makes new `tf.function`s for `fit`/`predict`/`evaluate`, so every "
      "iteration traces them again (TensorFlow's \"triggered tf.function retracing\" "
      "warning, cause (1): creating functions repeatedly in a loop)",
      "build the model once before the loop and reset its weights each time "
      "(`model.set_weights(initial_weights)`), or call it directly (`model(x, "
      "training=False)`) for a small input")
def model_built_in_loop(ctx: Context) -> None:
    if not (ctx.uses("tensorflow") or ctx.uses("keras")):
        return
    for loop in _loops(ctx):
        built = {name for s in walk(loop_body(loop)) if isinstance(s, ast.Assign)
                 and isinstance(s.value, ast.Call) and (keras_rel(ctx.resolve(
                     s.value.func)) or "").startswith(("Sequential", "Model", "models."))
                 for t in s.targets for name in target_names(t)}
        uses = [c for c in walk(loop_body(loop)) if isinstance(c, ast.Call) and isinstance(
            c.func, ast.Attribute) and c.func.attr in ("predict", "evaluate")
                and isinstance(c.func.value, ast.Name) and c.func.value.id in built]
        for c in uses[:1]:
            ctx.add("script.model-built-in-loop", "warning", c,
                    f"`{c.func.value.id}` is built inside the loop at "  # type: ignore[attr-defined]
                    f"{ctx.line(loop.lineno)}", method=f".{c.func.attr}()")  # type: ignore[attr-defined]
