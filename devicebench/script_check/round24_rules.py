"""Round 24's dev forms (issue 24): corpus_round23's dev half, written as general forms
under existing ids, all ``info`` and added late (``Context.add_late``), so no older
finding changes:

- a clock pair around a call of a *received* module -- a parameter whose name the file
  treats as a model (``.eval()``, ``.train()``, ``.parameters()``, ``.to(...)`` on that
  name anywhere) -- with no sync between, in a file that names a GPU: the clock reads the
  launch, not the forward (``script.unsynced-timing``; hellozhuo/pidinet#13,
  LukasHedegaard/pytorch-benchmark#15);
- a warm-up call of a jitted function whose result is dropped and not waited for, right
  before the loop that times it: its queued run is billed to the first timed iteration
  (``script.unsynced-timing``; jax-ml/jax#17724);
- a ``@contextmanager`` timer written as a class's ``__call__`` and used through an
  instance (``self.timer = Timer()``; ``with self.timer("x"):``) around JAX calls: the
  clock stops when the call has dispatched (``script.unsynced-timing``; netket/netket#1958);
- ``.predict(...)`` in a function of the file that a loop calls once per iteration with
  data built in that iteration: predict's per-call setup per batch
  (``script.keras-call-per-sample``; ai2cm/fv3net#2366);
- ``for x in xs: model(x)`` over a tensor ``xs``: one module call per row where one call
  on the batch does it (``script.per-sample-python-loop``; discuss.pytorch.org/t/102632);
- a GPU array library (cuNumeric/cupy) array made with a constant shape of fewer than
  65,536 elements (an assumed threshold) in a file that updates arrays in loops: per-op
  launch and runtime overhead dominates (``script.gpu-tiny-op``; nv-legate/cupynumeric#1080).

Sources: https://github.com/<owner>/<repo>/pull/<n> or ``/issues/<n>`` as named above;
https://discuss.pytorch.org/t/batching-question/102632.

Its timing forms (the three ``unsynced-timing`` ones) now live in :mod:`.forms_timing`.
"""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import LOOPS, const, last_name, walk
from devicebench.script_check.context import Context

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_GPU_ARRAYS = ("cunumeric", "cupynumeric", "cupy")
_TINY = 65_536  # elements: an assumed bound for "per-op overhead dominates"


def _loop_names(loop: ast.AST) -> set[str]:
    names = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)} \
        if isinstance(loop, ast.For | ast.AsyncFor) else set()
    for s in walk(loop.body):  # type: ignore[attr-defined]
        if isinstance(s, ast.Assign):
            names |= {n.id for t in s.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


def _predict_in_loop_callee(ctx: Context) -> None:
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, LOOPS):
            continue
        fresh = _loop_names(loop)
        for c in ctx.calls(loop.body):  # type: ignore[attr-defined]
            fn = ctx.funcs.get(c.func.id) if isinstance(c.func, ast.Name) else None
            if fn is None or not any(isinstance(n, ast.Name) and n.id in fresh
                                     for a in c.args for n in ast.walk(a)):
                continue
            params = {a.arg for a in fn.args.args}
            for p in ctx.calls(fn.body):
                if last_name(p) == "predict" and isinstance(p.func, ast.Attribute) and (
                        isinstance(p.func.value, ast.Name) and p.func.value.id in params):
                    ctx.add_late("script.keras-call-per-sample", "info", p,
                                 f"in `{fn.name}`, which the loop at {ctx.line(loop.lineno)} "
                                 "calls on every iteration with that iteration's batch",
                                 method=".predict()",
                                 remedy="call the model directly, `model(x, training=False)`,"
                                        " which skips predict's per-call setup")


def _module_call_per_row(ctx: Context) -> None:
    tensors = {n for n, vs in ctx.assigns.items() if any(
        isinstance(v, ast.Call) and ctx.resolve(v.func).startswith("torch.") for v in vs)}
    for loop in ast.walk(ctx.tree):
        if not (isinstance(loop, ast.For) and isinstance(loop.target, ast.Name)
                and isinstance(loop.iter, ast.Name) and loop.iter.id in tensors):
            continue
        for c in ctx.calls(loop.body):
            if isinstance(c.func, ast.Name) and c.func.id in ctx.models and any(
                    isinstance(a, ast.Name) and a.id == loop.target.id for a in c.args):
                ctx.add_late("script.per-sample-python-loop", "info",
                             ctx.enclosing(c, (ast.stmt,)) or c,
                             what=f"`{c.func.id}({loop.target.id})` over the rows of "
                                  f"`{loop.iter.id}` (one call on `{loop.iter.id}` does all "
                                  "rows at once; discuss.pytorch.org/t/102632)")


def _int_names(ctx: Context) -> dict[str, list[object]]:
    """Name -> the values assigned to it, tuple unpacking (``nx, ny = 41, 41``) split."""
    out: dict[str, list[object]] = {}
    for s in ast.walk(ctx.tree):
        if not isinstance(s, ast.Assign):
            continue
        for t in s.targets:
            if isinstance(t, ast.Name):
                out.setdefault(t.id, []).append(const(s.value))
            elif isinstance(t, ast.Tuple) and isinstance(s.value, ast.Tuple) \
                    and len(t.elts) == len(s.value.elts):
                for e, v in zip(t.elts, s.value.elts, strict=True):
                    if isinstance(e, ast.Name):
                        out.setdefault(e.id, []).append(const(v))
    return out


def _const_int(names: dict[str, list[object]], node: ast.AST) -> int | None:
    v = const(node)
    if isinstance(node, ast.Name):
        vals = names.get(node.id, [])
        v = vals[0] if len(vals) == 1 else None
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _tiny_gpu_arrays(ctx: Context) -> None:
    if not any(isinstance(n, LOOPS) for n in ast.walk(ctx.tree)):
        return
    names = _int_names(ctx)
    for c in ctx.calls():
        q = ctx.resolve(c.func)
        if not (q.split(".")[0] in _GPU_ARRAYS and last_name(c) in ("zeros", "ones", "empty",
                                                                     "full") and c.args):
            continue
        shape = c.args[0]
        dims = [_const_int(names, e) for e in shape.elts] if isinstance(
            shape, ast.Tuple) else [_const_int(names, shape)]
        if not dims or any(d is None for d in dims):
            continue
        size = 1
        for d in dims:
            size *= d  # type: ignore[operator]
        if size < _TINY:
            ctx.add_late("script.gpu-tiny-op", "info", ctx.enclosing(c, (ast.stmt,)) or c,
                         f"a {'x'.join(map(str, dims))} array ({size} elements) on a GPU "
                         "array library: each op on it costs more in launch and runtime "
                         "overhead than in arithmetic (nv-legate/cupynumeric#1080)")
