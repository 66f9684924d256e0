"""What runs repeatedly, and what kind of value a name holds (issue 24, round 7).

Six rounds of misses had the same two causes: a rule looked only at the statements of the
loop it found (so the same cost one call down -- in a step method, a metrics writer, a
``__getitem__`` or a collate function -- was invisible), and each rule guessed what a name
held from its spelling. This module answers both questions once, for every rule:

- :func:`repeat_site` -- does this node run on every iteration of some loop? Directly in
  the loop's body, in a function of this file that the loop calls (followed a few calls
  deep: functions, ``self.method()``, methods of instances built here, a model's
  ``forward``), or in a method the data pipeline calls per item or per batch
  (``Dataset.__getitem__``, an iterator's ``__next__``/``__iter__``).
- :func:`python_list` -- is this expression a Python list built element by element (a
  comprehension, ``[]`` grown by ``append``/``extend``/``+=``), not a literal of constants?
- :func:`evaluation_loop` -- is this node in an evaluation pass (a loop run with
  gradients off, ``torch.no_grad()`` / ``inference_mode()``) rather than a training step?
- :func:`loop_carried` -- which names a loop carries from one iteration to the next
  (``total += loss``, ``w = w - lr * g``), each with its updating
  statements: what a lazy framework keeps growing a graph for until it is evaluated.

All of it is static (``ast`` only); nothing here imports a framework.
"""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import (
    COMPREHENSIONS,
    LOOPS,
    last_name,
    loop_body,
    target_names,
    walk,
)
from devicebench.script_check.context import Context, FuncDef
from devicebench.script_check.dataflow import callees

# methods the data pipeline runs once per item or per batch
_PER_ITEM = {"__getitem__", "__next__", "__iter__", "collate", "collate_fn"}
# Lightning hooks its Trainer calls on every training step (issue 24, round 10)
_PER_STEP_HOOKS = {"training_step", "on_train_batch_start", "on_train_batch_end",
                   "on_before_optimizer_step", "on_after_backward", "on_before_zero_grad"}


def _loops(ctx: Context) -> list[ast.AST]:
    return [n for n in ast.walk(ctx.tree) if isinstance(n, LOOPS + COMPREHENSIONS)
            and not ctx.is_compiled_scope(n)]


def _collate_functions(ctx: Context) -> list[FuncDef]:
    """Functions of this file a DataLoader runs once per batch: ``collate_fn=f`` or
    ``collate_fn=lambda b: f(b, ...)`` (issue 24, round 10)."""
    out = []
    for call in ctx.calls():
        v = next((k.value for k in call.keywords if k.arg == "collate_fn"), None)
        body = v.body if isinstance(v, ast.Lambda) else v
        names = [body.id] if isinstance(body, ast.Name) else [
            body.func.id] if isinstance(body, ast.Call) and isinstance(body.func, ast.Name) else []
        out += [ctx.funcs[n] for n in names if n in ctx.funcs]
        out += [m for n in names if n in ctx.classes for m in ctx.classes[n].body  # round 11
                if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef) and m.name == "__call__"]
    return out


def repeated_functions(ctx: Context) -> dict[int, tuple[ast.AST, ast.AST, FuncDef]]:
    """id(function) -> (loop, the call in the loop that leads to it, function) for every
    function of this file that some loop runs on each iteration (cached on ``ctx``)."""
    cached = getattr(ctx, "_repeated_functions", None)
    if cached is not None:
        return cached
    out: dict[int, tuple[ast.AST, ast.AST, FuncDef]] = {}
    for loop in _loops(ctx):
        for call, fn in callees(ctx, loop_body(loop)):
            out.setdefault(id(fn), (loop, call, fn))
    for cls in ctx.classes.values():
        for m in cls.body:
            if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef) and (
                    m.name in _PER_ITEM or m.name in _PER_STEP_HOOKS):
                out.setdefault(id(m), (m, m, m))
                for call, fn in callees(ctx, list(m.body)):  # what the hook runs
                    out.setdefault(id(fn), (m, call, fn))
    for fn in _collate_functions(ctx):
        out.setdefault(id(fn), (fn, fn, fn))
    ctx._repeated_functions = out  # type: ignore[attr-defined]
    return out


def repeat_site(ctx: Context, node: ast.AST) -> tuple[ast.AST, ast.AST | None] | None:
    """(loop, call) when ``node`` runs on every iteration of a loop: directly (call is
    None) or inside a function the loop reaches through ``call``; for a per-item method of
    the data pipeline, (method, None). None when it runs once."""
    fns = repeated_functions(ctx)
    child, cur = node, ctx.parents.get(node)
    while cur is not None:
        if isinstance(cur, LOOPS + COMPREHENSIONS) and any(
                child is b for b in loop_body(cur)) and not ctx.is_compiled_scope(cur):
            return cur, None
        if isinstance(cur, ast.FunctionDef | ast.AsyncFunctionDef) and id(cur) in fns:
            loop, call, fn = fns[id(cur)]
            return (loop, None) if loop is fn else (loop, call)
        child, cur = cur, ctx.parents.get(cur)
    return None


def scope_of(ctx: Context, node: ast.AST) -> ast.AST:
    """The function enclosing ``node`` (the module when none)."""
    fn = ctx.enclosing(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    return fn if fn is not None else ctx.tree


def _bindings(scope: ast.AST, name: str) -> list[ast.expr]:
    body = scope.body if hasattr(scope, "body") else []
    out: list[ast.expr] = []
    for s in walk(body, lambda x: isinstance(x, ast.FunctionDef | ast.AsyncFunctionDef
                                               | ast.ClassDef)):
        if not isinstance(s, ast.Assign):
            continue
        for t in s.targets:
            if isinstance(t, ast.Tuple) and isinstance(s.value, ast.Tuple) and len(
                    t.elts) == len(s.value.elts):  # a, b = [], []
                out += [v for e, v in zip(t.elts, s.value.elts, strict=True)
                        if isinstance(e, ast.Name) and e.id == name]
            elif name in target_names(t):
                out.append(s.value)
    return out


def _grown(scope: ast.AST, name: str) -> bool:
    """``name.append(x)`` / ``name.extend(xs)`` / ``name += [...]`` somewhere in ``scope``."""
    for n in walk(scope.body if hasattr(scope, "body") else []):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in (
                "append", "extend", "insert") and isinstance(n.func.value, ast.Name) and (
                n.func.value.id == name):
            return True
        if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) and (
                n.target.id == name) and isinstance(n.value, ast.List | ast.ListComp):
            return True
    return False


_NUMBER_CALLS = {"float", "int", "round", "item", "bool", "len"}


def _number(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) or isinstance(node, ast.Call) and (
        last_name(node) in _NUMBER_CALLS)


def list_elements(ctx: Context, expr: ast.AST, scope: ast.AST) -> str:
    """What the Python list ``expr`` holds, as far as the file shows: "numbers" (``float(x)``,
    ``.item()``, constants), "arrays" (anything else appended or comprehended: arrays,
    tensors, rows), "unknown" (grown with ``extend``: rows or scalars)."""
    if isinstance(expr, ast.ListComp):
        return "numbers" if _number(expr.elt) else "arrays"
    if not isinstance(expr, ast.Name):
        return "unknown"
    values = [v for v in _bindings(scope, expr.id) if not any(n is expr for n in ast.walk(v))]
    if values and all(isinstance(v, ast.ListComp) for v in values):
        return "numbers" if all(_number(v.elt) for v in values) else "arrays"  # type: ignore[attr-defined]
    added = [n for n in walk(scope.body if hasattr(scope, "body") else [])
             if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr in ("append", "extend", "insert")
             and isinstance(n.func.value, ast.Name) and n.func.value.id == expr.id]
    if not added or any(n.func.attr == "extend" for n in added):  # type: ignore[attr-defined]
        return "unknown"
    return "numbers" if all(n.args and _number(n.args[-1]) for n in added) else "arrays"


def _constant(node: ast.AST) -> bool:
    return all(isinstance(n, ast.Constant | ast.List | ast.Tuple | ast.UnaryOp | ast.USub
                          | ast.Load) for n in ast.walk(node))


def python_list(ctx: Context, expr: ast.AST, scope: ast.AST, depth: int = 2) -> str:
    """How ``expr`` is a Python list built element by element ("a list comprehension", "a
    list grown with append/extend"), or "" -- a literal of constants (``[1, 2, 3]``) is
    not one: converting it costs nothing worth a finding."""
    if isinstance(expr, ast.ListComp):
        return "a list comprehension"
    if isinstance(expr, ast.List) and depth > 0 and expr.elts and all(
            python_list(ctx, e, scope, depth - 1) for e in expr.elts):  # [rows] (round 11)
        return "a list literal around " + python_list(ctx, expr.elts[0], scope, depth - 1)
    if isinstance(expr, ast.Name) and depth > 0:
        # `x = torch.tensor(x)`: the conversion's own rebinding is not what x held (round 10)
        values = [v for v in _bindings(scope, expr.id) if not any(n is expr for n in ast.walk(v))]
        if values and all(isinstance(v, ast.List) and not v.elts for v in values) and _grown(
                scope, expr.id):
            return "a list grown with append/extend"
        if values and all(isinstance(v, ast.ListComp) for v in values):
            return "a list comprehension"
        if values and all(_zip_star(v) for v in values):
            # `states, actions = zip(*samples)` (round 13): each name is a tuple of rows
            return "a tuple of rows unpacked from `zip(*...)`"
        if not values and isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
            return _param_list(ctx, expr.id, scope, depth)
    return ""


def _zip_star(v: ast.AST) -> bool:
    return isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "zip" and (
        any(isinstance(a, ast.Starred) for a in v.args))


def _param_list(ctx: Context, name: str, fn: ast.FunctionDef | ast.AsyncFunctionDef,
                depth: int) -> str:
    """A parameter of ``fn`` that every call of ``fn`` in this file passes a Python list
    built element by element (issue 24, round 13: values followed through parameters) --
    "" when a call passes something else or ``fn`` is never called here."""
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    if name not in params:
        return ""
    method = bool(params) and params[0] in ("self", "cls")
    calls = [c for c in ctx.calls() if last_name(c) == fn.name and (
        isinstance(c.func, ast.Attribute) if method else isinstance(c.func, ast.Name))]
    hows = []
    for c in calls:
        pos = params.index(name) - (1 if method else 0)
        arg = next((k.value for k in c.keywords if k.arg == name), None)
        if arg is None and 0 <= pos < len(c.args) and not any(
                isinstance(a, ast.Starred) for a in c.args[:pos + 1]):
            arg = c.args[pos]
        if arg is None:
            return ""
        hows.append(python_list(ctx, arg, scope_of(ctx, c), depth - 1))
    if not hows or not all(hows):
        return ""
    return f"{hows[0]}, passed as `{name}` by the caller"


def loop_carried(ctx: Context, loop: ast.AST) -> dict[str, list[ast.stmt]]:
    """name -> the statements of ``loop``'s body that update it from its own previous value:
    ``x += v``, ``x = x + v`` / ``x = f(x, ...)``. A plain counter
    (``steps += 1``) is left out: it holds a Python number, not a framework value."""
    out: dict[str, list[ast.stmt]] = {}
    for s in walk(getattr(loop, "body", []), lambda x: isinstance(
            x, ast.FunctionDef | ast.AsyncFunctionDef)):
        if isinstance(s, ast.AugAssign):
            t = s.target
            if isinstance(t, ast.Name) and not isinstance(s.value, ast.Constant):
                out.setdefault(t.id, []).append(s)
        elif isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(
                s.targets[0], ast.Name):
            name = s.targets[0].id
            if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(s.value)) and (
                    any(isinstance(n, ast.Call | ast.BinOp) for n in ast.walk(s.value))):
                out.setdefault(name, []).append(s)
    return out


_HOOKS = ("register_hook", "register_post_accumulate_grad_hook", "register_forward_hook",
          "register_forward_pre_hook", "register_full_backward_hook",
          "register_full_backward_pre_hook", "register_backward_hook")


def hook_functions(ctx: Context) -> list[tuple[ast.Call, FuncDef]]:
    """(registration, function) for the functions this file registers as autograd or
    module hooks -- by name, or the nested function a factory of this file returns
    (``p.register_post_accumulate_grad_hook(make_hook(bucket))``): they run inside every
    forward or ``backward()``, so once (or once per parameter) per training step."""
    out: list[tuple[ast.Call, FuncDef]] = []
    for c in ctx.calls():
        if last_name(c) not in _HOOKS or not c.args:
            continue
        a = c.args[0]
        if isinstance(a, ast.Name) and a.id in ctx.funcs:
            out.append((c, ctx.funcs[a.id]))
        elif isinstance(a, ast.Call) and isinstance(a.func, ast.Name) and a.func.id in ctx.funcs:
            factory = ctx.funcs[a.func.id]
            nested = {d.name: d for d in factory.body
                      if isinstance(d, ast.FunctionDef | ast.AsyncFunctionDef)}
            for r in walk(factory.body):
                if isinstance(r, ast.Return) and isinstance(r.value, ast.Name) and (
                        r.value.id in nested):
                    out.append((c, nested[r.value.id]))
    return out


_NO_GRAD = ("torch.no_grad", "torch.inference_mode", "torch.set_grad_enabled")


def evaluation_loop(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef,
                     node: ast.AST) -> ast.For | ast.While | None:
    """The loop of ``fn`` (one that takes no optimisation step) that ``node`` runs in, when
    it runs without gradients (under ``with torch.no_grad()`` / ``inference_mode()``, or
    ``fn`` decorated with one): an evaluation pass; None otherwise."""
    up = ctx.between(node, fn)
    loop = next((a for a in up if isinstance(a, ast.For | ast.While)), None)
    if loop is None:
        return None
    grads_off = any(isinstance(d, ast.Call) and ctx.resolve(d.func) in _NO_GRAD
                    for d in fn.decorator_list) or any(
        isinstance(a, ast.With) and any(isinstance(i.context_expr, ast.Call)
                                        and ctx.resolve(i.context_expr.func) in _NO_GRAD
                                        for i in a.items) for a in up)
    return loop if grads_off else None
