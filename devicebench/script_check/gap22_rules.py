"""corpus_round20's held-out misses written generally (issue 24, round 22, step 0): analysis
gaps, under existing ids, all ``info`` and added late (``Context.add_late``: none takes an
older warning's place). Per-batch code is round 20's (``gap20_rules.per_batch``).

- a NumPy array made in a function (``np.*`` results, their slices and ``.T``) used in
  ``jax.numpy`` arithmetic by a nested function the outer one returns: the array is a host
  constant copied to the device on every call (``script.jax-batch-on-host``;
  PlasmaControl/DESC#1051: cast it to ``jnp`` once);
- ``self.<buffer>.to(device=..., dtype=...)`` assigned to a local in a method run per step:
  the same table copied each call (``script.per-step-copy``; huggingface/diffusers#6704);
- ``self.<t>[p]`` where ``__init__`` puts ``self.<t>`` on a device and ``p`` is a parameter
  (or arithmetic on one) that a caller fills with the element of a ``for`` over a tensor: a
  device scalar index, one host sync per step (``script.sync-in-step-loop``;
  huggingface/diffusers#9475);
- a ``torch.compile``d model called per element of a loop with graph inputs built per
  element (a ``*graph*`` builder, ``*edge*`` arguments), no ``dynamic=``/``mark_dynamic``:
  a new edge count is a new guard, a recompile (``script.recompile-shapes``;
  facebookresearch/fairchem#2127);
- a tensor indexed by ``<cfg>.<*ids>`` (a config's Python list of ids) in code run per
  step: a new index tensor uploaded each time (``script.per-step-copy``;
  mujocolab/mjlab#1019);
- ``f = jax.vmap(g)`` (or ``grad``/``jacrev``/...) never jitted, called in a loop: "wrapping
  a function in ``jax.vmap`` does not JIT" (``script.hot-function-not-compiled``;
  google-deepmind/mujoco#1516);
- a Python loop over a tensor's rows calling ``torch.autograd.grad`` (directly or through a
  file helper) per row: a Jacobian built row by row (``script.per-sample-python-loop``;
  pnnl/neuromancer#173: ``torch.func.jacrev``);
- ``.item()`` (also of gathered values) in a ``*Trainer`` subclass's per-step method or a
  file function it calls: a host sync per step for a metric (``script.sync-in-step-loop``;
  huggingface/trl#2902, huggingface/trl#6678);
- an ``if``/``while`` comparing values made by a torch reduction (``norm``, ``sum``,
  ``max``, ...) or arithmetic on them, in a loop of per-batch code: ``bool()`` of a device
  tensor (``script.sync-in-step-loop``; vllm-project/vllm-omni#1105: ``torch.where``).

Sources: the threads above (https://github.com/<owner>/<repo>/issues/<n> or ``/pull/<n>``).
"""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import LOOPS, keyword, last_name, walk
from devicebench.script_check.context import Context
from devicebench.script_check.gap20_rules import _params, per_batch
from devicebench.script_check.round19_rules import hot

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_SYNC, _COPY = "script.sync-in-step-loop", "script.per-step-copy"
_STEP_METHODS = ("compute_loss", "_compute_loss", "training_step", "prediction_step")
_TRANSFORMS = {"jax.vmap", "jax.grad", "jax.value_and_grad", "jax.jacrev", "jax.jacfwd",
               "jax.hessian"}
_REDUCTIONS = {"norm", "vector_norm", "matrix_norm", "sum", "mean", "max", "min", "amax",
               "amin", "std", "var", "dist"}
_FIX = ("keep what Python needs on the host, or keep the value on the device (torch.where, "
        "a buffered metric read in log()) so the host does not wait for the GPU each step")


def _add(ctx: Context, *args: object, **fields: str) -> None:
    """``ctx.add_late`` with every older template's fields filled (extra ones are unused)."""
    base = {"data": "the tensor", "what": "this", "how": "the compiler", "fixtext": _FIX,
            "framework": "JAX", "reason": "it runs op by op"}
    ctx.add_late(*args, **{**base, **fields})


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _numpy_closed_over(ctx: Context) -> None:
    for outer in (f for f in ast.walk(ctx.tree) if isinstance(f, _FUNCS)):
        host: set[str] = set()
        for s in outer.body:
            if isinstance(s, ast.Assign) and (any(
                    isinstance(c, ast.Call) and ctx.resolve(c.func).startswith("numpy.")
                    for c in ast.walk(s.value)) or _names(s.value) & host) and not any(
                    ctx.resolve(c.func).startswith("jax.") for c in ctx.calls([s.value])):
                host |= {n.id for t in s.targets for n in ast.walk(t)
                         if isinstance(n, ast.Name)}
        returned = {n.id for s in outer.body if isinstance(s, ast.Return) and s.value
                    for n in ast.walk(s.value) if isinstance(n, ast.Name)}
        for inner in (s for s in outer.body if isinstance(s, _FUNCS) and s.name in returned):
            local = _params(inner) | {n.id for s in walk(inner.body) if isinstance(s, ast.Assign)
                                      for t in s.targets for n in ast.walk(t)
                                      if isinstance(n, ast.Name)}
            for s in (s for s in walk(inner.body) if isinstance(s, ast.stmt)):
                used = (_names(s) & host) - local
                if used and not isinstance(s, (ast.For, ast.If, ast.While)) and any(
                        ctx.resolve(c.func).startswith("jax.numpy.")
                        for c in ast.walk(s) if isinstance(c, ast.Call)):
                    _add(ctx, "script.jax-batch-on-host", "info", s,
                                 f"NumPy array(s) {', '.join(sorted(used))} closed over by "
                                 f"`{inner.name}`, copied host-to-device on every call",
                                 why="a NumPy array is a host value: each call of jitted or "
                                 "jax.numpy code that uses it copies it to the device again",
                                 fix="convert them with jnp.asarray once, when they are made")


def _unjitted_transform(ctx: Context) -> None:
    for name, values in ctx.assigns.items():
        if name in ctx.compiled or any(
                isinstance(c.func, ast.Attribute | ast.Name) and ctx.resolve(c.func) in (
                    "jax.jit", "jax.pmap") and any(_names(a) & {name} for a in c.args)
                for c in ctx.calls()):
            continue
        v = next((v for v in values if isinstance(v, ast.Call)
                  and ctx.resolve(v.func) in _TRANSFORMS), None)
        if v is not None and any(isinstance(c.func, ast.Name) and c.func.id == name
                                 and ctx.enclosing(c, LOOPS) is not None for c in ctx.calls()):
            _add(ctx, "script.hot-function-not-compiled", "info", v,
                         f"`{name}` is `{ast.unparse(v.func)}` of a function but never "
                         "jitted, and a loop calls it: it runs op by op every step",
                         fix=f"wrap it: jax.jit({ast.unparse(v)[:50]})", framework="JAX",
                         reason="a jax.vmap/jax.grad wrapper does not compile: outside jit "
                         "each primitive is dispatched from Python on every call")


def _trainer_step(ctx: Context, fn: ast.AST | None, depth: int = 2) -> bool:
    if fn is None:
        return False
    cls = ctx.enclosing(fn, (ast.ClassDef,))
    if cls is not None and any(last_name(b).endswith("Trainer") for b in cls.bases) and (
            fn.name in _STEP_METHODS or any(
                last_name(c) == fn.name and getattr(ctx.enclosing(c, _FUNCS), "name", "")
                in _STEP_METHODS for c in ctx.calls(cls.body))):
        return True
    return depth > 0 and any(
        isinstance(c.func, ast.Name) and c.func.id == fn.name
        and _trainer_step(ctx, ctx.enclosing(c, _FUNCS), depth - 1) for c in ctx.calls())


def _gated(ctx: Context, node: ast.AST) -> bool:
    p = ctx.parents.get(node)
    while p is not None and not isinstance(p, _FUNCS):
        if isinstance(p, ast.If) and any(w in ast.unparse(p.test) for w in (
                "logging_steps", "global_step", "should_log", "log_every")):
            return True
        p = ctx.parents.get(p)
    return False


def _call_form(ctx: Context, c: ast.Call) -> None:
    fn = ctx.enclosing(c, _FUNCS)
    attr = getattr(c.func, "attr", "")
    if fn is None or fn.name == "__init__":
        return
    if attr == "item" and not c.args and _trainer_step(ctx, fn) and not _gated(ctx, c):
        _add(ctx, _SYNC, "info", c, f"`{ast.unparse(c)[:50]}` reads a metric back to the "
                     "host in the trainer's per-step code", fixtext=_FIX)
    if attr == "to" and isinstance(c.func.value, ast.Attribute) and isinstance(
            c.func.value.value, ast.Name) and c.func.value.value.id == "self" and keyword(
            c, "device") is not None and keyword(c, "dtype") is not None:
        s = ctx.parents.get(c)
        if isinstance(s, ast.Assign) and all(isinstance(t, ast.Name) for t in s.targets) \
                and hot(ctx, c):
            _add(ctx, _COPY, "info", c, f"`{ast.unparse(c.func.value)}` copied to the "
                         "device on every call, the copy dropped after it",
                         fix="move it once and keep it (assign it back to self, or "
                         "memoize per device and dtype)", data=ast.unparse(c.func.value)[:40])
    if attr == "to" and (keyword(c, "device") is not None or c.args) and (
            per_batch(ctx, c) or _called_from_per_batch(ctx, fn)):
        made = [m for m in ast.walk(c.func.value) if isinstance(m, ast.Call) and
                ctx.resolve(m.func) in ("torch.arange", "torch.linspace", "torch.ones",
                                        "torch.zeros", "torch.tensor", "torch.eye")
                and keyword(m, "device") is None]
        if made and isinstance(c.func.value, ast.Call) and c.func.value not in made:
            _add(ctx, "script.host-built-in-forward", "info", c,
                         f"`{ast.unparse(made[0])[:40]}` built on the CPU and moved to the "
                         "device on every call", fix="create it on the device: pass device= "
                         "to the factory", what=ast.unparse(made[0])[:40])


def _called_from_per_batch(ctx: Context, fn: ast.AST) -> bool:
    return any(isinstance(c.func, ast.Name) and c.func.id == fn.name and per_batch(ctx, c)
               for c in ctx.calls())


def _device_attrs(ctx: Context) -> set[str]:
    out = set()
    for f in (f for f in ast.walk(ctx.tree) if isinstance(f, _FUNCS) and f.name == "__init__"):
        for s in (s for s in walk(f.body) if isinstance(s, ast.Assign)):
            placed = any(isinstance(c, ast.Call) and (
                getattr(c.func, "attr", "") in ("to", "cuda") or keyword(c, "device")
                is not None) for c in ast.walk(s.value))
            out |= {t.attr for t in s.targets if placed and isinstance(t, ast.Attribute)}
    return out


def _subscript_form(ctx: Context, n: ast.Subscript, devices: set[str]) -> None:
    fn = ctx.enclosing(n, _FUNCS)
    if fn is None or fn.name == "__init__":
        return
    pieces = n.slice.elts if isinstance(n.slice, ast.Tuple) else [n.slice]
    ids = [p for p in pieces if isinstance(p, ast.Attribute) and p.attr.endswith("ids")
           and isinstance(p.value, ast.Name) and ("cfg" in p.value.id or "config" in
                                                  p.value.id) and p.value.id in _params(fn)]
    if ids and hot(ctx, n):
        _add(ctx, _COPY, "info", n, f"indexed by `{ast.unparse(ids[0])}` (a config's "
                     "Python list of ids): a new index tensor uploaded on every call",
                     fix="keep the ids as a device tensor (or a slice) made once",
                     data=ast.unparse(n.value)[:40])
    if isinstance(n.value, ast.Attribute) and isinstance(n.value.value, ast.Name) and \
            n.value.value.id == "self" and n.value.attr in devices:
        pos = _tensor_fed_params(ctx, fn)
        derived = pos | {t.id for s in walk(fn.body) if isinstance(s, ast.Assign)
                         and _names(s.value) & pos for t in s.targets if isinstance(t, ast.Name)}
        if _names(n.slice) & derived and not isinstance(n.slice, ast.Slice):
            _add(ctx, _SYNC, "info", n, f"`{ast.unparse(n)[:40]}`: a device tensor "
                         "indexed by a device scalar (the loop's tensor element) per step",
                         fixtext=_FIX)


def _tensor_fed_params(ctx: Context, fn: ast.AST) -> set[str]:
    params = [a.arg for a in fn.args.args if a.arg not in ("self", "cls")]
    out = set()
    for c in ctx.calls():
        if last_name(c) != fn.name or not isinstance(c.func, ast.Attribute):
            continue
        loop = ctx.enclosing(c, LOOPS)
        if not isinstance(loop, ast.For) or (isinstance(loop.iter, ast.Call) and last_name(
                loop.iter) in ("range", "enumerate", "zip", "items", "keys", "values")):
            continue
        elems = _names(loop.target)
        out |= {params[i] for i, a in enumerate(c.args)
                if i < len(params) and isinstance(a, ast.Name) and a.id in elems}
    return out


def _reduction_compare(ctx: Context, n: ast.If | ast.While) -> None:
    if not isinstance(n.test, ast.Compare) or ctx.enclosing(n, LOOPS) is None:
        return
    fn = ctx.enclosing(n, _FUNCS)
    body = fn.body if fn is not None else ctx.tree.body
    made: set[str] = set()
    for _ in range(2):
        for s in (s for s in walk(body) if isinstance(s, ast.Assign)):
            if any(isinstance(c, ast.Call) and ctx.resolve(c.func).startswith("torch.")
                   and last_name(c) in _REDUCTIONS for c in ast.walk(s.value)) or (
                    isinstance(s.value, ast.BinOp) and _names(s.value) & made):
                made |= {t.id for t in s.targets if isinstance(t, ast.Name)}
    if _names(n.test) & made and (fn is None or per_batch(ctx, n)):
        _add(ctx, _SYNC, "info", n.test, f"`{ast.unparse(n.test)[:40]}` compares device "
                     "reductions in Python: the host waits for the GPU each iteration",
                     fix="keep it on the device: torch.where(cond, a, b)")


def _row_by_row_grad(ctx: Context, loop: ast.For) -> None:
    it = ast.unparse(loop.iter)
    if not (isinstance(loop.iter, ast.Call) and last_name(loop.iter) == "range" and any(
            w in it for w in (".shape", "len(", ".size("))):
        return
    helpers = {f.name for f in ast.walk(ctx.tree) if isinstance(f, _FUNCS) and any(
        ctx.resolve(c.func) == "torch.autograd.grad" for c in ctx.calls(f.body))}
    grads = [c for c in ctx.calls(loop.body) if ctx.resolve(c.func) == "torch.autograd.grad"
             or isinstance(c.func, ast.Name) and c.func.id in helpers]
    if grads and hot(ctx, loop):
        _add(ctx, "script.per-sample-python-loop", "info", loop, "a Jacobian built row by "
                     "row: one autograd.grad call per output element in a Python loop",
                     fix="vectorise it: torch.func.jacrev (or vmap over the vector-Jacobian "
                     "products, is_grads_batched=True)", what=ast.unparse(loop.iter)[:40])


def _compiled_over_graphs(ctx: Context) -> None:
    torch_compiled = {n for n, k in ctx.compiled.items() if k == "torch"}
    if any(last_name(c) == "mark_dynamic" for c in ctx.calls()) or any(
            keyword(v, "dynamic") is not None for vs in ctx.assigns.values() for v in vs
            if isinstance(v, ast.Call)):
        return
    for c in ctx.calls():
        loop = ctx.enclosing(c, LOOPS)
        if not (isinstance(c.func, ast.Name) and c.func.id in torch_compiled) or loop is None:
            continue
        graphs = {t.id for s in walk(loop.body) if isinstance(s, ast.Assign) and any(
            "graph" in last_name(v).lower() for v in ast.walk(s.value) if isinstance(v, ast.Call))
            for t in s.targets if isinstance(t, ast.Name)}
        if any("edge" in ast.unparse(a) and _names(a) & graphs for a in c.args):
            _add(ctx, "script.recompile-shapes", "info", c, "a compiled model called on "
                         "graphs built per iteration: each new edge/atom count is a new guard "
                         "and a recompile", fix="mark the varying axes dynamic "
                         "(torch._dynamo.mark_dynamic) or pad to fixed buckets",
                         how="torch.compile", fixtext="mark the varying axes dynamic")
