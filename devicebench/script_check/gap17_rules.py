"""corpus_round15's held-out misses written generally (issue 24, round 17, step 0): analysis
gaps, under existing ids, all ``info`` (the cost depends on sizes the file does not show).

- a device barrier (``torch.cuda.synchronize()`` and its kin) in a function or a method of
  a helper object that a training loop calls on every step, with no clock read beside it
  (so not a timer): every step then waits for the device (``script.sync-in-step-loop``;
  stepjam, NeuracoreAI/neuracore#893, 2026: a memory monitor's barrier before reading
  allocator bookkeeping);
- ``.item()`` / ``.tolist()`` in a function a loop hands its item to, of that item's
  attributes (``batch.lens.sum().item()``) or of a local computed from them by tensor ops
  (``sizes = grid.prod(-1) // m``; ``sizes.tolist()``): one device-to-host sync per call
  (zzt93, sgl-project/sglang#7563, 2025; cyyever, vllm-project/vllm#22792, 2025);
- ``x[idx.to(<device>)]``: a blocking host-to-device copy nested inside an indexing
  expression in code every forward or step runs (``script.blocking-h2d-copy``; lgeiger,
  vllm-project/vllm#24741, 2025: copy with ``non_blocking=True``);
- ``for i in range(p.size(0))`` over a parameter of a module's forward (or what it calls)
  whose body indexes, with ``i``, values computed from the parameters -- not only the
  parameter itself (``script.per-sample-python-loop``; Fleyderer, jixunbo/LightMBN#33, 2025).

The fourth miss, an optimiser update left outside ``pmap`` in a step function whose
gradient is already compiled, is reported at the update statement (``jax_rules._where``).
"""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import keyword, target_names, walk
from devicebench.script_check.context import Context, FuncDef
from devicebench.script_check.dataflow import callees
from devicebench.script_check.gap14_rules import forward_reach
from devicebench.script_check.round15_rules import _unconditional
from devicebench.script_check.vector_rules import _param_batch

_BARRIERS = ("torch.cuda.synchronize", "torch.xpu.synchronize", "torch.mps.synchronize")
_CLOCKS = ("time.time", "time.perf_counter", "time.monotonic", "time.process_time")


def _step_loops(ctx: Context) -> list[ast.For | ast.While]:
    return [n for n in ast.walk(ctx.tree) if isinstance(n, ast.For | ast.While)
            and any(ctx.is_step(x) for x in walk(n.body))]


def _statement(ctx: Context, n: ast.AST) -> ast.AST:
    cur = n
    while cur is not None and not isinstance(cur, ast.stmt):
        cur = ctx.parents.get(cur)
    return cur or n


def _barrier_in_called_function(ctx: Context) -> None:
    for loop in _step_loops(ctx):
        direct = [c for c in walk(loop.body) if isinstance(c, ast.Call)
                  and _unconditional(ctx, c, loop)]
        for call, fn in callees(ctx, direct, depth=2):
            if any(ctx.resolve(c.func) in _CLOCKS for c in ctx.calls(fn.body)):
                continue  # a timer: the timing rules read it
            for n in walk(fn.body):
                if (isinstance(n, ast.Call) and ctx.resolve(n.func) in _BARRIERS
                        and _unconditional(ctx, n, fn)):
                    ctx.add("script.sync-in-step-loop", "info", n,
                            f"`{ast.unparse(n)}` in `{fn.name}`, which the training loop at "
                            f"{ctx.line(loop.lineno)} calls on every step "
                            f"({ctx.line(call.lineno)}): the host waits for the device each "
                            "time", fixtext="drop the barrier (allocator statistics and most "
                                            "bookkeeping need none), or run it only on the "
                                            "steps that log")


def _mentions(node: ast.AST, names: set[str]) -> bool:
    return any(isinstance(m, ast.Name) and m.id in names for m in ast.walk(node))


def _attr_of(node: ast.AST, names: set[str]) -> bool:
    """``node`` reads an attribute or an item of one of ``names`` (``batch.lens``)."""
    return any(isinstance(m, ast.Attribute | ast.Subscript) and isinstance(m.value, ast.Name)
               and m.value.id in names for m in ast.walk(node))


def _handed(call: ast.Call, fn: FuncDef, items: set[str]) -> set[str]:
    params = [a.arg for a in fn.args.args if a.arg not in ("self", "cls")]
    return {p for p, v in zip(params, call.args, strict=False)
            if isinstance(v, ast.Name) and v.id in items}


def _derived(fn: FuncDef, given: set[str]) -> set[str]:
    """Locals of ``fn`` computed from the values in ``given`` by tensor ops or indexing
    (two passes: ``grid = inp["grid"]``; ``sizes = grid.prod(-1) // m``)."""
    out: set[str] = set()
    for _ in range(2):
        for s in walk(fn.body):
            if (isinstance(s, ast.Assign) and isinstance(s.value, ast.BinOp | ast.Call
                                                         | ast.Subscript | ast.Attribute)
                    and _mentions(s.value, given | out)):
                out |= {t for x in s.targets for t in target_names(x)} - given
    return out


def _host_reads_of_handed_values(ctx: Context) -> None:
    if "cuda" not in "\n".join(ctx.lines):
        return
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, ast.For) or ctx.is_compiled_scope(loop):
            continue
        items = set(target_names(loop.target))
        calls = [c for c in walk(loop.body) if isinstance(c, ast.Call)
                 and _unconditional(ctx, c, loop)]
        for call, fn in callees(ctx, calls, depth=1):
            given = _handed(call, fn, items)
            if not given or fn.name == "__init__":
                continue
            local = _derived(fn, given)
            for n in walk(fn.body):
                if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                        and n.func.attr in ("item", "tolist") and not n.args
                        and _unconditional(ctx, n, fn)):
                    continue
                recv = n.func.value
                if n.func.attr == "item" and _attr_of(recv, given) or (
                        n.func.attr == "tolist" and isinstance(recv, ast.Name)
                        and recv.id in local):
                    ctx.add("script.sync-in-step-loop", "info", n,
                            f"`{ast.unparse(n)[:50]}` in `{fn.name}`, which the loop at "
                            f"{ctx.line(loop.lineno)} calls with each `{', '.join(sorted(items))}`"
                            ": a device-to-host sync per call",
                            fixtext="use the host-side copy the caller already holds "
                                    "(a Python list of the sizes), or read the tensor once")


def _is_copy(n: ast.AST) -> bool:
    if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr in ("to", "cuda") and keyword(n, "non_blocking") is None):
        return False
    if n.func.attr == "cuda":
        return True
    a = n.args[0] if n.args else keyword(n, "device")
    return a is not None and ("device" in ast.unparse(a).lower()
                              or isinstance(a, ast.Constant) and "cuda" in str(a.value))


def _blocking_copy_in_index(ctx: Context) -> None:
    bodies = [list(fn.body) for _, fn in forward_reach(ctx)]
    bodies += [list(loop.body) for loop in _step_loops(ctx)]
    for body in bodies:
        for n in walk(body):
            if isinstance(n, ast.Subscript) and any(_is_copy(m) for m in ast.walk(n.slice)):
                stmt = _statement(ctx, n)
                ctx.add("script.blocking-h2d-copy", "info", stmt,
                        f"`{ast.unparse(n)[:50]}`: the index is copied to the device with a "
                        "blocking copy before the indexing runs",
                        loader="the index is built on the host")


def _per_sample_loop_over_parameter(ctx: Context) -> None:
    for _, fn in forward_reach(ctx):
        params = {a.arg for a in fn.args.args} - {"self"}
        values = params | _derived(fn, params)
        for loop in walk(fn.body):
            if not (isinstance(loop, ast.For) and isinstance(loop.target, ast.Name)
                    and _param_batch(fn, loop.iter)):
                continue
            var = loop.target.id
            if any(isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name)
                   and n.value.id in values and _mentions(n.slice, {var})
                   for n in walk(loop.body)):
                ctx.add("script.per-sample-python-loop", "info", loop,
                        f"in `{fn.name}`, which every forward runs: one sample of "
                        f"`{_param_batch(fn, loop.iter)}` per iteration, indexing values "
                        "computed from the inputs", what=ctx.code(loop.lineno)[:50])
