"""Pitfall kinds first seen in corpus_round10's dev half (issue 24, round 11), each written
as the general form its thread names:

- summaries written on every step: histogram (or image) summaries copy whole tensors to
  the host and serialise them; a merged summary op fetched each step does the same for
  every histogram the graph defines (sherjilozair/char-rnn-tensorflow#112);
- a copy to the GPU inside a Dataset's ``__getitem__``: it runs in the loader's workers
  (which must then initialise CUDA) one item at a time, instead of one pinned batch copy
  in the training loop (nvidia-cosmos/cosmos-predict1#31);
- a DataLoader fetching an in-memory dataset item by item: ``__getitem__`` only indexes
  tensors the dataset holds, so the per-item Python calls and the collation are the whole
  cost (pytorch/pytorch#106704);
- ``torch.from_numpy(a).float()``: the conversion keeps NumPy's float64 and the cast is a
  second full copy in PyTorch (kengz/SLM-Lab#326).

Two forms of known kinds are read by helpers the older rules call: a nested Python list
given to ``jnp.array`` (:func:`jnp_nested_list`, from ``script.tensor-from-python-list``)
and a tokenizer called once per text in a loop (:func:`tokenizer_per_item`, from
``script.per-item-call``).
"""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import LOOPS, last_name, skip_in_step, walk
from devicebench.script_check.context import Context, rule
from devicebench.script_check.form_rules import dataset_item_methods
from devicebench.script_check.kinds import repeat_site

_HISTOGRAMS = ("tensorflow.summary.histogram", "tensorflow.summary.image",
               "tensorflow.compat.v1.summary.histogram", "tensorflow.compat.v1.summary.image")


def _guarded(ctx: Context, node: ast.AST, loop: ast.AST) -> bool:
    """Under ``if step % N == 0:`` (or a nested loop) between ``node`` and ``loop``."""
    cur = ctx.parents.get(node)
    while cur is not None and cur is not loop:
        if skip_in_step(cur):
            return True
        cur = ctx.parents.get(cur)
    return False


def _merged_summaries(ctx: Context) -> set[str]:
    """Names bound to ``tf.summary.merge_all()`` / ``merge(...)`` when the file also defines
    histogram or image summaries (what the merged op then computes)."""
    if not any(ctx.resolve(c.func) in _HISTOGRAMS for c in ctx.calls()):
        return set()
    return {name for name, values in ctx.assigns.items() for v in values
            if isinstance(v, ast.Call) and last_name(v) in ("merge_all", "merge")
            and "summary" in ast.unparse(v.func)}


@rule("script.summary-every-step",
      "histogram summaries computed and written on every training step",
      "a histogram (or image) summary copies the whole tensor to the host and serialises it "
      "into the event file; on every step that is often more than the step itself "
      "(sherjilozair/char-rnn-tensorflow#112: \"remove the summary tensor make training 10x "
      "times faster\"; deepmodeling/deepmd-kit#996: 14 s -> 45 s per 2000 steps)",
      "write summaries every N steps (`if step % 100 == 0:`), keep per-step logging to "
      "scalars such as the loss, and fetch the merged summary op only on those steps")
def summary_every_step(ctx: Context) -> None:
    if not ctx.uses("tensorflow") and not ctx.uses("torch"):
        return
    merged = _merged_summaries(ctx)
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, LOOPS) or ctx.is_compiled_scope(loop):
            continue
        for n in walk(loop.body):
            if not isinstance(n, ast.Call) or _guarded(ctx, n, loop):
                continue
            q = ctx.resolve(n.func)
            hist = q in _HISTOGRAMS or last_name(n) in ("add_histogram", "add_image") and (
                isinstance(n.func, ast.Attribute))
            fetched = last_name(n) == "run" and n.args and merged & {
                x.id for x in ast.walk(n.args[0]) if isinstance(x, ast.Name)}
            if hist or fetched:
                ctx.add("script.summary-every-step", "info", n,
                        ("the fetched summary op merges the file's histogram summaries, "
                         if fetched else "") + f"on every iteration of the loop at "
                        f"{ctx.line(loop.lineno)}")


def _to_gpu(ctx: Context, n: ast.AST) -> bool:
    if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)):
        return False
    if n.func.attr == "cuda":
        return True
    return n.func.attr == "to" and bool(n.args) and any(
        w in ast.unparse(n.args[0]).lower() for w in ("cuda", "gpu"))


@rule("script.cuda-in-dataset",
      "tensor copied to the GPU inside the Dataset's `{method}`",
      "the DataLoader calls `{method}` once per item, in its worker processes: each item "
      "becomes its own small, unpinned host-to-device copy, and workers that touch CUDA must "
      "be spawned and initialise a CUDA context each (nvidia-cosmos/cosmos-predict1#31: "
      "3.2 s between iterations -> under 50 ms once the copy moved to the training loop, "
      "with 8 workers and pinned memory)",
      "return CPU tensors from the dataset and copy the batch in the training loop: "
      "`DataLoader(..., num_workers=8, pin_memory=True)` and `batch.cuda(non_blocking=True)`")
def cuda_in_dataset(ctx: Context) -> None:
    if not ctx.uses("torch"):
        return
    for method in dataset_item_methods(ctx):
        for n in walk(method.body):
            if _to_gpu(ctx, n):
                ctx.add("script.cuda-in-dataset", "warning", n,
                        f"`{ast.unparse(n)[:40]}` in `{method.name}`", method=method.name)


def _only_indexes(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """``return self.x[i], self.y[i]``: the body indexes what the object holds, nothing else."""
    if len(fn.args.args) < 2 or len(fn.body) != 1 or not isinstance(fn.body[0], ast.Return):
        return False
    idx = fn.args.args[1].arg
    value = fn.body[0].value
    parts = value.elts if isinstance(value, ast.Tuple) else [value]
    return bool(parts) and all(
        isinstance(p, ast.Subscript) and isinstance(p.value, ast.Attribute)
        and isinstance(p.slice, ast.Name) and p.slice.id == idx for p in parts)


@rule("script.per-item-fetch",
      "DataLoader fetching an in-memory dataset one item at a time",
      "`{cls}.__getitem__` only indexes tensors the dataset already holds, so the loader's "
      "cost is the per-item Python calls and the collation of {bs} items per batch, not the "
      "data (pytorch/pytorch#106704: ~100x slower than slicing batches of an in-memory "
      "dataset)",
      "index whole batches: `for idx in torch.randperm(n).split(bs): xb, yb = x[idx], y[idx]`, "
      "or give the dataset a `__getitems__(self, indices)` that slices once per batch")
def per_item_fetch(ctx: Context) -> None:
    if not ctx.uses("torch"):
        return
    for call in ctx.calls():
        if last_name(call) != "DataLoader" or not call.args or any(
                k.arg in ("batch_sampler", "collate_fn") for k in call.keywords):
            continue
        built = call.args[0]
        if not (isinstance(built, ast.Call) and isinstance(built.func, ast.Name)
                and built.func.id in ctx.classes):
            continue
        cls = ctx.classes[built.func.id]
        methods = {m.name: m for m in cls.body if isinstance(m, ast.FunctionDef)}
        if "__getitems__" in methods or "__getitem__" not in methods or not _only_indexes(
                methods["__getitem__"]):
            continue
        bs = next((ast.unparse(k.value) for k in call.keywords if k.arg == "batch_size"), "1")
        ctx.add("script.per-item-fetch", "info", call, cls=cls.name, bs=f"`{bs}`")


@rule("script.cast-after-convert",
      "array converted to a tensor, then cast in PyTorch",
      "`{call}` keeps NumPy's dtype (float64 for most NumPy data) in the conversion and "
      "then makes a second full copy to cast it; casting in NumPy first converts once, at "
      "half the bytes (kengz/SLM-Lab#326: the conversion took a third of the time, 2% of "
      "the whole run)",
      "cast before converting: `torch.from_numpy(a.astype(np.float32))` (or keep the "
      "buffers float32 from the start)")
def cast_after_convert(ctx: Context) -> None:
    if not ctx.uses("torch"):
        return
    for call in ctx.calls():
        f = call.func
        if not (isinstance(f, ast.Attribute) and f.attr in ("float", "half") and not call.args
                and isinstance(f.value, ast.Call)
                and ctx.resolve(f.value.func) in ("torch.from_numpy", "torch.as_tensor")):
            continue
        if repeat_site(ctx, call) is not None:
            ctx.add("script.cast-after-convert", "info", call,
                    call=f"{ast.unparse(call)[:50]}")


_TOKENIZER_CTORS = ("from_preset", "from_pretrained")


def _tokenizers(ctx: Context) -> set[str]:
    return {name for name, values in ctx.assigns.items() for v in values
            if isinstance(v, ast.Call) and last_name(v) in _TOKENIZER_CTORS
            and "tokenizer" in ast.unparse(v.func).lower()}


def tokenizer_per_item(ctx: Context) -> None:
    """``for text in texts: tokenizer.tokenize(text)``: a batched API called per item
    (keras-team/keras-hub#2056), reported as ``script.per-item-call``."""
    toks = _tokenizers(ctx)
    if not toks:
        return
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, ast.For) or not isinstance(loop.target, ast.Name):
            continue
        var = loop.target.id
        for n in walk(loop.body):
            if not (isinstance(n, ast.Call) and n.args and isinstance(n.args[0], ast.Name)
                    and n.args[0].id == var):
                continue
            owner = n.func.value if isinstance(n.func, ast.Attribute) else n.func
            if isinstance(owner, ast.Name) and owner.id in toks and (
                    not isinstance(n.func, ast.Attribute)
                    or n.func.attr in ("tokenize", "encode", "__call__")):
                ctx.add("script.per-item-call", "info", n,
                        f"`{owner.id}` tokenizes one text per iteration",
                        what="a tokenizer call has a fixed cost (tracing or dispatch, "
                             "padding, conversion) per call; it accepts a list of texts",
                        unit="text", where=f"the loop at {ctx.line(loop.lineno)} passes "
                                           f"its own variable `{var}`",
                        fix=f"tokenize the whole list once: `{owner.id}.tokenize(texts)` "
                            "(or in batches of a few thousand)")


def jnp_nested_list(ctx: Context) -> None:
    """``jnp.array(rows)`` of a nested Python list (jax-ml/jax#2211): JAX converts nested
    lists by recursion in Python, element by element -- slow even once, for large lists."""
    if not ctx.uses("jax"):
        return
    nested: set[str] = {name for name, values in ctx.assigns.items() if values and all(
        _nested(v) for v in values)}
    for call in ctx.calls():
        if ctx.resolve(call.func) not in ("jax.numpy.array", "jax.numpy.asarray") or (
                not call.args):
            continue
        arg = call.args[0]
        if _nested(arg) or isinstance(arg, ast.Name) and arg.id in nested:
            ctx.add("script.tensor-from-python-list", "info", call,
                    f"`{ast.unparse(arg)[:30]}` is a nested Python list",
                    why="`jax.numpy.array` converts a nested Python list by recursing into "
                        "it in Python, one element at a time (jax-ml/jax#2211: a 2000 x 2000 "
                        "list of zeros took minutes; NumPy takes under a second)",
                    fix="build it with NumPy and transfer once: `jnp.asarray(np.array(rows))`"
                        " (or build the array directly: `jnp.zeros((n, n))`)",
                    ctor="jnp.array", how="a nested list")


def _nested(v: ast.AST) -> bool:
    """A list comprehension (or list) whose elements are lists: ``[[0] * n for _ in ...]``."""
    elts = [v.elt] if isinstance(v, ast.ListComp) else v.elts if isinstance(v, ast.List) else []
    return bool(elts) and all(isinstance(e, ast.List | ast.ListComp) or isinstance(
        e, ast.BinOp) and isinstance(e.op, ast.Mult) and isinstance(e.left, ast.List)
        for e in elts)
