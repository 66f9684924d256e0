"""Per-step host syncs (issue 24, class 15): ``.item()``/``.numpy()``/``float()``, printing
or branching on a device value, in the training loop or in the functions it runs -- and
implicit ones, a device tensor given where PyTorch wants a Python scalar."""

from __future__ import annotations

import ast
from collections.abc import Callable

from devicebench.script_check.ast_tools import (
    LOOPS,
    dotted,
    last_name,
    root_name,
    skip_in_step,
    target_names,
    walk,
)
from devicebench.script_check.context import Context, rule
from devicebench.script_check.dataflow import callees
from devicebench.script_check.form_rules import gc_collect_per_item
from devicebench.script_check.kinds import evaluation_loop, hook_functions
from devicebench.script_check.shape_sync import data_dependent_syncs
from devicebench.script_check.sync_flow import (
    _HOST,
    _SINK_METHODS,
    _SINKS,
    device_get,
    device_params,
    fetch,
    host_use,
    plain_use,
    scalar_from_tensor,
)


def _device_names(ctx: Context, direct: list[ast.AST]) -> set[str]:
    """Names assigned in the loop from device work: a model or compiled function, a tensor
    op, a loss/criterion, or a method of a value on the device (``out.argmax(1)``)."""
    names: set[str] = set()
    for s in direct:
        if not isinstance(s, ast.Assign) or not isinstance(s.value, ast.Call):
            continue
        call = s.value
        if last_name(call) in _HOST or ctx.resolve(call.func).startswith(("numpy.", "math.")):
            continue
        callee = call.func.id if isinstance(call.func, ast.Name) else ""
        if callee in ctx.funcs and _returns_device(ctx, ctx.funcs[callee]):
            names |= {n.id for t in s.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            continue
        if last_name(call) in ("to", "cuda") and isinstance(call.func, ast.Attribute) or (
                callee in ctx.models or callee in ctx.compiled or ctx.is_tensor_op(call)
                or root_name(call) in names
                or any(k in last_name(call).lower() for k in ("loss", "criterion", "model"))
                or last_name(call).lower() in ("net", "network", "encoder", "decoder")):
            names |= {n.id for t in s.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    for s in direct:  # x, y = x.to(device), y.to(device)
        if isinstance(s, ast.Assign) and isinstance(s.value, ast.Tuple) and len(s.targets) == 1 \
                and isinstance(s.targets[0], ast.Tuple):
            for t, v in zip(s.targets[0].elts, s.value.elts, strict=False):
                if isinstance(t, ast.Name) and isinstance(v, ast.Call) and last_name(v) in (
                        "to", "cuda") and isinstance(v.func, ast.Attribute):
                    names.add(t.id)
    return names


def _returns_device(ctx: Context, fn: ast.AST) -> bool:
    """A function of this file whose return values are computed on the device: tensor ops, a
    model call, a copy to the device, or names it binds from those (one level of locals)."""
    local: set[str] = set()

    def on_device(c: ast.AST) -> bool:  # a tensor op, a copy, a call given device inputs
        return isinstance(c, ast.Call) and last_name(c) not in _HOST and (
            ctx.is_tensor_op(c) or last_name(c) in ("cuda", "to") or any(
                on_device(a) or isinstance(a, ast.Name) and a.id in local for a in c.args))
    for st in walk(getattr(fn, "body", [])):
        if isinstance(st, ast.Assign) and on_device(st.value):
            local |= {t for tg in st.targets for t in target_names(tg)}
    rets = [r.value for r in walk(getattr(fn, "body", [])) if isinstance(r, ast.Return)
            and r.value is not None]
    return bool(rets) and all(
        any(isinstance(n, ast.Name) and n.id in local for n in ast.walk(r))
        and not (isinstance(r, ast.Call) and last_name(r) in _HOST) or on_device(r)
        for r in rets)


@rule("script.sync-in-step-loop",
      "host sync on every step of a loop (training, or an evaluation pass it runs)",
      "`.numpy()`/`.item()`/`.cpu()`/`float()`, printing a device value or branching on it "
      "copies the value to the host and waits for the device to finish, so the next step "
      "cannot be queued while this one runs",
      "{fixtext}")
def sync_in_step_loop(ctx: Context) -> None:
    _sync_in_step_loop(ctx, _SYNC_FIX[_framework(ctx)])
    _syncs_in_hooks(ctx, _SYNC_FIX[_framework(ctx)])
    if ctx.uses("torch"):
        _host_round_trips(ctx, _SYNC_FIX["torch"])
        data_dependent_syncs(ctx)


_SYNC_FIX = {
    "torch": "accumulate on the device (`total += loss.detach()`) and read it every N steps "
             "(`if step % 100 == 0: print(total.item() / 100)`) or once per epoch",
    "tf": "accumulate in a `keras.metrics.Mean` (or a `tf.Variable`) updated inside the step "
          "and read it with `.result().numpy()` every N steps or once per epoch",
    "jax": "keep per-step values as jax arrays (stack or sum them) and fetch them with "
           "`jax.device_get` every N steps or once per epoch",
}


def _framework(ctx: Context) -> str:
    """The framework a fix text should speak: torch, jax or tf (Keras/TensorFlow)."""
    if ctx.uses("torch") and not ctx.uses("tensorflow") and not ctx.uses("keras"):
        return "torch"
    if ctx.uses("jax") and not ctx.uses("tensorflow"):
        return "jax"
    return "torch" if ctx.uses("torch") and not ctx.uses("tensorflow") else "tf"


def _is_sync_call(n: ast.AST) -> bool:
    f = n.func if isinstance(n, ast.Call) else None
    return isinstance(f, ast.Attribute) and f.attr in ("numpy", "item", "tolist") and not (
        n.args)  # type: ignore[union-attr]


def _syncs_in_callees(ctx: Context, loop: ast.AST, direct: list[ast.AST], seen: str,
                      fixtext: str) -> None:
    """Syncs inside functions of this file that the step loop runs (issue 24, class 15):
    called by name, as ``self.method()``, or as the ``forward`` of a model class defined here,
    a few calls deep."""
    buffers = {c.args[0].value for c in ctx.calls() if last_name(c) == "register_buffer"
               and c.args and isinstance(c.args[0], ast.Constant)}
    device = _device_names(ctx, direct)
    for call, fn in callees(ctx, [n for n in direct if isinstance(n, ast.Call)]):
        # a step function converting its results as it returns them syncs on every step;
        # a helper that only converts (``def to_float(x): return x.item()``) is its
        # caller's business
        steps = ctx.search(fn.body, ctx.is_step) is not None
        returned = {id(x) for r in walk(fn.body) if isinstance(r, ast.Return)
                    for x in ast.walk(r) if not _consumed_in_return(ctx, x, r)}
        held = device_params(ctx, call, fn, device)
        for m in walk(fn.body, lambda x: isinstance(x, ast.FunctionDef | ast.AsyncFunctionDef)
                      or skip_in_step(x) and not isinstance(x, LOOPS)):
            implicit = scalar_from_tensor(ctx, fn, m)
            # (a value converted as it is returned is the caller's call)
            if not implicit and isinstance(m, ast.If | ast.While) and any(
                    isinstance(a, ast.Attribute) and isinstance(a.value, ast.Name)
                    and a.value.id == "self" and a.attr in buffers and plain_use(ctx, a)
                    for a in ast.walk(m.test)):
                implicit = ("; the test reads a registered buffer, which lives on the module's "
                            "device: Python control flow on it copies it to the host and waits")
            if not implicit and held:
                implicit = host_use(ctx, m, held)
            if steps and _is_sync_call(m) and id(m) in returned and not implicit:
                # `return loss.item()` from the step: one sync per step, the common idiom --
                # worth knowing (facebookresearch/fairchem#2112 removed it), not an error
                ctx.add("script.sync-in-step-loop", "info", m,
                        f"`{fn.name}` takes an optimisation step and converts this result as it "
                        f"returns it; the loop at {ctx.line(loop.lineno)} calls it on every step",
                        fixtext=fixtext)
            elif not steps and not implicit and fetch(ctx, fn, m) and id(m) not in returned \
                    and (evaluation := evaluation_loop(ctx, fn, m)) is not None:
                # pytorch/examples mnist: `test()` (no_grad, its own loop over the test
                # loader) run once per epoch: a sync per evaluation batch, not per step
                ctx.add("script.sync-in-step-loop", "info", m,
                        f"`{fn.name}` is an evaluation pass (no gradients) that the loop at "
                        f"{ctx.line(loop.lineno)} runs; this runs once per batch of its loop "
                        f"at {ctx.line(evaluation.lineno)}, not per training step",
                        fixtext=fixtext)
            elif fetch(ctx, fn, m) and id(m) not in returned or implicit:
                ctx.add("script.sync-in-step-loop", "warning", m,
                        f"`{fn.name}` is run by the training loop at {ctx.line(loop.lineno)} "
                        f"(`{ast.unparse(call)[:50]}`, {ctx.line(call.lineno)}), so this "
                        "runs on every step" + implicit, fixtext=fixtext)


def _consumed_in_return(ctx: Context, node: ast.AST, ret: ast.Return) -> bool:
    """``node`` is in ``ret`` as an argument of a further, non-converting call (``return
    scatter(m, r, dim_size=r.max().item() + 1)``): used on every call (HamGNN#78)."""
    child, cur = node, ctx.parents.get(node)
    while cur is not None and cur is not ret:
        if isinstance(cur, ast.Call) and child is not cur.func and last_name(cur) not in _HOST:
            return True
        child, cur = cur, ctx.parents.get(cur)
    return False


def _in_step(ctx: Context) -> Callable[[ast.AST], bool]:
    """``skip_in_step``, except an ``if step % k == 0:`` block that itself runs the
    optimizer step: that is the update step of gradient accumulation, not a logging branch."""
    def skip(n: ast.AST) -> bool:
        if isinstance(n, ast.If) and skip_in_step(n) and ctx.search(
                n.body, ctx.is_step, lambda x: isinstance(x, LOOPS)) is not None:
            return False
        return skip_in_step(n)
    return skip


_DEVICE_SYNCS = ("torch.cuda.synchronize", "torch.mps.synchronize", "torch.xpu.synchronize",
                 "jax.block_until_ready")


def _waits_for_all(ctx: Context, n: ast.AST) -> bool:
    """A whole-device wait: ``torch.cuda.synchronize()``, ``jax.block_until_ready(state)``,
    ``state.block_until_ready()`` (a statement of its own, not a value fetched for use)."""
    if not isinstance(n, ast.Call):
        return False
    if ctx.resolve(n.func) in _DEVICE_SYNCS:
        return True
    return isinstance(n.func, ast.Attribute) and n.func.attr == "block_until_ready" and isinstance(
        ctx.parents.get(n), ast.Expr)


def _data_fed(ctx: Context, loop: ast.AST) -> bool:
    """A loop over real batches (``for batch in loader``), not a benchmark's
    ``for _ in range(n)`` repeating one input."""
    it = getattr(loop, "iter", None)
    while isinstance(it, ast.Call) and last_name(it) in ("enumerate", "tqdm", "zip") and it.args:
        it = it.args[0]
    if it is not None and isinstance(it, ast.Call) and last_name(it) == "range":
        # for step in range(n): batch = next(data_iter) -- a loop over batches all the same
        return any(isinstance(n, ast.Call) and last_name(n) == "next" and (
            isinstance(n.func, ast.Name) and n.args or isinstance(n.func, ast.Attribute)
            and not n.args) for n in walk(getattr(loop, "body", []), skip_in_step))
    return it is not None


def _eval_loop(ctx: Context, loop: ast.AST) -> bool:
    """A loop that runs a model under ``torch.no_grad()``/``inference_mode()`` (an
    evaluation pass): its per-batch syncs cost what they cost in training."""
    if not ctx.uses("torch"):
        return False
    models = ctx.models | {c.func.value.id for c in ctx.calls() if last_name(c) == "eval"
                           and isinstance(c.func, ast.Attribute)
                           and isinstance(c.func.value, ast.Name)}
    fn = ctx.enclosing(loop, (ast.FunctionDef, ast.AsyncFunctionDef))
    if fn is not None:  # evaluate(model, ...): the model a function is given (round 9)
        models = models | {a.arg for a in fn.args.args if a.arg in ("model", "net", "module")}
    if not any(isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id in models
               for c in walk(loop.body, skip_in_step)):  # type: ignore[attr-defined]
        return False
    cur = ctx.parents.get(loop)
    while cur is not None:
        if isinstance(cur, ast.With) and any(
                last_name(i.context_expr) in ("no_grad", "inference_mode") for i in cur.items):
            return True
        if isinstance(cur, ast.FunctionDef | ast.AsyncFunctionDef) and any(
                last_name(d) in ("no_grad", "inference_mode") for d in cur.decorator_list):
            return True  # @torch.no_grad() on the function that runs the loop
        cur = ctx.parents.get(cur)
    return False


def _inner_loops(ctx: Context, body: list[ast.stmt]) -> list[ast.AST]:
    """Nodes of loops nested in a training loop that run no step of their own (they are
    not checked on their own): ``for a, p, n in zip(...)`` over a batch's triplets."""
    out: list[ast.AST] = []
    for n in walk(body, lambda x: isinstance(x, ast.If) and skip_in_step(x)):
        if isinstance(n, LOOPS) and ctx.search(n.body, ctx.is_step) is None:
            out += [m for m in walk(n.body, _in_step(ctx)) if not isinstance(m, LOOPS)]
    return out


def _sync_in_step_loop(ctx: Context, fixtext: str) -> None:
    for node in ast.walk(ctx.tree):
        if not isinstance(node, LOOPS) or ctx.is_compiled_scope(node):
            continue
        body = node.body
        trains = ctx.search(body, lambda n: ctx.is_step(n) or ctx.runs_compiled(n),
                            skip_in_step) is not None
        if not trains and not _eval_loop(ctx, node):
            continue
        direct = list(walk(body, _in_step(ctx)))
        fed = ctx.search(body, ctx.is_step, skip_in_step) is not None and _data_fed(
            ctx, node)  # a real optimisation loop over batches
        for n in direct:
            if _waits_for_all(ctx, n) and fed:
                ctx.add("script.sync-in-step-loop", "warning", n,
                        f"the training loop at {ctx.line(node.lineno)} waits for the device "
                        "on every step; syncing to time each step costs the overlap of host "
                        "and device (HuguesTHOMAS/KPConv-PyTorch#22: 25% slower; NVIDIA/apex#316: "
                        "sync only on the iterations that print)", fixtext=(
                            "synchronize (and read the clock) only on the steps that log: "
                            "`if step % log_freq == 0: " + (
                                "jax.block_until_ready(state)" if "block_until_ready" in
                                ast.unparse(n.func) else "torch.cuda.synchronize()") +
                            "`, and report the average time over those steps"))
        inner = _inner_loops(ctx, body)
        assigned = {n.id for s in direct if isinstance(s, ast.Assign | ast.AugAssign)
                    for t in getattr(s, "targets", [getattr(s, "target", None)])
                    for n in ast.walk(t) if isinstance(n, ast.Name)}
        device = _device_names(ctx, direct)
        seen = f"runs on every step of the training loop at {ctx.line(node.lineno)}"
        for n in inner:
            if isinstance(n, ast.JoinedStr) and any(
                    isinstance(v, ast.FormattedValue) and root_name(v.value) in device
                    for v in n.values):
                ctx.add("script.sync-in-step-loop", "warning", n,
                        seen + " (in a loop inside it); formatting a device tensor into a "
                        "string calls `.item()` on it, a device sync each time", fixtext=(
                            "move the values to the host once per step (`labels.cpu().tolist()`) "
                            "and format the Python numbers"))
        for n in direct:
            f = n.func if isinstance(n, ast.Call) else None
            if not trains and _collected(ctx, n):
                continue  # an evaluation pass gathering its outputs: the copy is the result
            if (isinstance(f, ast.Attribute) and f.attr in ("numpy", "item") and not n.args
                    or trains and device_get(ctx, n)
                    or isinstance(f, ast.Name) and f.id == "float" and len(n.args) == 1
                    and dotted(n.args[0]).split(".")[0] in assigned
                    or isinstance(f, ast.Attribute) and f.attr in ("cpu", "tolist")
                    and not n.args and root_name(f.value) in device):
                ctx.add("script.sync-in-step-loop", "warning", n, seen, fixtext=fixtext)
            elif isinstance(f, ast.Name) and f.id in ("print", "int", "bool") and any(
                    isinstance(a, ast.Name) and a.id in device and plain_use(ctx, a)
                    for arg in n.args for a in ast.walk(arg)):
                ctx.add("script.sync-in-step-loop", "warning", n,
                        seen + f"; `{f.id}` of a device value waits for the device",
                        fixtext=fixtext)
            elif isinstance(n, ast.Call) and (ctx.resolve(n.func) in _SINKS or last_name(
                    n) in _SINK_METHODS) and host_use(ctx, n, device):
                ctx.add("script.sync-in-step-loop", "warning", n,
                        seen + host_use(ctx, n, device), fixtext=fixtext)
            elif isinstance(n, ast.If | ast.While) and any(
                    isinstance(a, ast.Name) and a.id in device and plain_use(ctx, a)
                    for a in ast.walk(n.test)):
                ctx.add("script.sync-in-step-loop", "warning", n,
                        seen + "; Python control flow on a device value waits for the device",
                        fixtext=fixtext)
        _syncs_in_callees(ctx, node, direct, seen, fixtext)


def _syncs_in_hooks(ctx: Context, fixtext: str) -> None:
    """Syncs in the hooks a training loop's ``backward()``/forward runs (issue 24, round 7:
    NVIDIA/Megatron-LM#7076, ``.item()`` in a gradient-ready hook: one host sync per bucket
    per iteration) -- the hook, and the functions of this file it calls."""
    loop = next((n for n in ast.walk(ctx.tree) if isinstance(n, LOOPS) and ctx.search(
        n.body, lambda c: last_name(c) == "backward" if isinstance(c, ast.Call) else False,
        skip_in_step) is not None), None)
    if loop is None:
        return
    for reg, hook in hook_functions(ctx):
        fns = [(reg, hook)] + [(c, f) for c, f in callees(ctx, list(hook.body))]
        for _via, fn in fns:
            returned = {id(x) for r in walk(fn.body) if isinstance(r, ast.Return)
                        for x in ast.walk(r)}
            for m in walk(fn.body):
                if _is_sync_call(m) and id(m) not in returned:
                    ctx.add("script.sync-in-step-loop", "warning", m,
                            f"`{fn.name}` runs inside the hook registered at "
                            f"{ctx.line(reg.lineno)}, which every `backward()` of the loop at "
                            f"{ctx.line(loop.lineno)} calls", fixtext=fixtext)


def _collected(ctx: Context, n: ast.AST) -> bool:
    """``n`` is (part of) a value appended to a list (``preds.extend(out.cpu().numpy())``,
    ``ys.append(y.tolist())``): an evaluation loop collecting what it computed, for use
    after the loop -- the copy to the host is what the loop is for."""
    cur, child = ctx.parents.get(n), n
    while cur is not None and not isinstance(cur, ast.stmt):
        if isinstance(cur, ast.Call) and isinstance(cur.func, ast.Attribute) and (
                cur.func.attr in ("append", "extend", "insert")) and child in cur.args:
            return True
        child, cur = cur, ctx.parents.get(cur)
    return False


def _host_round_trips(ctx: Context, fixtext: str) -> None:
    """``f(x.cpu()).to(device)`` in a loop (rasbt/reasoning-from-scratch#177: sampling each
    token on the CPU): the value goes to the host and back on every iteration, a device sync
    each time, whether or not the loop trains."""
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, LOOPS) or ctx.is_compiled_scope(loop):
            continue
        for n in walk(loop.body, lambda x: isinstance(x, LOOPS)):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in (
                    "to", "cuda") and any(isinstance(c, ast.Call) and isinstance(
                    c.func, ast.Attribute) and c.func.attr == "cpu" and not c.args
                                          for c in ast.walk(n.func.value)):
                ctx.add("script.sync-in-step-loop", "warning", n,
                        f"on every iteration of the loop at {ctx.line(loop.lineno)} the value "
                        "is copied to the host (`.cpu()`), which waits for the device, and the "
                        "result copied back", fixtext=fixtext)


@rule("script.empty-cache-in-loop",
      "`torch.cuda.empty_cache()` in the training loop",
      "it hands the caching allocator's free blocks back to the driver (and synchronizes), so "
      "the next step allocates them again with cudaMalloc; it frees no memory PyTorch could "
      "not reuse itself (huggingface/transformers#31530 removed it from the Trainer's step "
      "for slowing training; pytorch/rl#489: \"this operation takes a considerable amount of "
      "time\")",
      "remove it from the loop; if fragmentation really causes OOMs, set "
      "`PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` or call it every few hundred steps")
def empty_cache_in_loop(ctx: Context) -> None:
    if not ctx.uses("torch"):
        return
    gc_collect_per_item(ctx)  # Dataset.__getitem__/__iter__: per item (round 11)
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, LOOPS) or ctx.is_compiled_scope(loop) or ctx.search(
                loop.body, ctx.is_step, skip_in_step) is None and not _eval_loop(ctx, loop):
            continue  # a training loop, or an evaluation pass over batches (round 10)
        sites = [(n, "") for n in walk(loop.body, lambda x: isinstance(x, LOOPS))] + [
            (n, fn.name) for call, fn in callees(ctx, list(loop.body)) for n in walk(fn.body)]
        for n, fn_name in sites:
            if isinstance(n, ast.Call) and ctx.resolve(n.func) == "gc.collect" and not any(
                    skip_in_step(a) and not isinstance(a, LOOPS) for a in _ancestors(ctx, n, loop)):
                ctx.add("script.empty-cache-in-loop", "warning", n,
                        ("in `" + fn_name + "`, which " if fn_name else "") + "the loop at "
                        f"{ctx.line(loop.lineno)} runs on every step; `gc.collect()` is "
                        "the same kind of housekeeping as emptying the cache",
                        why="a full garbage collection walks every Python object on every step "
                            "and frees nothing PyTorch's allocator would not reuse "
                            "(huggingface/peft#2894: removing it took 250 steps from 108 s to "
                            "65 s with the same peak memory)",
                        fix="remove it from the loop (call it once after the loop, or every few "
                            "hundred steps if host memory really grows)")
            if isinstance(n, ast.Call) and ctx.resolve(n.func) in (
                    "torch.cuda.empty_cache", "torch.mps.empty_cache"):
                periodic = any(skip_in_step(a) and not isinstance(a, LOOPS)
                               for a in _ancestors(ctx, n, loop))
                ctx.add("script.empty-cache-in-loop", "info" if periodic else "warning", n,
                        ("in `" + fn_name + "`, which " if fn_name else "") + "the loop at "
                        f"{ctx.line(loop.lineno)} runs" + (" every few steps" if periodic
                                                          else " on every step"))


def _ancestors(ctx: Context, node: ast.AST, stop: ast.AST) -> list[ast.AST]:
    out, cur = [], ctx.parents.get(node)
    while cur is not None and cur is not stop:
        out.append(cur)
        cur = ctx.parents.get(cur)
    return out
