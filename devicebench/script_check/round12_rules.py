"""Pitfall forms first seen in corpus_round12's dev half (issue 24, round 13), each written
as the general form its thread names (all ``info``: the cost depends on sizes the file does
not show):

- TensorFlow 1 graph ops built inside a function every epoch calls: each call adds a new
  subgraph to the default graph, and each epoch is slower than the last (goodfeli,
  cleverhans-lab/cleverhans#552, 2018);
- an HDF5/PyTables file opened (and closed) per item, by a loader function given the file
  name: the open costs more than the read (bryankim96, ctlearn-project/ctlearn#2, 2018: ~30%);
- ``Dataset.map`` of a tokenizing function without ``batched=True``: a fast tokenizer works
  on one example per call (mariosasko, huggingface/datasets#6319, 2023);
- the tokenizer called on raw text inside a DataLoader's ``collate_fn``: every epoch
  tokenizes the corpus again (nelson-liu, marin-community/marin#900, 2025);
- ``np.vectorize`` of a function NumPy already broadcasts: "essentially a for loop" (NumPy's
  documentation, quoted by pyos on mnielsen/neural-networks-and-deep-learning#16, 2015: ~5x);
- a device tensor filled row by row in a Python loop, in a function a model's forward runs:
  one small kernel launch per row (dabeschte, huggingface/diffusers#10764, 2025: 20-70x).

Under existing ids, read by helpers the older rules call: a loader handed to Lightning's
``trainer.fit(model, train_dataloaders=...)`` counts as a Lightning loader
(``gap_rules.fit_loaders``, for ``script.dataloader-workers-respawn`` and
``script.dataloader-no-pin-memory``; qiuqiao/SOFA#20); a DataLoader without ``num_workers``
over a data set this file does not define, whose batches a training loop copies to the GPU
(``script.dataloader-workers``; EthoML/VAME#220); a ``GradScaler`` built unconditionally
under ``if fp16 or bf16:`` for an autocast dtype chosen between them (``script.gradscaler-bf16``;
huggingface/transformers#21428). Those three live beside the rules they extend
(``gap_rules.fit_loaders``, ``setup_rules.scaler_for_chosen_dtype`` and
``setup_rules.unset_workers``), so no module imports a later round's.
"""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import LOOPS, const, keyword, last_name, walk
from devicebench.script_check.context import Context, rule
from devicebench.script_check.kinds import _collate_functions, repeat_site, scope_of

# -- TF1 graph ops built per call ----------------------------------------------------------

_GRAPH_MODE = ("tensorflow.Session", "tensorflow.compat.v1.Session", "tensorflow.placeholder",
               "tensorflow.compat.v1.placeholder", "tensorflow.InteractiveSession")
_NOT_OPS = ("Session", "ConfigProto", "GPUOptions", "device", "name_scope", "variable_scope",
            "global_variables_initializer", "get_default_graph", "reset_default_graph")


def _graph_mode(ctx: Context) -> bool:
    return any(ctx.resolve(c.func) in _GRAPH_MODE for c in ctx.calls())


@rule("script.graph-built-per-call",
      "TensorFlow graph ops built on every call",
      "in graph mode (`tf.Session`) every `tf.` op call adds nodes to the default graph; "
      "built inside {where}, the graph grows by a copy of them on each call, and each "
      "`sess.run` works on a larger graph (cleverhans-lab/cleverhans#552, goodfeli: the "
      "tutorial got slower every epoch until the accuracy ops were built once)",
      "build the ops once, outside the loop (or cache them on first call), and only "
      "`sess.run` them in the loop")
def graph_built_per_call(ctx: Context) -> None:
    if not ctx.uses("tensorflow") or not _graph_mode(ctx):
        return
    seen: set[int] = set()
    for call in ctx.calls():
        q = ctx.resolve(call.func)
        if not q.startswith("tensorflow.") or q.split(".")[-1] in _NOT_OPS or (
                ".data." in q or ".train." in q or ".keras." in q):
            continue
        if isinstance(ctx.parents.get(call), ast.Call) and ctx.resolve(
                ctx.parents[call].func).startswith("tensorflow."):
            continue  # an argument of another op: the outer call carries the finding
        site = repeat_site(ctx, call)
        if site is None:
            continue
        fn = ctx.enclosing(call, (ast.FunctionDef, ast.AsyncFunctionDef))
        key = id(fn) if fn is not None else id(site[0])
        if key in seen:
            continue
        seen.add(key)
        where = f"`{fn.name}`, which the loop at {ctx.line(site[0].lineno)} calls" if (
            fn is not None and site[1] is not None) else (
            f"the loop at {ctx.line(site[0].lineno)}")
        ctx.add("script.graph-built-per-call", "info", call,
                f"`{ast.unparse(call.func)}` is added to the graph on every call of {where}",
                where=where)


# -- HDF5 file opened per item -------------------------------------------------------------

_OPENERS = ("h5py.File", "tables.open_file", "tables.openFile", "zarr.open", "netCDF4.Dataset")


def _per_item_path(path: ast.AST) -> bool:
    """The path is chosen per item (``self.files[idx]``, an f-string of the index): each
    item is its own file, and opening it is the read."""
    return isinstance(path, ast.Subscript | ast.JoinedStr | ast.BinOp | ast.Call)


def _lazily_cached(ctx: Context, call: ast.Call) -> bool:
    """``if self.h5 is None: self.h5 = h5py.File(...)``: opened once per worker."""
    parent = ctx.parents.get(call)
    return isinstance(parent, ast.Assign) and any(
        isinstance(t, ast.Attribute) for t in parent.targets) and isinstance(
        ctx.parents.get(parent), ast.If)


@rule("script.file-open-per-item",
      "a data file opened for every item",
      "`{opener}` opens (and the function closes) the same file for each item it reads: "
      "the open -- metadata, B-tree and chunk-cache set-up -- costs more than reading one "
      "item (ctlearn-project/ctlearn#2: ~30% of loading time on 1000 examples)",
      "open the file once (in `__init__`, or lazily once per worker: `if self.f is None: "
      "self.f = h5py.File(path, 'r')`) and keep the handle")
def file_open_per_item(ctx: Context) -> None:
    for call in ctx.calls():
        q = ctx.resolve(call.func)
        if q not in _OPENERS or not call.args or _lazily_cached(ctx, call):
            continue
        site = repeat_site(ctx, call)
        fn = ctx.enclosing(call, (ast.FunctionDef, ast.AsyncFunctionDef))
        if site is None or fn is None or _per_item_path(call.args[0]):
            continue
        ctx.add("script.file-open-per-item", "info", call,
                f"`{fn.name}` opens `{ast.unparse(call.args[0])[:30]}` on every call; "
                f"the loop at {ctx.line(site[0].lineno)} calls it per item",
                opener=ast.unparse(call.func))


# -- tokenizing map without batched=True ---------------------------------------------------

def _tokenizes(ctx: Context, fn: ast.AST | None) -> bool:
    """``fn`` (a function of this file, a ``partial`` of one, a lambda) calls a tokenizer."""
    if isinstance(fn, ast.Call) and last_name(fn) == "partial" and fn.args:
        return _tokenizes(ctx, fn.args[0])
    body: list[ast.AST] = []
    if isinstance(fn, ast.Lambda):
        body = [fn.body]
    elif isinstance(fn, ast.Name) and fn.id in ctx.funcs:
        body = list(ctx.funcs[fn.id].body)
    return any(isinstance(c, ast.Call) and "tokeniz" in ast.unparse(c.func).lower()
               for c in walk(body))


@rule("script.unbatched-map",
      "`Dataset.map` {does} one example per call",
      "without `batched=True` the function is called once per example, so a fast "
      "tokenizer never sees more than one text and each call pays Python and Arrow overhead "
      "(huggingface/datasets#6319, mariosasko: \"You should use the batched `map` for the "
      "best performance ... the fast tokenizers can process a batch's samples in parallel\")",
      "`dataset.map(tokenize_fn, batched=True)` with a function that takes and returns "
      "lists (`tokenizer(batch[\"text\"], ...)` already does); add `num_proc=` for more cores")
def unbatched_map(ctx: Context) -> None:
    if not ctx.uses("datasets"):
        return
    for call in ctx.calls():
        if last_name(call) != "map" or not isinstance(call.func, ast.Attribute) or not call.args:
            continue
        batched = keyword(call, "batched")
        if batched is not None and const(batched) is not False:
            continue
        if _tokenizes(ctx, call.args[0]):
            ctx.add("script.unbatched-map", "info", call,
                    "batched=False" if batched is not None else "`batched` is not set (False)",
                    does="tokenizes")


# -- tokenizer in collate_fn ---------------------------------------------------------------

_ENCODERS = ("encode", "batch_encode_plus", "encode_batch", "encode_plus")


def _tokenizer_call(c: ast.AST) -> bool:
    if not isinstance(c, ast.Call):
        return False
    f = c.func
    if isinstance(f, ast.Name):
        return "tokenizer" in f.id.lower()
    return isinstance(f, ast.Attribute) and (f.attr.lower().endswith("tokenizer") or (
        f.attr in _ENCODERS and "tokenizer" in ast.unparse(f.value).lower()))


@rule("script.tokenize-in-collator",
      "the DataLoader's collate_fn tokenizes raw text",
      "`{fn}` runs once per batch, so every epoch tokenizes the whole corpus again on the "
      "loader's workers (marin-community/marin#900: pre-tokenizing the data set up front "
      "made BERT training faster and lighter on memory)",
      "tokenize once before training (`dataset.map(tokenize, batched=True)`, saved to disk) "
      "and let the collator only pad and mask the token ids")
def tokenize_in_collator(ctx: Context) -> None:
    for fn in _collate_functions(ctx):
        call = next((c for c in walk(fn.body) if _tokenizer_call(c)), None)
        if call is not None:
            ctx.add("script.tokenize-in-collator", "info", call,
                    f"`{fn.name}` is a DataLoader's collate_fn", fn=fn.name)


# -- np.vectorize of a broadcasting function -----------------------------------------------

def _broadcasts(ctx: Context, fn: ast.FunctionDef) -> bool:
    """``fn`` is one ``return`` of arithmetic and NumPy calls on its parameters: NumPy
    already applies it elementwise to arrays."""
    if len(fn.body) != 1 or not isinstance(fn.body[0], ast.Return) or fn.body[0].value is None:
        return False
    return all(isinstance(n, ast.BinOp | ast.UnaryOp | ast.Name | ast.Constant | ast.Load
                          | ast.operator | ast.unaryop | ast.Attribute | ast.Call)
               for n in ast.walk(fn.body[0].value)) and all(
        ctx.resolve(c.func).startswith("numpy.") for c in ast.walk(fn.body[0].value)
        if isinstance(c, ast.Call))


@rule("script.np-vectorize",
      "`np.vectorize` of a function NumPy already applies elementwise",
      "`np.vectorize` \"is provided primarily for convenience, not for performance. The "
      "implementation is essentially a for loop\" (NumPy's documentation): `{fn}` is plain "
      "arithmetic and NumPy ufuncs, which broadcast over whole arrays in C "
      "(mnielsen/neural-networks-and-deep-learning#16: training ~5x faster without it)",
      "call `{fn}` on the array directly")
def np_vectorize(ctx: Context) -> None:
    for call in ctx.calls():
        if ctx.resolve(call.func) != "numpy.vectorize" or not call.args:
            continue
        target = call.args[0]
        fn = ctx.funcs.get(target.id) if isinstance(target, ast.Name) else None
        if isinstance(fn, ast.FunctionDef) and _broadcasts(ctx, fn):
            ctx.add("script.np-vectorize", "info", call,
                    f"`{fn.name}` is one NumPy expression", fn=fn.name)


# -- a device tensor filled row by row -----------------------------------------------------

_MAKERS = ("torch.full", "torch.zeros", "torch.ones", "torch.empty")


def _called_from_forward(ctx: Context, fn: ast.AST) -> bool:
    name = getattr(fn, "name", "")
    for c in ctx.calls():
        if last_name(c) == name:
            caller = ctx.enclosing(c, (ast.FunctionDef, ast.AsyncFunctionDef))
            if caller is not None and caller.name in ("forward", "__call__"):
                return True
    return False


def row_fill_loops(ctx: Context) -> None:
    """``script.per-sample-python-loop`` for ``for i in range(n): mask[i, ...] = v`` on a
    tensor made on the device in the same function, which a forward pass or a loop runs."""
    if not ctx.uses("torch"):
        return
    for loop in ast.walk(ctx.tree):
        if not (isinstance(loop, ast.For) and isinstance(loop.target, ast.Name)
                and isinstance(loop.iter, ast.Call) and last_name(loop.iter) == "range"):
            continue
        fn = scope_of(ctx, loop)
        made = {t.id for s in walk(getattr(fn, "body", [])) if isinstance(s, ast.Assign)
                and isinstance(s.value, ast.Call) and ctx.resolve(s.value.func) in _MAKERS
                and keyword(s.value, "device") is not None
                for t in s.targets if isinstance(t, ast.Name)}
        var = loop.target.id
        fills = [s for s in loop.body if isinstance(s, ast.Assign) and any(
            isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id in made
            and any(isinstance(n, ast.Name) and n.id == var for n in ast.walk(t.slice))
            for t in s.targets)]
        if not fills:
            continue
        if repeat_site(ctx, loop.iter) is None and not (
                isinstance(fn, ast.FunctionDef) and _called_from_forward(ctx, fn)):
            continue
        if isinstance(ctx.enclosing(loop, LOOPS), ast.For):
            continue
        tensor = fills[0].targets[0].value.id  # type: ignore[attr-defined]
        ctx.add("script.per-sample-python-loop", "info", loop,
                f"fills `{tensor}`, a device tensor, one row per iteration (one kernel launch "
                f"each) in `{getattr(fn, 'name', 'the module')}`, which runs on every forward",
                what=ctx.code(loop.lineno)[:50])
