"""Syncs hidden in data-dependent shapes and truth values (issue 24, round 9).

``.item()`` is the sync everyone knows; three more forms wait for the device just the same,
because the host needs a value computed on the device before it can go on:

- indexing with a boolean mask (``x[x > 0]``, ``out[mask] += y``): PyTorch turns the mask into
  indices with ``nonzero``, whose output size only the device knows (pytorch/pytorch#12461);
- ``torch.nonzero``, ``torch.unique``, ``torch.masked_select``, one-argument ``torch.where``:
  outputs sized by the data;
- a tensor used as a Python truth value (``if mask.any():``): ``bool()`` is ``.item()``.

They are reported where the code runs on every step or every forward (a model's ``forward``,
a function a loop calls -- as info: one such sync per step is often what the algorithm
needs -- and as a warning when a loop inside that code repeats it,
found by :func:`~devicebench.script_check.kinds.repeat_site`), in
PyTorch scripts, on values that are tensors as far as the file shows (computed by torch ops
or a model's input), never NumPy arrays.
"""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import last_name, walk
from devicebench.script_check.context import Context
from devicebench.script_check.kinds import repeat_site, scope_of

_MASK_METHODS = {"bool", "squeeze", "unsqueeze", "logical_not", "logical_and", "logical_or",
                 "view", "reshape", "flatten", "any", "all", "isnan", "isinf", "isfinite", "eq",
                 "ne", "gt", "lt", "ge", "le"}
_SIZED_BY_DATA = {"torch.nonzero", "torch.unique", "torch.masked_select",
                  "torch.unique_consecutive", "torch.argwhere"}
_SIZED_METHODS = {"nonzero", "unique", "masked_select", "unique_consecutive"}
_NUMPY_MAKERS = ("numpy.", "pandas.")


def _bound(scope: ast.AST, name: str) -> list[ast.expr]:
    return [s.value for s in walk(getattr(scope, "body", [])) if isinstance(s, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == name for t in s.targets)]


def is_mask(expr: ast.AST, scope: ast.AST, depth: int = 3) -> bool:
    """``expr`` is a boolean tensor as far as the code shows: a comparison, ``~m``, ``a & b``,
    a mask method (``m.bool()``, ``m.squeeze(-1)``, ``x.isnan()``) or a name bound to one."""
    if depth <= 0:
        return False
    if isinstance(expr, ast.Compare):
        return len(expr.ops) == 1 and not isinstance(expr.ops[0], ast.In | ast.NotIn | ast.Is
                                                     | ast.IsNot)
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Invert):
        return is_mask(expr.operand, scope, depth)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.BitAnd | ast.BitOr):
        return is_mask(expr.left, scope, depth) or is_mask(expr.right, scope, depth)
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and (
            expr.func.attr in _MASK_METHODS):
        return expr.func.attr in ("bool", "isnan", "isinf", "isfinite", "eq", "ne", "gt",
                                  "lt", "ge", "le") or is_mask(expr.func.value, scope, depth)
    if isinstance(expr, ast.Name):
        values = _bound(scope, expr.id)
        if not values and isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
            # a parameter named as a mask (``mult_mask``, ``mask``; issue 24 round 14:
            # facebookresearch/fairchem#2203's ``loss[mult_mask].numel()``)
            return expr.id in {a.arg for a in scope.args.args} and (
                expr.id == "mask" or expr.id.endswith("_mask"))
        return bool(values) and all(is_mask(v, scope, depth - 1) for v in values)
    return False


def _numpy_value(ctx: Context, expr: ast.AST, scope: ast.AST) -> bool:
    """``expr`` is (rooted in) a name the file binds to NumPy/pandas data."""
    while isinstance(expr, ast.Subscript | ast.Attribute):
        expr = expr.value
    if not isinstance(expr, ast.Name):
        return False
    values = _bound(scope, expr.id) + ctx.assigns.get(expr.id, [])
    return any(isinstance(v, ast.Call) and ctx.resolve(v.func).startswith(_NUMPY_MAKERS)
               for v in values)


def _tensor_code(ctx: Context, fn: ast.AST | None) -> bool:
    """``fn`` handles tensors: a ``forward`` of a module, or a function calling torch ops."""
    if fn is None:
        return False
    if getattr(fn, "name", "") == "forward":
        return True
    cls = ctx.enclosing(fn, (ast.ClassDef,))  # a method of a torch module (round 14)
    if isinstance(cls, ast.ClassDef) and any(last_name(b) == "Module" for b in cls.bases):
        return True
    return any(isinstance(n, ast.Call) and ctx.resolve(n.func).startswith("torch.")
               for n in walk(getattr(fn, "body", [])))


def _truth_tests(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.If | ast.While | ast.IfExp):
        test = node.test
        return list(test.values) if isinstance(test, ast.BoolOp) else [test]
    return []


_FIX = ("keep shapes fixed so the host never waits: `torch.where(mask, a, b)`, `x * mask` or "
        "`x.masked_fill(~mask, 0)` instead of `x[mask]`; `torch.nonzero(m, as_tuple=False)` only "
        "outside the step (or `nonzero_static(size=...)`); call the op unconditionally instead "
        "of testing `mask.any()` (`masked_fill` with an all-False mask is a no-op); "
        "`torch.cuda.set_sync_debug_mode(\"warn\")` lists every sync that remains")


def data_dependent_syncs(ctx: Context) -> None:
    """``script.sync-in-step-loop`` for masks, data-sized outputs and truth values."""
    if not ctx.uses("torch"):
        return
    for node in ast.walk(ctx.tree):
        what = ""
        if isinstance(node, ast.Subscript) and is_mask(node.slice, scope_of(ctx, node)):
            what = (f"indexing `{ast.unparse(node.value)[:30]}` with a boolean mask runs "
                    "`nonzero` to find the indices, and its size is known only on the device")
            base = node.value
        elif isinstance(node, ast.Call) and (ctx.resolve(node.func) in _SIZED_BY_DATA or (
                last_name(node) in _SIZED_METHODS and isinstance(node.func, ast.Attribute))
                or ctx.resolve(node.func) == "torch.where" and len(node.args) == 1):
            what = (f"`{ast.unparse(node.func)[-20:]}` returns a tensor sized by the data: the "
                    "host waits for the device to learn its size")
            base = node.args[0] if node.args else getattr(node.func, "value", node)
        else:
            tests = [t.operand if isinstance(t, ast.UnaryOp) and isinstance(t.op, ast.Not)
                     else t for t in _truth_tests(node)]
            tests = [t for t in tests if isinstance(t, ast.Call) and (
                last_name(t) in ("any", "all") and isinstance(t.func, ast.Attribute)
                and not t.args or ctx.resolve(t.func) in ("torch.any", "torch.all")
                and len(t.args) == 1)]  # ``if not torch.all(x.isfinite())`` (fairchem#2203)
            if not tests:
                continue
            what = (f"`if {ast.unparse(tests[0])[:30]}` turns a device tensor into a Python "
                    "bool: an `.item()`, a wait for the device")
            base = tests[0].args[0] if tests[0].args else (  # type: ignore[attr-defined]
                tests[0].func.value)  # type: ignore[attr-defined]
        fn = ctx.enclosing(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        scope = scope_of(ctx, node)
        if ctx.is_compiled_scope(node) or not _tensor_code(ctx, fn) or _numpy_value(
                ctx, base, scope):
            continue
        site = repeat_site(ctx, node)
        if site is None and getattr(fn, "name", "") != "forward":
            continue
        where = (f"in `{fn.name}`, which runs on every forward" if site is None else  # type: ignore[union-attr]
                 f"it runs on every iteration of the loop at {ctx.line(site[0].lineno)}"
                 if not isinstance(site[0], ast.FunctionDef) else
                 f"`{site[0].name}` runs once per item or batch")
        inner = fn is not None and any(isinstance(a, ast.For | ast.While) for a in _between(
            ctx, node, fn))
        # one such sync per step is often what the algorithm needs (variable-length
        # attention, sparse updates): info; repeated in a loop inside the step, a warning
        ctx.add("script.sync-in-step-loop", "warning" if inner else "info", node,
                f"{what}; {where}" + (", and again on every iteration of the loop around it"
                                      if inner else ""), fixtext=_FIX)


def _between(ctx: Context, node: ast.AST, stop: ast.AST) -> list[ast.AST]:
    out, cur = [], ctx.parents.get(node)
    while cur is not None and cur is not stop:
        out.append(cur)
        cur = ctx.parents.get(cur)
    return out
