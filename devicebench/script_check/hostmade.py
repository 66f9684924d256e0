"""Which tensor expressions are made in host memory (issue 24, class 16): followed through
the local variables and helper functions of this file, so that ``helper(...).to(device)``
and ``grid = torch.meshgrid(...)`` ... ``grid.to(device)`` are seen as host-made tensors
copied to the device (princeton-vl/RAFT#113, pytorch/vision#8500)."""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import last_name, target_names, walk
from devicebench.script_check.context import Context, FuncDef

FACTORIES = {"randn", "rand", "randint", "zeros", "ones", "empty", "full", "arange",
             "linspace", "tensor", "eye", "randperm", "logspace"}
LEGACY = {"FloatTensor", "LongTensor", "IntTensor", "ByteTensor", "BoolTensor",
          "DoubleTensor", "HalfTensor", "Tensor"}  # torch.FloatTensor(2, 3): host memory
_COMBINE = {"stack", "cat", "concat", "meshgrid", "outer", "cartesian_prod", "where"}
# methods that keep a tensor where it is (in place, views, dtype casts, copies)
_KEEP = {"fill_", "zero_", "normal_", "uniform_", "float", "long", "int", "half", "double",
         "bool", "repeat", "view", "reshape", "unsqueeze", "squeeze", "expand", "t", "permute",
         "contiguous", "clone", "flatten", "transpose", "flip", "expand_as"}


def _unwrap(node: ast.AST) -> ast.AST:
    while True:
        if isinstance(node, ast.Subscript | ast.Starred):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
                node.func.attr in _KEEP):
            node = node.func.value
        else:
            return node


def _elements(args: list[ast.expr]) -> list[ast.AST]:
    out: list[ast.AST] = []
    for a in args:
        out += _elements(list(a.elts)) if isinstance(a, ast.List | ast.Tuple) else [a]
    return out


def host_made(ctx: Context, node: ast.AST, fn: FuncDef | None = None, depth: int = 3,
              seen: frozenset[str] = frozenset()) -> bool:
    """Whether ``node`` evaluates to a torch tensor made in host memory: a factory call
    without ``device=``, a combination (``stack``/``cat``/``meshgrid``) of such tensors, a
    view or in-place fill of one, a local variable of ``fn`` bound only to such values, or
    the return value of a function of this file that returns one."""
    node = _unwrap(node)
    if isinstance(node, ast.Call):
        if any(k.arg == "device" for k in node.keywords):
            return False
        name = last_name(node)
        if ctx.resolve(node.func).startswith("torch."):
            if name in FACTORIES or name in LEGACY:
                return True
            elts = _elements(list(node.args))
            if name in _COMBINE:
                return bool(elts) and all(host_made(ctx, e, fn, depth, seen) for e in elts)
            # any other torch op of host tensors (`torch.tril(torch.ones(n, n))`) computes
            # on the host and leaves its result there (awslabs/slapo#50)
            tensors = [e for e in elts if not isinstance(e, ast.Constant)]
            return bool(tensors) and name not in ("to", "as_tensor", "from_numpy") and all(
                host_made(ctx, e, fn, depth, seen) for e in tensors)
        callee = ctx.funcs.get(node.func.id) if isinstance(node.func, ast.Name) else None
        if callee is not None and depth:
            rets = [r.value for r in walk(callee.body)
                    if isinstance(r, ast.Return) and r.value is not None]
            return bool(rets) and all(host_made(ctx, r, callee, depth - 1) for r in rets)
        return False
    if isinstance(node, ast.Name) and fn is not None:
        if node.id in seen:
            return True  # `x = torch.stack(x)`: as host-made as x's other values
        if not depth:
            return False
        values = [s.value for s in walk(fn.body) if isinstance(s, ast.Assign)
                  and any(node.id in target_names(t) for t in s.targets)]
        if any(isinstance(s, ast.For) and node.id in target_names(s.target)
               for s in walk(fn.body)) or node.id in {a.arg for a in fn.args.args}:
            return False  # a parameter or loop variable: made by the caller
        return bool(values) and all(host_made(ctx, v, fn, depth - 1, seen | {node.id})
                                    for v in values)
    return False
