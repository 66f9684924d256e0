"""corpus_round18's held-out misses written generally (issue 24, round 20, step 0): analysis
gaps, under existing ids, all ``info`` and added late (``Context.add_late``: none takes an
older warning's place).

Per-batch code. Besides ``round19_rules.hot`` (code a loop of the file runs, through calls),
library code that the file never loops over is taken as per-batch when it is (a) a module's
``forward`` -- a ``torch.nn.Module`` subclass's ``forward``, and the file's functions and
methods that it calls (by name, up to three calls deep), when the file builds no instance
of the module (library code; where the file builds and calls it, ``hot`` decides) -- or
(b) a method of a class of the file whose instance is passed as an argument into a call
made in a loop (the callee uses it per iteration; ``model(x, dispatcher=d)``).
``__init__`` never counts.

- ``ds.map(f)`` before ``batch`` when ``f`` (a function of the file or a lambda) is
  vectorizable: its body is straight-line code (no ``if``/loop) whose calls are only
  ``tf.io.decode_csv``, ``tf.io.parse_single_example``/``parse_single_sequence_example``,
  elementwise or reshaping-free TF ops (``tf.cast``, ``tf.one_hot``, ``tf.squeeze``,
  ``tf.equal``, arithmetic, ``tf.math.*``, ``tf.image.convert_image_dtype``; the parsers'
  feature specs ``tf.io.FixedLenFeature`` and kin), ``dict``/``zip``
  and dict methods, with at least one such call, arithmetic or subscript. The batch may come
  later in the chain (``.map(f).shuffle(n).batch(b)``) or on a name the mapped data set is
  passed to (``b = a.shuffle(n)``; ``b.batch(...)``). Image decoding is NOT counted: the
  ``tf.io.decode_*`` image ops take one string, so the map cannot move after ``batch``
  (``script.unbatched-map``; DLPerf issues citing the tf.data guide's "Vectorizing mapping":
  Morizeyao/Decoders-Chinese-TF2.0#12, flink-extended/dl-on-flink#517,
  jiajunhua/dragen1860-Deep-Learning-with-TensorFlow-book#2, Keyird/DeepLearning-TensorFlow2#5);
- ``x.to(dtype=..., device=...)`` without ``non_blocking`` of the elements of a per-batch
  collection (a comprehension or loop variable) in per-batch code (``script.blocking-h2d-copy``;
  metatensor/metatrain#758);
- ``dist.gather_object``/``all_gather_object``/``broadcast_object_list``/``scatter_object_list``
  in per-batch code: pickled, host-side collectives every step (``script.sync-in-step-loop``;
  radixark/miles_diffusion#70);
- ``.to("cpu")``/``.cpu()``/``.tolist()`` of a tensor the function receives (a parameter or an
  attribute of one, also through a local name) in per-batch code (``script.sync-in-step-loop``;
  sgl-project/sglang#27689, #29420; vllm-project/vllm-omni#5067; not in a ``return``: what a
  helper returns converted is the caller's choice), and ``torch.tensor(lst,
  device=...)`` of a list made by ``.tolist()`` there (``script.tensor-from-python-list``);
- ``int(t[i])``/``int(t.sum())`` of a tensor made by a ``torch.*`` call in per-batch code
  (pytorch/torchtitan#2440);
- ``repeat_interleave`` of tensor repeats without ``output_size=`` in per-batch code as
  above (torchtitan#2440, #3274; ``hot`` alone covered only code a loop of the file reaches);
- a Python loop over a received tensor (or ``enumerate``/``zip`` of it) whose elements bound a
  slice of a tensor, in per-batch code: each bound is a 0-d device tensor read back
  (vllm-project/vllm#16743, vllm-omni#5067).

Sources: the threads above (https://github.com/<owner>/<repo>/issues/<n> or ``/pull/<n>``).
"""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import LOOPS, keyword, last_name, walk
from devicebench.script_check.context import Context
from devicebench.script_check.gap18_rules import _batched_after
from devicebench.script_check.round19_rules import _instances, hot

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_TF_OK = {"cast", "one_hot", "squeeze", "equal", "not_equal", "add", "subtract", "multiply",
          "divide", "truediv", "maximum", "minimum", "clip_by_value", "abs", "exp", "log",
          "sqrt", "square", "greater", "less", "logical_and", "logical_or", "io.decode_csv",
          "io.parse_single_example", "io.parse_single_sequence_example",
          "image.convert_image_dtype", "io.FixedLenFeature", "io.VarLenFeature",
          "io.FixedLenSequenceFeature"}
_PY_OK = {"dict", "zip", "tuple", "list", "len"}
_DICT_OK = {"pop", "get", "items", "keys", "values"}
_DS_STEPS = {"shuffle", "repeat", "prefetch", "cache", "map", "filter", "take", "skip"}
_OBJECT_COLLECTIVES = {"torch.distributed." + n for n in (
    "gather_object", "all_gather_object", "broadcast_object_list", "scatter_object_list")}
_FIX = ("keep the value on the device, or pass the host copy the caller already has (a CPU "
        "mirror, a size known on the host), so the host does not wait for the GPU each batch")


def per_batch(ctx: Context, node: ast.AST) -> bool:
    """``hot``, or forward code, or a method of an instance a loop passes on (see above)."""
    if hot(ctx, node):
        return True
    fn = ctx.enclosing(node, _FUNCS)
    return fn is not None and fn.name != "__init__" and (
        _forward_code(ctx, fn, 3) or _passed_into_loop(ctx, fn))


def _forward_code(ctx: Context, fn: ast.AST, depth: int) -> bool:
    cls = ctx.enclosing(fn, (ast.ClassDef,))
    if fn.name == "forward" and cls is not None and any(
            last_name(b) == "Module" for b in cls.bases):
        return not _instances(ctx, cls.name)  # built here: ``hot`` decides how often
    if depth == 0:
        return False
    for c in ctx.calls():
        g = ctx.enclosing(c, _FUNCS)
        if last_name(c) == fn.name and g is not None and g is not fn and _forward_code(
                ctx, g, depth - 1):
            return True
    return False


def _passed_into_loop(ctx: Context, fn: ast.AST) -> bool:
    cls = ctx.enclosing(fn, (ast.ClassDef,))
    names = _instances(ctx, cls.name) if cls is not None else set()
    for c in ctx.calls() if names else []:
        values = list(c.args) + [k.value for k in c.keywords]
        if ctx.enclosing(c, LOOPS) is not None and any(
                isinstance(v, ast.Name) and v.id in names for v in values):
            return True
    return False


def _vectorizable(ctx: Context, f: ast.AST) -> bool:
    if isinstance(f, ast.Lambda):
        body: list[ast.AST] = [f.body]
    elif isinstance(f, ast.Name) and f.id in ctx.funcs:
        body = list(ctx.funcs[f.id].body)
    else:
        return False
    if any(isinstance(n, (ast.If, ast.For, ast.While, ast.With, ast.Try, ast.FunctionDef))
           for n in walk(body)):
        return False
    work = False
    for n in walk(body):
        if isinstance(n, ast.Call):
            name = ctx.resolve(n.func)
            if name.startswith("tensorflow.") and (
                    name[11:] in _TF_OK or name.startswith("tensorflow.math.")):
                work = True
            elif not (isinstance(n.func, ast.Name) and n.func.id in _PY_OK) and not (
                    isinstance(n.func, ast.Attribute) and n.func.attr in _DICT_OK
                    and not name.startswith("tensorflow.")):
                return False
        elif isinstance(n, (ast.BinOp, ast.Subscript)):
            work = True
    return work


def _batched_later(ctx: Context, call: ast.Call) -> bool:
    if _batched_after(ctx, call):
        return True
    node: ast.AST = call
    while isinstance(ctx.parents.get(node), ast.Attribute):  # .map(f).shuffle(n).batch(b)
        attr = ctx.parents[node]
        if attr.attr in ("batch", "padded_batch"):
            return True
        outer = ctx.parents.get(attr)
        if attr.attr not in _DS_STEPS or not isinstance(outer, ast.Call):
            return False
        node = outer
    stmt = ctx.parents.get(node)
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)):
        return False
    names, body = {stmt.targets[0].id}, getattr(ctx.parents.get(stmt), "body", [])
    for later in body[body.index(stmt) + 1:] if stmt in body else []:
        for c in walk([later]):
            if (isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                    and isinstance(c.func.value, ast.Name) and c.func.value.id in names):
                if c.func.attr in ("batch", "padded_batch"):
                    return True
        if (isinstance(later, ast.Assign) and len(later.targets) == 1
                and isinstance(later.targets[0], ast.Name) and isinstance(later.value, ast.Call)
                and isinstance(later.value.func, ast.Attribute)
                and later.value.func.attr in _DS_STEPS
                and isinstance(later.value.func.value, ast.Name)
                and later.value.func.value.id in names):
            names.add(later.targets[0].id)
    return False


def _vectorizable_map_before_batch(ctx: Context) -> None:
    for call in ctx.calls():
        if not (isinstance(call.func, ast.Attribute) and call.func.attr == "map"):
            continue
        f = call.args[0] if call.args else keyword(call, "map_func")
        if f is not None and _vectorizable(ctx, f) and _batched_later(ctx, call):
            ctx.add_late("script.unbatched-map", "info", call,
                         f"`{ast.unparse(f)[:30]}` is elementwise or a batchable parse, and "
                         "the batch is made only after the map", does="transforms",
                         why="a cheap function mapped before `batch` runs once per example, "
                             "and the per-call overhead dominates; the tf.data guide "
                             "(\"Vectorizing mapping\") batches first and maps the function "
                             "over whole batches (DLPerf, dl-on-flink#517)",
                         fix="`.batch(n)` first, then `.map(f, num_parallel_calls="
                             "tf.data.AUTOTUNE)` (`tf.io.parse_example` for a record parser)")


def _loop_bound(ctx: Context, node: ast.AST) -> set[str]:
    """Names bound by the comprehensions and loops around ``node``."""
    out: set[str] = set()
    for p in _ancestors(ctx, node):
        gens = getattr(p, "generators", None)
        for g in gens or []:
            out |= {n.id for n in ast.walk(g.target) if isinstance(n, ast.Name)}
        if isinstance(p, LOOPS[:2]):
            out |= {n.id for n in ast.walk(p.target) if isinstance(n, ast.Name)}
    return out


def _ancestors(ctx: Context, node: ast.AST) -> list[ast.AST]:
    out, p = [], ctx.parents.get(node)
    while p is not None and not isinstance(p, _FUNCS):
        out.append(p)
        p = ctx.parents.get(p)
    return out


def _keyword_copies(ctx: Context) -> None:
    for c in ctx.calls():
        if not (isinstance(c.func, ast.Attribute) and c.func.attr == "to"
                and keyword(c, "device") is not None and keyword(c, "non_blocking") is None
                and isinstance(c.func.value, ast.Name)):
            continue
        fn = ctx.enclosing(c, _FUNCS)
        if fn is not None and c.func.value.id in _loop_bound(ctx, c) and per_batch(
                ctx, fn.body[0]):  # the function runs per batch, not only its comprehension
            ctx.add_late("script.blocking-h2d-copy", "info", c,
                         f"`{ast.unparse(c)[:50]}` copies each element of a batch in "
                         f"`{fn.name}`, which runs per batch, with a blocking copy",
                         loader="the file does not show the batches pinned")


def _params(fn: ast.AST) -> set[str]:
    a = fn.args
    return {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs} - {"self", "cls"}


def _received(ctx: Context, expr: ast.AST, fn: ast.AST, depth: int = 3) -> bool:
    """``expr`` is rooted at a parameter of ``fn`` (also through a local ``x = p.attr``)."""
    while isinstance(expr, (ast.Attribute, ast.Subscript, ast.Call)):
        expr = expr.func if isinstance(expr, ast.Call) else expr.value
    if not isinstance(expr, ast.Name):
        return False
    params = _params(fn)
    if expr.id in params:
        return True
    return depth > 0 and any(
        any(last_name(t) == expr.id for t in s.targets) and isinstance(s.value, ast.Attribute)
        and _received(ctx, s.value, fn, depth - 1)
        for s in walk(fn.body) if isinstance(s, ast.Assign))


def _assigned_from(fn: ast.AST, name: str) -> list[ast.expr]:
    return [s.value for s in walk(fn.body) if isinstance(s, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == name for t in s.targets)]


def _per_batch_call(ctx: Context, c: ast.Call) -> None:
    fn = ctx.enclosing(c, _FUNCS)
    name, attr = ctx.resolve(c.func), getattr(c.func, "attr", "")
    if fn is None or fn.name == "__init__":
        return
    what = ""
    if name in _OBJECT_COLLECTIVES:
        what = (f"`{last_name(c)}` pickles Python objects and waits for every rank, in code "
                "run per step (a device `all_reduce` of a metric buffer does not)")
    elif (attr == "cpu" and not c.args or attr == "to" and c.args and isinstance(
            c.args[0], ast.Constant) and c.args[0].value == "cpu" or attr == "tolist") and (
            _received(ctx, c.func.value, fn)) and not _returned(ctx, c):
        what = f"`.{attr}(...)` of a tensor `{fn.name}` receives: a blocking device-to-host copy"
    elif name == "torch.tensor" and c.args and isinstance(c.args[0], ast.Name) and keyword(
            c, "device") is not None and any(
            isinstance(v, ast.Call) and last_name(v) == "tolist"
            for v in _assigned_from(fn, c.args[0].id)) and per_batch(ctx, c):
        ctx.add_late("script.tensor-from-python-list", "info", c,
                     "a list read back with `.tolist()` copied back to the device, per batch",
                     ctor="torch.tensor", how="a list read from the device with `.tolist()`")
        return
    elif isinstance(c.func, ast.Name) and c.func.id == "int" and len(c.args) == 1 and (
            _torch_made(ctx, fn, c.args[0])):
        what = "`int()` of a device tensor's element or reduction reads it back"
    elif attr == "repeat_interleave" and keyword(c, "output_size") is None and not (
            isinstance(_repeats(ctx, c), ast.Constant)):
        what = ("`repeat_interleave` without `output_size=` computes its output size on the "
                "device and reads it back")
    if what and per_batch(ctx, c):
        ctx.add_late("script.sync-in-step-loop", "info", c, what + ", per batch",
                     fixtext=_FIX)


def _repeats(ctx: Context, c: ast.Call) -> ast.expr | None:
    """The ``repeats`` of ``t.repeat_interleave(r)`` / ``torch.repeat_interleave(t, r)``
    (an int repeats needs no read-back)."""
    i = 1 if ctx.resolve(c.func) == "torch.repeat_interleave" else 0
    return keyword(c, "repeats") or (c.args[i] if len(c.args) > i else None)


def _returned(ctx: Context, node: ast.AST) -> bool:
    """In a ``return``: converting what the helper returns is the caller's choice
    (``test_script_reach``)."""
    return any(isinstance(p, ast.Return) for p in _ancestors(ctx, node))


def _torch_made(ctx: Context, fn: ast.AST, arg: ast.AST) -> bool:
    if isinstance(arg, ast.Subscript):
        base = arg.value
    elif isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and (
            arg.func.attr in ("sum", "max", "min") and not arg.args):
        base = arg.func.value
    else:
        return False
    return isinstance(base, ast.Name) and any(
        isinstance(v, ast.Call) and ctx.resolve(v.func).startswith("torch.")
        for v in _assigned_from(fn, base.id))


def _slices_by_tensor_elements(ctx: Context) -> None:
    for lp in ast.walk(ctx.tree):
        fn = ctx.enclosing(lp, _FUNCS) if isinstance(lp, ast.For) else None
        if fn is None or not _iterates_received(ctx, lp.iter, fn):
            continue
        bound = {n.id for n in ast.walk(lp.target) if isinstance(n, ast.Name)}
        for sub in walk(lp.body):
            if isinstance(sub, ast.Subscript) and isinstance(sub.slice, ast.Slice) and any(
                    isinstance(n, ast.Name) and n.id in bound for part in (
                        sub.slice.lower, sub.slice.upper) if part is not None
                    for n in ast.walk(part)) and per_batch(ctx, lp):
                ctx.add_late("script.sync-in-step-loop", "info", sub,
                             "a slice bounded by the elements of a tensor the loop walks: "
                             "each bound is a 0-d device tensor read back, per element",
                             fixtext=_FIX)


def _iterates_received(ctx: Context, it: ast.AST, fn: ast.AST) -> bool:
    if isinstance(it, ast.Call) and last_name(it) in ("enumerate", "zip") and isinstance(
            it.func, ast.Name):
        return any(_iterates_received(ctx, a, fn) for a in it.args)
    return isinstance(it, (ast.Name, ast.Subscript)) and _received(ctx, it, fn)
