"""corpus_round18's dev forms (issue 24, round 19), under existing ids, all ``info`` and
added late (``Context.add_late``: none takes an older warning's place). Most rest on one
analysis extension, ``hot``: code a loop runs, followed through calls of the file's
functions and methods by name (and a module's ``forward`` through calls of its instances),
so a helper two calls below the training loop counts as per-iteration code.

- ``repeat_interleave`` without ``output_size=`` in hot code: the output size is computed
  from the repeats on the device and read back (``script.sync-in-step-loop``; diffusers#11030,
  vllm-project/vllm#36723);
- ``.nonzero()`` in hot code (its size is data-dependent: a sync) (diffusers#4347);
- ``torch.cuda.synchronize()`` inside a loop body that records CUDA events: every iteration
  drains the queue (flashinfer-ai/flashinfer-bench#195);
- a loop over ``t.unique()`` / ``t.nonzero()`` / ``t.tolist()``, and an ``if`` whose test is a
  tensor reduction (``.any()``/``.all()``/``.sum()``, compared or wrapped in ``bool``), in hot
  torch code (tier4/autoware-ml#121, PrimeIntellect-ai/prime-rl#2951);
- a loop over ``t.split(...)``/``.unbind()``/``.chunk(...)`` pieces (also zipped) in hot code
  (``script.per-sample-python-loop``; prime-rl#2951);
- ``x.mul_(d).add_(y, ...)`` per tensor in a loop: a per-parameter EMA
  (``script.ema-out-of-place``; facebookresearch/d2go#493: ``torch._foreach_*``/``lerp_``);
- ``tf.summary.*`` in a Keras callback's per-batch hook (``script.summary-every-step``;
  keras-team/keras#17052);
- ``ds.map(map_func=f)`` read like ``ds.map(f)`` by the parse-before-batch form
  (``script.unbatched-map``; XierHacker/LearningTensorFlow#3);
- ``ShardedGradScaler()`` where the file's dtypes are bfloat16 only (``script.gradscaler-bf16``;
  facebookresearch/multimodal#433);
- ``torch.tensor(<list expression>, device=...)`` in hot code (``script.tensor-from-python-list``;
  vllm-project/vllm-ascend#5298);
- a device tensor indexed by NumPy random indices and moved with ``.to`` in hot code
  (``script.per-step-copy``; gbionics/amp-rsl-rl#12);
- a ``torch.compile``'d callable called in a loop over parameters (every shape a new guard set
  and compile) (``script.recompile-shapes``; Koratahiu/Advanced_Optimizers#6).

Sources: the threads above (https://github.com/<owner>/<repo>/issues/<n> or ``/pull/<n>``).
"""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import LOOPS, keyword, last_name, walk
from devicebench.script_check.context import Context
from devicebench.script_check.gap18_rules import _batched_after, _parses_one
from devicebench.script_check.round18_rules import per_iteration

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_REDUCE = ("any", "all", "sum", "max", "min")
_PIECES = ("split", "unbind", "chunk", "tensor_split")
_FIX = ("keep the value on the device (pass the known size, e.g. `output_size=`, or compute "
        "it once outside the loop) so the host does not wait for the GPU every iteration")


def hot(ctx: Context, node: ast.AST, depth: int = 3) -> bool:
    """Whether ``node`` runs per iteration of a loop, also through calls of the file's
    functions (by name) and of a module's instances (its ``forward``)."""
    if per_iteration(ctx, node):
        return True
    fn = ctx.enclosing(node, _FUNCS)
    if fn is None or depth == 0:
        return False
    names = {fn.name}
    cls = ctx.enclosing(fn, (ast.ClassDef,))
    if fn.name == "forward" and cls is not None:
        names |= _instances(ctx, cls.name)
    return any(last_name(c) in names and c is not node and hot(ctx, c, depth - 1)
               for c in ctx.calls() if ctx.enclosing(c, _FUNCS) is not fn)


def _instances(ctx: Context, cls: str) -> set[str]:
    out = set()
    for n in ast.walk(ctx.tree):
        if isinstance(n, ast.Assign) and any(
                isinstance(c, ast.Call) and last_name(c) == cls for c in ast.walk(n.value)):
            out |= {last_name(t) for t in n.targets if last_name(t)}
    return out


def _sync(ctx: Context, node: ast.AST, what: str) -> None:
    ctx.add_late("script.sync-in-step-loop", "info", node, what, fixtext=_FIX)


def _torch_syncs(ctx: Context) -> None:
    for c in ctx.calls():
        name = last_name(c)
        if name == "repeat_interleave" and keyword(c, "output_size") is None and hot(ctx, c):
            _sync(ctx, c, "`repeat_interleave` without `output_size=` computes its output "
                          "size on the device and reads it back, in code a loop runs")
        elif name == "nonzero" and isinstance(c.func, ast.Attribute) and hot(ctx, c):
            _sync(ctx, c, "`.nonzero()` has a data-dependent size: the host waits for it, in "
                          "code a loop runs")
        elif ctx.resolve(c.func) == "torch.cuda.synchronize":
            loop = ctx.enclosing(c, LOOPS)
            if loop is not None and any(last_name(r) == "record" for r in ctx.calls(loop.body)):
                _sync(ctx, c, "`torch.cuda.synchronize()` in every iteration of a loop that "
                              "records CUDA events: the queue is drained each time")


def _reduction_test(test: ast.expr) -> bool:
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "bool":
        test = test.args[0] if test.args else test
    if isinstance(test, ast.Compare):
        test = test.left
    return (isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute)
            and test.func.attr in _REDUCE and not test.args)


def _loops_over_tensors(ctx: Context) -> None:
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, ast.For):
            continue
        it = loop.iter
        if (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute)
                and it.func.attr in ("unique", "nonzero", "tolist") and hot(ctx, loop)):
            _sync(ctx, loop, f"the loop goes over `.{it.func.attr}()` of a tensor: its values "
                             "are read on the host")
            _indexed_by_element(ctx, loop)
        parts = it.args if isinstance(it, ast.Call) and last_name(it) == "zip" else [it]
        if any(isinstance(p, ast.Call) and isinstance(p.func, ast.Attribute)
               and p.func.attr in _PIECES for p in parts + _zip_of_name(ctx, loop)) \
                and hot(ctx, loop):
            ctx.add_late("script.per-sample-python-loop", "info", loop,
                         "a Python loop over the pieces of a split tensor: small ops per piece",
                         what=ctx.code(loop.lineno))
    for s in ast.walk(ctx.tree):
        if isinstance(s, ast.If) and _reduction_test(s.test) and ctx.enclosing(
                s, LOOPS) is not None and hot(ctx, s):
            _sync(ctx, s, "an `if` on a tensor reduction reads it on the host, per iteration")


def _indexed_by_element(ctx: Context, loop: ast.For) -> None:
    """A subscript by the element of a loop over a tensor: a 0-d tensor used as an index is
    read on the host (``probabilities[:, class_index]``)."""
    if not isinstance(loop.target, ast.Name) or ast.unparse(loop.iter).endswith(".tolist()"):
        return
    for n in walk(loop.body):
        if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Tuple) and any(
                isinstance(e, ast.Name) and e.id == loop.target.id for e in n.slice.elts):
            _sync(ctx, n, "a tensor element of the loop used as an index: read on the host")


def _zip_of_name(ctx: Context, loop: ast.For) -> list[ast.expr]:
    """The arguments of ``zip(...)`` bound to the name a loop iterates over."""
    if not isinstance(loop.iter, ast.Name):
        return []
    fn = ctx.enclosing(loop, _FUNCS) or ctx.tree
    for n in walk(fn.body):
        if (isinstance(n, ast.Assign) and any(last_name(t) == loop.iter.id for t in n.targets)
                and isinstance(n.value, ast.Call) and last_name(n.value) == "zip"):
            return list(n.value.args)
    return []


def _ema_chain(ctx: Context) -> None:
    for c in ctx.calls():
        f = c.func
        if (isinstance(f, ast.Attribute) and f.attr == "add_" and isinstance(f.value, ast.Call)
                and last_name(f.value) == "mul_" and ctx.enclosing(c, LOOPS) is not None
                and keyword(c, "alpha") is not None):
            ctx.add_late("script.ema-out-of-place", "info", c,
                         "`mul_(...).add_(...)` per tensor in a Python loop: two kernels per "
                         "tensor; `torch._foreach_lerp_` (or `lerp_`) does all in one")


def _sharded_scaler(ctx: Context) -> None:
    text = ast.unparse(ctx.tree)
    if "bfloat16" not in text or "float16" in text.replace("bfloat16", ""):
        return
    for c in ctx.calls():
        if last_name(c) == "ShardedGradScaler" and keyword(c, "enabled") is None:
            ctx.add_late("script.gradscaler-bf16", "info", c,
                         "the file's mixed precision is bfloat16 only: the scaler is not needed")


def _tensor_of_list(ctx: Context) -> None:
    for c in ctx.calls():
        if ctx.resolve(c.func) == "torch.tensor" and _list_binop(c) and hot(ctx, c):
            ctx.add_late("script.tensor-from-python-list", "info", c,
                         "a tensor built on the device from a Python list, in code a loop runs",
                         ctor="torch.tensor", how="a Python list")


def _list_binop(c: ast.Call) -> bool:
    return bool(c.args) and isinstance(c.args[0], ast.BinOp) and isinstance(
        c.args[0].left, ast.List) and keyword(c, "device") is not None


def _numpy_index_copy(ctx: Context) -> None:
    np_names = set()
    for n in ast.walk(ctx.tree):
        if (isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
                and ctx.resolve(n.value.func).startswith("numpy.random.")):
            np_names |= {last_name(t) for t in n.targets}
    for c in ctx.calls():
        v = c.func.value if isinstance(c.func, ast.Attribute) else None
        if (last_name(c) == "to" and isinstance(v, ast.Subscript)
                and last_name(v.slice) in np_names and hot(ctx, c)):
            ctx.add_late("script.per-step-copy", "info", c,
                         "a device tensor indexed with NumPy indices made on the host, per "
                         "iteration: the indices are copied over each time",
                         data=ast.unparse(v.value))


def _compiled_per_parameter(ctx: Context) -> None:
    compiled = set()
    for n in ast.walk(ctx.tree):
        if isinstance(n, ast.Assign) and any(
                isinstance(c, ast.Call) and ctx.resolve(c.func) == "torch.compile"
                for c in ast.walk(n.value)):
            compiled |= {last_name(t) for t in n.targets}
    for c in ctx.calls():
        if last_name(c) not in compiled or not last_name(c):
            continue
        loop = ctx.enclosing(c, (ast.For,))
        if loop is not None and "param" in ast.unparse(loop.iter):
            ctx.add_late("script.recompile-shapes", "info", c,
                         "a compiled function called once per parameter: each new shape (and "
                         "each changing Python number it reads) is a new guard and compile",
                         how="`torch.compile`",
                         fixtext="compile the whole step once (or group parameters by shape "
                                 "and use `torch._foreach_*` ops)")


def _summary_in_batch_hook(ctx: Context) -> None:
    for fn in ast.walk(ctx.tree):
        if isinstance(fn, ast.FunctionDef) and fn.name in ("on_train_batch_end", "on_batch_end",
                                                           "on_train_batch_begin"):
            for c in ctx.calls(fn.body):
                if ctx.resolve(c.func).startswith("tensorflow.summary."):
                    ctx.add_late("script.summary-every-step", "info", c,
                                 "a summary written in a per-batch callback hook")


def _map_func_keyword(ctx: Context) -> None:
    for c in ctx.calls():
        f = keyword(c, "map_func")
        if (isinstance(c.func, ast.Attribute) and c.func.attr == "map" and not c.args
                and f is not None and _parses_one(ctx, f) and _batched_after(ctx, c)):
            ctx.add_late("script.unbatched-map", "info", c,
                         f"`{ast.unparse(f)[:30]}` parses one record per call, and the batch "
                         "is made only after the map", does="parses")
