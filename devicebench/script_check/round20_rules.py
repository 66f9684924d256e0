"""corpus_round19's dev forms (issue 24, round 20), under existing ids, all ``info`` and
added late (``Context.add_late``: none takes an older warning's place). Per-batch code is
``gap20_rules.per_batch`` (code a loop runs through calls, forward code, methods of an
instance a loop passes on).

- a device ping-pong in a loop: inputs moved with ``x.to(D)`` and a result moved back with
  ``y.to(x.device)`` in the same body -- each round trips through the host
  (``script.per-step-copy``; amazon-science/chronos-forecasting#456);
- a ``torch`` factory (``arange``/``zeros``/``empty``/...) sized by an element of a device
  tensor (``t[-1]`` where ``t.device`` is used beside it) in per-batch code: the element is
  read back (``script.sync-in-step-loop``; dmlc/dgl#6861);
- ``.item()`` inside a Python loop of per-batch code (``script.sync-in-step-loop``;
  state-spaces/mamba#969);
- ``x.cpu().float()`` (a cast after the device-to-host copy) in per-batch code: the
  conversion runs on the host over the copied bytes (``script.cast-before-copy``;
  hao-ai-lab/FastVideo#1362), and NumPy arithmetic on ``.numpy()`` of each piece of a loop over
  a tensor's ``permute``/``unbind``/... (``script.per-sample-python-loop``; same PR);
- a value moved to a device in a loop (directly or by a file function that calls ``.to``) and
  then only stored in a buffer (``*buffer*.add``/``append``/``push``...): the buffer's storage
  copies it back (``script.per-step-copy``; huggingface/lerobot#3124);
- a file function returning ``jax.jit(fn, ...)`` is a jit: handed a closure defined in a
  function a loop calls, it compiles per call (``script.jit-in-loop``; pyro-ppl/numpyro#2171);
- a timer class whose ``__exit__`` subtracts ``time.perf_counter()``/``time.time()`` with no
  synchronize, whose every ``with`` times CUDA work in a loop (``script.unsynced-timing``;
  oumi-ai/oumi#329);
- jax.numpy on the data path: in a collator's ``__call__``, a function mapped with
  ``.map(f, batched=...)`` or a ``*loader*`` generator, calls of ``jnp.*`` or of file functions
  that use it, and a data set indexed by a slice of a JAX array (``script.jnp-in-data-loader``;
  huggingface/transformers#12719, #14864);
- a file function returning ``torch.tensor(..., device=...)`` whose per-batch callers call
  ``.cpu()``/``.numpy()`` on the result at once (``script.per-step-copy``;
  ultralytics/ultralytics#25344).

Sources: the threads above (https://github.com/<owner>/<repo>/issues/<n> or ``/pull/<n>``).

Its timing form (``_cpu_timer_class``) now lives in :mod:`.forms_timing`.
"""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import LOOPS, keyword, last_name, walk
from devicebench.script_check.context import Context
from devicebench.script_check.gap20_rules import per_batch
from devicebench.script_check.round19_rules import hot

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_FACTORIES = {"torch." + n for n in ("arange", "zeros", "ones", "empty", "full", "randn",
                                      "rand", "randint", "randperm")}
_PIECES = ("permute", "unbind", "split", "chunk", "transpose", "flip")
_STORE = ("add", "append", "push", "insert", "store", "extend")
_COPY = "script.per-step-copy"
_SYNC = "script.sync-in-step-loop"
_JNP = "script.jnp-in-data-loader"


def _dump(node: ast.AST) -> str:
    return ast.dump(node)


def _is_to(c: ast.AST) -> bool:
    return (isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
            and c.func.attr == "to" and bool(c.args))


def _ping_pong(ctx: Context) -> None:
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, LOOPS):
            continue
        tos = [c for c in walk(loop.body) if _is_to(c) and ctx.enclosing(c, LOOPS) is loop]
        moved = {c.func.value.id: _dump(c.args[0]) for c in tos
                 if isinstance(c.func.value, ast.Name)}
        back = [c for c in tos if isinstance(c.args[0], ast.Attribute)
                and c.args[0].attr == "device" and isinstance(c.args[0].value, ast.Name)
                and c.args[0].value.id in moved]
        if not back:
            continue
        dests = {moved[c.args[0].value.id] for c in back}
        for c in tos:
            if c in back or _dump(c.args[0]) in dests:
                ctx.add_late(_COPY, "info", c, "a loop moves its inputs to the device and the "
                             "result back to the inputs' device every round: keep the loop's "
                             "state on the device", data=ast.unparse(c.func.value)[:40],
                             fix="move the context to the device "
                             "once and keep generation there")


def _element_sized_factory(ctx: Context) -> None:
    for c in ctx.calls():
        if ctx.resolve(c.func) not in _FACTORIES:
            continue
        fn = ctx.enclosing(c, _FUNCS)
        devices = {_dump(a.value) for a in (walk(fn.body) if fn else ast.walk(ctx.tree))
                   if isinstance(a, ast.Attribute) and a.attr == "device"}
        if any(isinstance(a, ast.Subscript) and _dump(a.value) in devices for a in c.args) \
                and (per_batch(ctx, c) or _property_read_in_loop(ctx, fn)):
            ctx.add_late(_SYNC, "info", c, "the size is an element of a device tensor: it is "
                         "read back to the host each time", fixtext="use a size the host "
                         "knows (`len(...)`, a CPU copy) instead of the device element")


def _property_read_in_loop(ctx: Context, fn: ast.AST | None) -> bool:
    """A ``@property`` of a file class read as ``obj.name`` inside a loop."""
    if fn is None or not any(last_name(d) == "property" for d in fn.decorator_list):
        return False
    return any(isinstance(n, ast.Attribute) and n.attr == fn.name and isinstance(n.ctx, ast.Load)
               and ctx.enclosing(n, LOOPS) is not None and ctx.enclosing(n, _FUNCS) is not fn
               for n in ast.walk(ctx.tree))


def _item_in_loop(ctx: Context) -> None:
    for c in ctx.calls():
        if last_name(c) != "item" or c.args or not isinstance(c.func, ast.Attribute):
            continue
        loop, fn = ctx.enclosing(c, LOOPS), ctx.enclosing(c, _FUNCS)
        if loop is None or fn is None or ctx.enclosing(loop, _FUNCS) is not fn:
            continue
        if per_batch(ctx, c):
            ctx.add_late(_SYNC, "info", c, "`.item()` in a Python loop of code every batch "
                         "runs: one host sync per iteration", fixtext="vectorize the loop on "
                         "the device (e.g. `searchsorted`, `repeat_interleave(output_size=)`)")


def _host_cast_and_frames(ctx: Context) -> None:
    for c in ctx.calls():
        f = c.func
        if (isinstance(f, ast.Attribute) and f.attr in ("float", "double", "half")
                and isinstance(f.value, ast.Call) and last_name(f.value) == "cpu"
                and per_batch(ctx, c)):
            ctx.add_late("script.cast-before-copy", "info", c, "cast after the device-to-host "
                         "copy: the copy moves the device dtype and the conversion runs on "
                         "the CPU", form=ast.unparse(c)[:40],
                         fix="convert on the device (to the final, narrower dtype) before "
                         "`.cpu()`")
    for loop in ast.walk(ctx.tree):
        if not (isinstance(loop, ast.For) and isinstance(loop.iter, ast.Call)
                and last_name(loop.iter) in _PIECES and isinstance(loop.iter.func, ast.Attribute)
                and per_batch(ctx, loop)):
            continue
        for b in walk(loop.body):
            if isinstance(b, ast.BinOp) and any(
                    isinstance(s, ast.Call) and last_name(s) == "numpy" for s in (b.left, b.right)):
                ctx.add_late("script.per-sample-python-loop", "info", b, "NumPy arithmetic per "
                             "piece of a tensor in a Python loop", what=ctx.code(loop.lineno),
                             fix="do it once on the "
                             "whole tensor (on the device) before the host copy")


def _moves(ctx: Context, value: ast.AST) -> bool:
    if _is_to(value):
        return True
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)):
        return False
    defs = [d for d in ast.walk(ctx.tree) if isinstance(d, _FUNCS) and d.name == value.func.id]
    return any(_is_to(c) for d in defs for c in walk(d.body))


def _moved_then_buffered(ctx: Context) -> None:
    for a in ast.walk(ctx.tree):
        if not (isinstance(a, ast.Assign) and len(a.targets) == 1
                and isinstance(a.targets[0], ast.Name) and _moves(ctx, a.value)):
            continue
        loop, name = ctx.enclosing(a, LOOPS), a.targets[0].id
        if loop is None:
            continue
        inside = {id(n) for n in ast.walk(a.value)}
        uses = [n for n in walk(loop.body) if isinstance(n, ast.Name) and n.id == name
                and isinstance(n.ctx, ast.Load) and id(n) not in inside]
        stores = [c for c in ctx.calls(loop.body) if last_name(c) in _STORE
                  and isinstance(c.func, ast.Attribute)
                  and any(w in ast.unparse(c.func.value).lower()
                          for w in ("buffer", "memory", "storage"))]
        used_in = {id(n) for c in stores for n in ast.walk(c)}
        if uses and stores and all(id(n) in used_in for n in uses):
            ctx.add_late(_COPY, "info", a.value, "moved to the device only to be stored in a "
                         "buffer, whose storage copies it back", data=name,
                         fix="store it as it is; "
                         "the buffer's `sample()` moves batches to the device")


def _tensor_undone_by_caller(ctx: Context) -> None:
    for fn in ast.walk(ctx.tree):
        if not isinstance(fn, _FUNCS):
            continue
        for r in walk(fn.body):
            v = r.value if isinstance(r, ast.Return) else None
            if not (isinstance(v, ast.Call) and ctx.resolve(v.func) == "torch.tensor"
                    and keyword(v, "device") is not None):
                continue
            for c in ctx.calls():
                p = ctx.parents.get(c)
                if (last_name(c) == fn.name and isinstance(p, ast.Attribute)
                        and p.attr in ("cpu", "numpy") and hot(ctx, c)):
                    ctx.add_late(_COPY, "info", v, "a host array copied to the device and "
                                 "copied straight back by its caller each batch",
                                 data=ast.unparse(v.args[0])[:40] if v.args else "",
                                 fix="return `torch.from_numpy(...)` on the host")
                    break


def _jit_wrapper_of_closure(ctx: Context) -> None:
    wrappers = {d.name for d in ast.walk(ctx.tree) if isinstance(d, _FUNCS) and d.args.args
                and any(isinstance(r, ast.Return) and isinstance(r.value, ast.Call)
                        and ctx.resolve(r.value.func) == "jax.jit" and r.value.args
                        and isinstance(r.value.args[0], ast.Name)
                        and r.value.args[0].id == d.args.args[0].arg for r in walk(d.body))}
    for c in ctx.calls():
        fn = ctx.enclosing(c, _FUNCS)
        if last_name(c) not in wrappers or fn is None or not c.args:
            continue
        nested = {d.name for d in ast.walk(fn) if isinstance(d, _FUNCS) and d is not fn}
        if isinstance(c.args[0], ast.Name) and c.args[0].id in nested and hot(ctx, c):
            ctx.add_late("script.jit-in-loop", "info", c, f"`{last_name(c)}` jits a closure "
                         "built on every call: JAX caches by function identity, so every call "
                         "compiles again", how=f"`{last_name(c)}` (a `jax.jit` wrapper)",
                         ctor="jax.jit", reason="a closure defined per call is a new function "
                         "each time: the compile cache misses",
                         fix="build the jitted function once (cache it) and pass the "
                         "closed-over values as arguments")


def _data_path(ctx: Context) -> list[ast.AST]:
    mapped = {c.args[0].id for c in ctx.calls() if last_name(c) == "map" and c.args
              and isinstance(c.args[0], ast.Name) and keyword(c, "batched") is not None}
    out = []
    for d in ast.walk(ctx.tree):
        if not isinstance(d, _FUNCS):
            continue
        cls = ctx.enclosing(d, (ast.ClassDef,))
        if (d.name in mapped or (d.name == "__call__" and cls is not None
                                 and "collat" in cls.name.lower())
                or ("loader" in d.name and any(isinstance(y, ast.Yield) for y in walk(d.body)))):
            out.append(d)
    return out


def _jnp_on_data_path(ctx: Context) -> None:
    jnp_funcs = {d.name for d in ast.walk(ctx.tree) if isinstance(d, _FUNCS) and any(
        ctx.resolve(c.func).startswith("jax.numpy.") for c in ctx.calls([d]))}
    for d in _data_path(ctx):
        jax_names = set()
        for a in walk(d.body):
            if isinstance(a, ast.Assign) and isinstance(a.targets[0], ast.Name) and (
                    (isinstance(a.value, ast.Call)
                     and ctx.resolve(a.value.func).startswith(("jax.numpy.", "jax.random.")))
                    or (isinstance(a.value, ast.Subscript)
                        and last_name(a.value.value) in jax_names)):
                jax_names.add(a.targets[0].id)
        for n in walk(d.body):
            if isinstance(n, ast.Call) and (last_name(n) in jnp_funcs and isinstance(
                    n.func, ast.Name) or (ctx.resolve(n.func).startswith("jax.numpy.")
                                          and "loader" not in d.name)):
                what = "jax.numpy on the data path: small device ops (and copies) per batch"
            elif (isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Name)
                  and n.slice.id in jax_names and isinstance(n.value, ast.Name)
                  and n.value.id not in jax_names):
                what = "a data set indexed with a JAX array: converted element by element"
            else:
                continue
            api = ast.unparse(n.func if isinstance(n, ast.Call) else n)[:40]
            ctx.add_late(_JNP, "info", n, what, api=api, fix="use NumPy on the host-side input "
                         "path; keep JAX for the device step")
