"""What breaks a compiled model apart (issue 24, class 17): host reads inside the
``forward`` of a module given to ``torch.compile`` -- each one a graph break (Dynamo falls
back to Python there) and a device sync on every call."""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import dotted, last_name, walk
from devicebench.script_check.context import Context, FuncDef, rule


def compiled_classes(ctx: Context) -> set[str]:
    """Classes of this file whose instances are given to ``torch.compile``:
    ``torch.compile(Net().cuda())``, or ``model = Net(); ...; torch.compile(model)``."""
    out: set[str] = set()
    for c in ctx.calls():
        if ctx.resolve(c.func) != "torch.compile" or not c.args:
            continue
        exprs: list[ast.AST] = [c.args[0]]
        for n in ast.walk(c.args[0]):
            if isinstance(n, ast.Name):
                exprs += ctx.assigns.get(n.id, [])
        for e in exprs:
            out |= {n.func.id for n in ast.walk(e) if isinstance(n, ast.Call)
                    and isinstance(n.func, ast.Name) and n.func.id in ctx.classes}
    return out


def _reached(cls: ast.ClassDef, start: str, depth: int = 3) -> list[FuncDef]:
    """``start`` and the methods of ``cls`` it calls as ``self.name(...)``, a few deep."""
    methods = {m.name: m for m in cls.body if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef)}
    out: list[FuncDef] = []
    frontier = [start]
    for _ in range(depth):
        nxt = []
        for name in frontier:
            fn = methods.get(name)
            if fn is None or fn in out:
                continue
            out.append(fn)
            nxt += [c.func.attr for c in walk(fn.body) if isinstance(c, ast.Call)
                    and isinstance(c.func, ast.Attribute) and dotted(c.func.value) == "self"]
        frontier = nxt
    return out


@rule("script.graph-break-item",
      "host read inside a compiled model's forward",
      "`torch.compile` cannot trace `{call}`: the value has to be copied to the host, so "
      "Dynamo breaks the graph there and runs the rest as another graph, waiting for the device "
      "each time; a few breaks per forward can make the compiled model slower than eager "
      "(sgl-project/SpecForge#222: removing two `.item()` calls removed the break, \"additionally "
      "obtaining a slight speedup\")",
      "keep the value a tensor (`hits.sum() / (mask.sum() + 1e-6)`, `torch.where(...)` for a "
      "branch, a fixed bound instead of a data-dependent size), or set "
      "`torch._dynamo.config.capture_scalar_outputs = True`; check with "
      "`TORCH_LOGS=graph_breaks`")
def graph_break_item(ctx: Context) -> None:
    if not ctx.uses("torch"):
        return
    known = compiled_classes(ctx)
    for name in sorted(known | _unnamed_compiled_modules(ctx)):
        cls = ctx.classes[name]
        severity = "warning" if name in known else "info"
        for fn in _reached(cls, "forward"):
            for n in walk(fn.body):
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and (
                        n.func.attr in ("item", "tolist")) and not n.args:
                    where = "forward" if fn.name == "forward" else f"{fn.name}, which forward calls"
                    ctx.add("script.graph-break-item", severity, n,
                            f"`{name}` is compiled with torch.compile and this is in its "
                            f"`{where}`" if name in known else
                            f"`{name}` is a module of this file, the file compiles a model it "
                            f"is given (`torch.compile(...)`), and this is in `{name}`'s "
                            f"`{where}`", call=f".{last_name(n)}()")


def _unnamed_compiled_modules(ctx: Context) -> set[str]:
    """nn.Module classes of this file when the file compiles a model whose class it does not
    name (``def train(model): model = torch.compile(model)``): any of them may be the model
    or one of its parts (issue 24, round 11)."""
    given = False
    for c in ctx.calls():
        if ctx.resolve(c.func) == "torch.compile" and c.args and isinstance(c.args[0], ast.Name):
            fn = ctx.enclosing(c, (ast.FunctionDef, ast.AsyncFunctionDef))
            given = given or fn is not None and c.args[0].id in {a.arg for a in fn.args.args}
    if not given:
        return set()
    return {c.name for c in ctx.classes.values()
            if any(last_name(b) == "Module" for b in c.bases)}
