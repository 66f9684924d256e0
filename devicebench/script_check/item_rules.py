"""Per-item framework calls in a data-sized Python loop (issue 24, round 8: one family).

Round 7's held-out misses had one shape under several frameworks: a Python loop over the
*items* of a data set -- rows, samples, frames, files (``for i in range(len(x))``, ``for
frame in video``, ``while cap.read()``) -- whose body makes a call that has a fixed cost
per call: ``model.predict`` (Keras sets up a data adapter each time), a model call on one
sample, a tensor built from one item, a host-to-device copy of one item, a device array
indexed one element at a time (each index is a dispatched op and, read back, a transfer).
That cost is paid once per item instead of once per batch. The loop is recognised from what
it iterates (never from variable names); the call is looked for in the body and in the
functions of this file the body calls (:func:`~devicebench.script_check.dataflow.callees`).
A loop over a ``DataLoader``/``tf.data`` dataset iterates batches and is left alone.
"""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import COMPREHENSIONS, last_name, loop_body, walk
from devicebench.script_check.context import Context, rule
from devicebench.script_check.dataflow import callees
from devicebench.script_check.kinds import python_list, scope_of
from devicebench.script_check.round10_rules import tokenizer_per_item

_BATCHED = {"DataLoader", "batch", "padded_batch", "from_tensor_slices", "prefetch",
            "flow_from_directory", "image_dataset_from_directory", "as_numpy_iterator",
            "iter_batches", "batched", "shuffle", "take", "repeat", "map"}
_ITEM_SOURCES = {"numpy.load", "numpy.array", "numpy.asarray", "numpy.stack", "numpy.loadtxt",
                 "glob.glob", "os.listdir", "pandas.read_csv", "pandas.read_parquet",
                 "cv2.VideoCapture", "numpy.genfromtxt", "pathlib.Path.glob"}
_ROW_ITERATORS = {"iterrows", "itertuples", "glob", "rglob", "iterdir", "readlines"}
_TENSOR_FROM = {"torch.tensor", "torch.from_numpy", "torch.as_tensor", "torch.Tensor",
                "torch.FloatTensor", "torch.LongTensor", "tensorflow.convert_to_tensor",
                "tensorflow.constant", "jax.numpy.array", "jax.numpy.asarray",
                "mlx.core.array", "jax.device_put"}


def _bound_to(ctx: Context, name: str) -> list[ast.expr]:
    return ctx.assigns.get(name, [])


def _batched(ctx: Context, value: ast.AST) -> bool:
    """``value`` yields batches: a DataLoader, a tf.data pipeline, a Keras generator."""
    return any(isinstance(n, ast.Call) and last_name(n) in _BATCHED for n in ast.walk(value))


def _item_source(ctx: Context, node: ast.AST, scope: ast.AST) -> str:
    """How ``node`` (what a loop iterates) is a collection of data items, or ""."""
    if isinstance(node, ast.Call) and last_name(node) in ("enumerate", "tqdm", "zip",
                                                          "sorted", "list") and node.args:
        return _item_source(ctx, node.args[0], scope)
    if isinstance(node, ast.Call):
        q = ctx.resolve(node.func)
        if q in _ITEM_SOURCES or last_name(node) in _ROW_ITERATORS:
            return f"`{ast.unparse(node)[:40]}`"
        return ""
    if isinstance(node, ast.Name):
        values = _bound_to(ctx, node.id)
        if not values or any(_batched(ctx, v) for v in values):
            return ""
        if all(isinstance(v, ast.Call) and (ctx.resolve(v.func) in _ITEM_SOURCES or last_name(
                v) in _ROW_ITERATORS) for v in values):
            return f"`{node.id}` ({ast.unparse(values[0])[:40]})"
        if python_list(ctx, node, scope):
            return f"`{node.id}`, a Python list of items"
    return ""


def _sized(ctx: Context, node: ast.AST, scope: ast.AST) -> str:
    """``len(x)`` / ``x.shape[0]`` / ``x.size(0)`` of a collection that is not batched."""
    if isinstance(node, ast.Name):
        values = _bound_to(ctx, node.id)
        return _sized(ctx, values[0], scope) if len(values) == 1 else ""
    of = None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == (
            "len") and node.args:
        of = node.args[0]
    elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and (
            node.value.attr == "shape"):
        of = node.value.value
    elif isinstance(node, ast.Call) and last_name(node) == "size" and isinstance(
            node.func, ast.Attribute) and node.args:
        of = node.func.value
    if of is None:
        return ""
    name = of.id if isinstance(of, ast.Name) else ""
    if name and any(_batched(ctx, v) for v in _bound_to(ctx, name)):
        return ""  # len(loader): batches
    if isinstance(of, ast.Attribute) and of.attr in ("dataset", "data", "samples"):
        return f"the items of `{ast.unparse(of)}`"
    params = {a.arg for a in scope.args.args} if isinstance(
        scope, ast.FunctionDef | ast.AsyncFunctionDef) else set()
    if not name or any(isinstance(v, ast.Call) and "Dataset" in last_name(v)
                       for v in _bound_to(ctx, name)) or not _bound_to(ctx, name) and (
            name not in params):
        return ""
    return f"the items of `{name}`"


def item_loop(ctx: Context, loop: ast.AST) -> str:
    """What makes ``loop`` a loop over data items (samples, rows, frames, files), or ""."""
    scope = scope_of(ctx, loop)
    if isinstance(loop, ast.For):
        it = loop.iter
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == (
                "range") and len(it.args) == 1:
            return _sized(ctx, it.args[0], scope)
        return _item_source(ctx, it, scope)
    if isinstance(loop, ast.While):
        for n in walk(loop.body):
            if isinstance(n, ast.Call) and last_name(n) == "read" and isinstance(
                    n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) and any(
                    isinstance(v, ast.Call) and ctx.resolve(v.func) == "cv2.VideoCapture"
                    for v in _bound_to(ctx, n.func.value.id)):
                return f"the frames of `{n.func.value.id}`"
    return ""


def _cost(ctx: Context, call: ast.Call, loop_vars: set[str]) -> tuple[str, str] | None:
    """(what this call pays per call, the batched fix) for a call with a per-call cost."""
    name = last_name(call)
    q = ctx.resolve(call.func)
    if name in ("predict", "predict_on_batch") and isinstance(call.func, ast.Attribute) and (
            call.args):
        return ("`.predict` is built for many samples: each call sets up its batching (Keras: "
                "a data adapter and a compiled step) before it computes anything",
                "stack the items and predict them once (`model.predict(np.stack(items))`), "
                "or call the model directly, `model(x, training=False)`, when one item must "
                "go at a time")
    if isinstance(call.func, ast.Name | ast.Attribute) and ast.unparse(call.func) in ctx.models \
            and call.args:
        return ("each model call launches every layer's kernels for one item: the fixed "
                "per-call cost is paid per item",
                "stack the items into one batch and call the model once "
                "(`torch.stack(items)` / `np.stack(items)`), or batch them with a DataLoader")
    if q in _TENSOR_FROM and call.args:
        return (f"`{q.replace('tensorflow.', 'tf.')}` of one item builds a tensor (and, on a "
                f"GPU, a transfer) per item",
                "convert the whole array once, before the loop, and index the result (or "
                "stack the items and convert the stack)")
    if name in ("to", "cuda") and isinstance(call.func, ast.Attribute) and ctx.uses(
            "torch") and (name == "cuda" or call.args):
        if name == "to" and isinstance(call.args[0], ast.Attribute) and (
                call.args[0].attr.startswith(("float", "int", "long", "half", "bool"))):
            return None  # a dtype cast
        return ("a host-to-device copy per item: each copy pays a launch and a sync",
                "stack the items and copy the batch once (`torch.stack(items).to(device)`), "
                "or copy the whole tensor to the device before the loop")
    return None


def _indexed_device_array(ctx: Context, node: ast.AST, loop_vars: set[str]) -> str:
    """``a[i]`` with ``i`` the loop's index and ``a`` a JAX or MLX array (bound to a
    ``jnp``/``jax``/``mx`` call or a jitted function's result)."""
    if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and any(
            isinstance(n, ast.Name) and n.id in loop_vars for n in ast.walk(node.slice))):
        return ""
    for v in _bound_to(ctx, node.value.id):
        if isinstance(v, ast.Call):
            q = ctx.resolve(v.func)
            if q.startswith(("jax.", "mlx.core.")) or isinstance(v.func, ast.Name) and (
                    ctx.compiled.get(v.func.id) == "jax"):
                return node.value.id
    return ""


@rule("script.per-item-call",
      "framework call once per data item, in a Python loop",
      "{what}; the loop runs it once per {unit} -- {where} -- so that fixed cost is paid "
      "per item rather than per batch (ipazc/mtcnn#107: predict per frame; jax-ml/jax#390: "
      "indexing a device array per element)",
      "batch the items: one call for many items")
def per_item_call(ctx: Context) -> None:
    tokenizer_per_item(ctx)  # for text in texts: tokenizer.tokenize(text) (round 11)
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, (ast.For, ast.While, *COMPREHENSIONS)) or (
                ctx.is_compiled_scope(loop)):
            continue
        targets = [loop.target] if isinstance(loop, ast.For) else [
            g.target for g in getattr(loop, "generators", [])]
        loop_vars = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        body = loop_body(loop)
        for n in walk(body):
            arr = _indexed_device_array(ctx, n, loop_vars)
            if arr:
                ctx.add("script.per-item-call", "warning", n,
                        f"`{arr}` indexed element by element",
                        what=f"`{ast.unparse(n)[:30]}` of a device array is a dispatched op "
                             f"per element (and a transfer when read back)",
                        unit="element", where=f"the loop at {ctx.line(loop.lineno)} indexes "
                                              f"it with its own variable",
                        fix=f"copy it to the host once, `{arr} = np.asarray({arr})`, before "
                            f"the loop, or express the loop as one array operation "
                            f"(`jax.vmap`, or a `jnp` expression)")
        how = item_loop(ctx, loop) if isinstance(loop, ast.For | ast.While) else ""
        if not how:
            continue
        where = f"the loop at {ctx.line(loop.lineno)} iterates {how}"
        roots = [(s, None) for s in body] + [
            (s, c) for c, fn in callees(ctx, body, depth=2) for s in fn.body]
        for root, via in roots:
            for n in walk([root]):
                hit = _cost(ctx, n, loop_vars) if isinstance(n, ast.Call) else None
                if hit is None:
                    continue
                w = where if via is None else (
                    f"{where} and calls `{ast.unparse(via.func)[:30]}` "
                    f"({ctx.line(via.lineno)}), which makes this call")
                ctx.add("script.per-item-call", "warning", n,
                        f"{how.strip('`')[:40]} item by item", what=hit[0], unit="item",
                        where=w, fix=hit[1])
