"""What crosses a compiled function's boundary on every call (issue 24, round 9).

A compiled function (``tf.function``, ``jax.jit``, ``torch.compile``, ``nnx.jit``) is cheap to
call only when what it is given looks the same each time. Two ways it does not:

- a Python callable made anew in the caller on every call (a ``lambda`` or nested ``def``
  passed as an argument): each new function object is a new cache key, so the function is
  traced again -- ``script.recompile-shapes`` (deel-ai/oodeel#53: "multiple retracings");
- Flax NNX objects (the model, the optimizer, metrics) given to an ``nnx.jit`` function on
  every step: ``nnx.jit`` walks and re-flattens their whole object graph in Python on each
  call -- ``script.nnx-jit-overhead`` (google/flax#4045, the Flax NNX performance guide).
"""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import last_name, walk
from devicebench.script_check.context import Context, rule
from devicebench.script_check.kinds import repeat_site, scope_of


def _fresh_callable(ctx: Context, arg: ast.AST, scope: ast.AST) -> str:
    """How ``arg`` is a function object made anew on each run of ``scope``, or ""."""
    if isinstance(arg, ast.Lambda):
        return "a lambda written in the call"
    if not isinstance(arg, ast.Name) or scope is ctx.tree:
        return ""
    for s in walk(getattr(scope, "body", [])):
        if isinstance(s, ast.Assign) and isinstance(s.value, ast.Lambda) and any(
                isinstance(t, ast.Name) and t.id == arg.id for t in s.targets):
            return f"`{arg.id}`, a lambda made on each call of `{scope.name}`"  # type: ignore[attr-defined]
    for s in getattr(scope, "body", []):
        if isinstance(s, ast.FunctionDef) and s.name == arg.id:
            return f"`{arg.id}`, a function defined anew on each call of `{scope.name}`"  # type: ignore[attr-defined]
    return ""


def fresh_callable_retraces(ctx: Context) -> None:
    """``script.recompile-shapes`` for a compiled function given a new callable per call."""
    for call in ctx.calls():
        kind = ctx.compiled.get(last_name(call), "")
        if not kind or ctx.is_compiled_scope(call):
            continue
        scope = scope_of(ctx, call)
        for a in call.args:
            how = _fresh_callable(ctx, a, scope)
            if how and (scope is not ctx.tree or repeat_site(ctx, call) is not None):
                ctx.add("script.recompile-shapes", "warning", call,
                        f"`{last_name(call)}` is compiled and is given {how}",
                        how=f"`{last_name(call)}`", why=(
                            "a compiled function is cached per argument signature, and a "
                            "Python function argument is part of the key by identity: a "
                            "new function object on every call means a new trace and "
                            "compile on every call (deel-ai/oodeel#53: \"multiple "
                            "retracings\")"),
                        fixtext="define the callable once (at module level, or once in "
                            "`__init__`) and pass the data it closes over as tensor "
                            "arguments; or drop the compiled decorator from a helper that "
                            "takes functions and compile its caller instead")
                break


@rule("script.nnx-jit-overhead",
      "`nnx.jit` step re-flattens the model and optimizer on every call",
      "`{fn}` is decorated with `nnx.jit` and called on every iteration of the loop at {where}: "
      "before and after each call `nnx.jit` walks the Python object graph of every NNX "
      "object it is given (model, optimizer, metrics) to split it into state and back -- "
      "per-call Python work that grows with the model's size and is not part of the compiled "
      "step (google/flax#4045; the Flax NNX \"Performance considerations\" guide, "
      "google/flax#4384)",
      "split once before the loop and jit a pure function of the state: `graphdef, state = "
      "nnx.split((model, optimizer, metrics))`; `@jax.jit def step(graphdef, state, batch): "
      "model, optimizer, metrics = nnx.merge(graphdef, state); ...; return nnx.state((model, "
      "optimizer, metrics))`; merge back after the loop (or use `nnx.cached_partial` where the "
      "installed Flax has it)")
def nnx_jit_overhead(ctx: Context) -> None:
    fresh_callable_retraces(ctx)  # the boundary's other cost (its own id, recompile-shapes)
    if not ctx.uses("flax"):
        return
    for fn in ctx.funcs.values():
        if not any(ctx.resolve(d.func if isinstance(d, ast.Call) else d) == "flax.nnx.jit"
                   for d in fn.decorator_list):
            continue
        for call in ctx.calls():
            if isinstance(call.func, ast.Name) and call.func.id == fn.name and call.args:
                site = repeat_site(ctx, call)
                if site is not None:
                    ctx.add("script.nnx-jit-overhead", "info", fn,
                            f"`{fn.name}` is an `nnx.jit` function called on every iteration",
                            fn=fn.name, where=ctx.line(site[0].lineno))
                    break
