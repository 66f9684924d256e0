"""Device values followed into the functions a step loop calls (issue 24, round 7): which
parameters of a callee receive a device value from the loop's call (a name the loop computed
on the device, ``y.cuda()``), what the callee computes from them (not their metadata, not
host copies), and which uses turn them into Python values -- ``float(v)``, ``print(v)``,
``if v == 0:``, a logger given them -- each a wait for the device on every step."""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import last_name, root_name, target_names, walk
from devicebench.script_check.context import Context

_HOST = {"item", "numpy", "tolist", "float", "int", "len", "str", "cpu", "time",
         "perf_counter", "append", "format", "round", "range", "enumerate", "zip", "next"}


def plain_use(ctx: Context, name: ast.Name) -> bool:
    """``name`` used as a value (not ``name.shape``, ``name is None``, ``len(name)``)."""
    parent = ctx.parents.get(name)
    if isinstance(parent, ast.Attribute):
        return False
    if isinstance(parent, ast.Compare) and any(isinstance(o, ast.Is | ast.IsNot)
                                               for o in parent.ops):
        return False
    return not (isinstance(parent, ast.Call) and last_name(parent) in ("len", "type",
                                                                       "isinstance"))


_SINKS = ("wandb.log", "mlflow.log_metric", "mlflow.log_metrics")
_SINK_METHODS = ("add_scalar", "add_scalars", "log_metrics", "log_metric")


def device_get(ctx: Context, n: ast.AST) -> bool:
    """``jax.device_get(x)`` (or ``float(jax.device_get(x))``): fetching a device value."""
    return isinstance(n, ast.Call) and ctx.resolve(n.func) == "jax.device_get"


def device_params(ctx: Context, call: ast.AST, fn: ast.AST, device: set[str]) -> set[str]:
    """Parameters of ``fn`` that the loop's ``call`` passes a device value (a name the loop
    assigned from device work), plus the names ``fn`` computes from them."""
    if not isinstance(call, ast.Call) or not hasattr(fn, "args"):
        return set()
    params = [a.arg for a in fn.args.args]  # type: ignore[attr-defined]
    if params and params[0] in ("self", "cls") and isinstance(call.func, ast.Attribute):
        params = params[1:]
    def on_device(a: ast.AST) -> bool:  # x (a device name), y.cuda(), y.to(device)
        return isinstance(a, ast.Name) and a.id in device or isinstance(a, ast.Call) and (
            last_name(a) in ("cuda", "to")) and isinstance(a.func, ast.Attribute)
    held = {p for p, a in zip(params, call.args, strict=False) if on_device(a)}
    held |= {k.arg for k in call.keywords if k.arg in params and on_device(k.value)}
    for _ in range(2):
        for g in walk(fn.body):  # type: ignore[attr-defined]
            # `for k, v in logs.items()` / `{k: float(v) for k, v in logs.items()}`
            gens = g.generators if isinstance(g, ast.ListComp | ast.DictComp | ast.SetComp
                                              | ast.GeneratorExp) else [g] if isinstance(
                g, ast.For) else []
            for gen in gens:
                it, tg = gen.iter, gen.target
                meth = last_name(it) if isinstance(it, ast.Call) and isinstance(
                    it.func, ast.Attribute) else ""
                if meth == "keys" or root_name(it.func.value if meth else it) not in held:
                    continue
                if meth == "items" and isinstance(tg, ast.Tuple) and len(tg.elts) == 2:
                    tg = tg.elts[1]  # the values, not the keys
                held |= set(target_names(tg))
        for st in walk(fn.body):  # type: ignore[attr-defined]
            if isinstance(st, ast.Assign) and _carries(ctx, st.value, held):
                held |= {t for tg in st.targets for t in target_names(tg)}
    return held


_META = ("shape", "ndim", "dtype", "device", "size", "dim", "requires_grad")


def _carries(ctx: Context, value: ast.AST, held: set[str]) -> bool:
    """``value`` keeps a device value of ``held`` as a device value: not its metadata
    (``x.shape``, ``x.size()``, ``len(x)``) and not a host copy (``float(x)``, ``x.item()``)."""
    for n in ast.walk(value):
        if not (isinstance(n, ast.Name) and n.id in held):
            continue
        cur, host = ctx.parents.get(n), False
        while cur is not None and cur is not ctx.parents.get(value):
            if isinstance(cur, ast.Attribute) and cur.attr in _META or isinstance(
                    cur, ast.Call) and last_name(cur) in _HOST or isinstance(
                    cur, ast.comprehension):  # (the iterable: its elements are what is kept)
                host = True
                break
            cur = ctx.parents.get(cur)
        if not host:
            return True
    return False


def host_use(ctx: Context, m: ast.AST, held: set[str]) -> str:
    """How ``m`` turns a device value of ``held`` into a Python value: ``float(x)`` /
    ``print(x)`` / a logging call given it (``wandb.log({"loss": x})``) / ``if x ...:``."""
    def plain(expr: ast.AST) -> bool:
        # names a comprehension in `expr` binds from something not held are other values
        # that happen to share a name (`for k, v in values.items()`)
        local = {t for g in ast.walk(expr) if isinstance(g, ast.comprehension)
                 and root_name(g.iter.func.value if isinstance(g.iter, ast.Call) and isinstance(
                     g.iter.func, ast.Attribute) else g.iter) not in held
                 for t in target_names(g.target)}
        return any(isinstance(a, ast.Name) and a.id in held - local and plain_use(ctx, a)
                   for a in ast.walk(expr))
    if isinstance(m, ast.Call):
        q = ctx.resolve(m.func)
        if isinstance(m.func, ast.Name) and m.func.id in ("float", "int", "bool", "print") and (
                any(plain(a) for a in m.args)):
            return f"; `{m.func.id}` of a device value waits for the device"
        if (q in _SINKS or last_name(m) in _SINK_METHODS) and any(
                plain(a) for a in [*m.args, *(k.value for k in m.keywords)]):
            return "; the logger converts the device value to a Python number, a device sync"
    if isinstance(m, ast.If | ast.While) and plain(m.test):
        return "; Python control flow on a device value waits for the device"
    return ""


def host_bound(fn: ast.AST, node: ast.AST) -> bool:
    """``node`` (``x.item()``, ``x[i].tolist()``) reads a name ``fn`` bound from a value
    already copied to the host (``x = t.cpu().nonzero()``): no device sync (issue 24,
    round 14: sgl-project/sglang#9889's ``start_indices[i].item()``)."""
    f = node.func if isinstance(node, ast.Call) else None
    name = root_name(f.value) if isinstance(f, ast.Attribute) else ""
    return bool(name) and any(
        isinstance(s, ast.Assign) and name in {n for t in s.targets for n in target_names(t)}
        and any(isinstance(c, ast.Call) and last_name(c) in ("cpu", "numpy", "tolist")
                for c in ast.walk(s.value)) for s in walk(getattr(fn, "body", [])))


def fetch(ctx: Context, fn: ast.AST, n: ast.AST) -> bool:
    """``x.numpy()`` / ``x.item()`` / ``x.tolist()`` of a value not already on the host, or
    ``jax.device_get(x)``: a copy to the host that waits for the device."""
    f = n.func if isinstance(n, ast.Call) else None
    return isinstance(f, ast.Attribute) and f.attr in ("numpy", "item", "tolist") and not (
        n.args) and not host_bound(fn, n) or device_get(ctx, n)  # type: ignore[union-attr]


_SCALAR_KWARGS = ("alpha", "value")  # x.add(y, alpha=...), x.addcmul_(a, b, value=...)


def scalar_from_tensor(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef,
                       call: ast.AST) -> str:
    """A torch method given a tensor where it takes a Python scalar (``g.sub(w, alpha=proj)``
    with ``proj`` computed by torch ops in ``fn``): PyTorch reads it with ``.item()``, a
    device sync (Koratahiu/Advanced_Optimizers#5). "" when not."""
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
        return ""
    arg = next((k.value for k in call.keywords if k.arg in _SCALAR_KWARGS), None)
    if not isinstance(arg, ast.Name):
        return ""
    tensors: set[str] = set()
    for _ in range(2):
        for s in walk(fn.body):
            if isinstance(s, ast.Assign) and any(
                    isinstance(c, ast.Call) and ctx.resolve(c.func).startswith("torch.")
                    or isinstance(c, ast.Name) and c.id in tensors for c in ast.walk(s.value)):
                tensors |= {t.id for t in s.targets if isinstance(t, ast.Name)}
    if arg.id not in tensors:
        return ""
    return (f"; `{arg.id}` is a tensor, and `{call.func.attr}(..., "
            f"{next(k.arg for k in call.keywords if k.arg in _SCALAR_KWARGS)}=)` takes a Python "
            f"number: PyTorch calls `.item()` on it, a device sync")
