"""JAX rules: work left outside ``jax.jit`` and per-element loops over jitted functions."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from devicebench.script_check.ast_tools import (
    LOOPS,
    dotted,
    last_name,
    walk,
)
from devicebench.script_check.context import Context, rule

_GRADS = ("jax.grad", "jax.value_and_grad", "jax.jacfwd", "jax.jacrev", "jax.hessian",
          "equinox.filter_grad", "equinox.filter_value_and_grad",
          "jax.vmap")
_TREE_MAPS = ("jax.tree_util.tree_map", "jax.tree.map", "jax.tree_map")
_STEP = ("the whole step under one `@jax.jit`: `@jax.jit\\ndef train_step(params, opt_state, "
         "x, y):\\n    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)\\n    updates, "
         "opt_state = optimizer.update(grads, opt_state, params)\\n    return "
         "optax.apply_updates(params, updates), opt_state, loss`")


def _step_calls(ctx: Context) -> Iterator[tuple[ast.Call, ast.AST, str]]:
    """Calls made on every iteration of a loop outside jit: (call, loop, via-function).
    The loop's calls of this file's functions are followed, by name (``step(...)``) or as a
    method (``solver.step_fn(...)``, ``self.train_step(...)``: a step kept on a class)."""
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, LOOPS) or ctx.is_compiled_scope(loop):
            continue
        for n in walk(loop.body, lambda x: isinstance(x, LOOPS)):
            if not isinstance(n, ast.Call):
                continue
            yield n, loop, ""
            fn = local_callee(ctx, n)
            if fn is not None and fn.name not in ctx.compiled:
                for m in walk(fn.body):
                    if isinstance(m, ast.Call):
                        yield m, loop, fn.name


def local_callee(ctx: Context, call: ast.Call) -> ast.FunctionDef | None:
    """The function of this file a call runs: ``f(...)``, or ``obj.f(...)`` when ``f`` is
    defined as a method of a class of this file (and nowhere else under that name)."""
    if isinstance(call.func, ast.Name):
        fn = ctx.funcs.get(call.func.id)
        return fn if isinstance(fn, ast.FunctionDef) else None
    if not isinstance(call.func, ast.Attribute):
        return None
    fn = ctx.funcs.get(call.func.attr)
    if not isinstance(fn, ast.FunctionDef) or not isinstance(ctx.parents.get(fn), ast.ClassDef):
        return None
    return fn if not ctx.is_compiled_scope(fn.body[0]) else None


def _where(ctx: Context, call: ast.Call, loop: ast.AST, via: str) -> tuple[ast.AST, str]:
    """Where an un-jitted step is reported (the judge's convention, issue 24): at the ``def``
    of the function to compile -- the step function the loop calls, or the function given to
    ``jax.value_and_grad`` when the loop calls the gradient itself -- else at the call."""
    if via:
        return ctx.funcs[via], (f"`{via}` runs un-jitted on every iteration of the loop at "
                                f"{ctx.line(loop.lineno)}: `{ast.unparse(call)[:60]}` "
                                f"({ctx.line(call.lineno)})")
    return call, f"runs un-jitted on every iteration in the loop at {ctx.line(loop.lineno)}"


def is_grad_value(ctx: Context, node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and ctx.resolve(node.func) in _GRADS


@rule("script.jax-grad-outside-jit",
      "`{grad}` evaluated outside `jax.jit` on every step",
      "outside `jit` JAX runs the transformed function primitive by primitive, each a "
      "separate dispatch from Python, and a `jax.grad(f)` / `jax.vmap(f)` built per call "
      "re-traces `f` every time: a "
      "small model becomes dispatch-bound, often slower on a GPU than on a CPU "
      "(jax-ml/jax#1498: 57 s vs 0.75 s per epoch)",
      "put " + _STEP)
def grad_outside_jit(ctx: Context) -> None:
    if not ctx.uses("jax"):
        return
    unjitted = {n for n, vs in ctx.assigns.items() for v in vs
                if is_grad_value(ctx, v) and n not in ctx.compiled}
    for call, loop, via in _step_calls(ctx):
        if is_grad_value(ctx, call.func):  # jax.grad(f)(params, ...)
            grad = ctx.resolve(call.func.func)  # type: ignore[attr-defined]
        elif isinstance(call.func, ast.Name) and call.func.id in unjitted:
            grad = call.func.id
        else:
            continue
        node, seen = _where(ctx, call, loop, via)
        if not via and isinstance(call.func, ast.Name):  # g = jax.value_and_grad(loss); g(...)
            f = next((v.args[0] for v in ctx.assigns.get(call.func.id, [])
                      if isinstance(v, ast.Call) and v.args), None)
            if isinstance(f, ast.Name) and isinstance(ctx.funcs.get(f.id), ast.FunctionDef):
                node = ctx.funcs[f.id]
                seen = (f"`{call.func.id}` differentiates `{f.id}` op by op, un-jitted, on every "
                        f"iteration of the loop at {ctx.line(loop.lineno)} "
                        f"({ctx.line(call.lineno)})")
        ctx.add("script.jax-grad-outside-jit", "warning", node, seen, grad=grad)


@rule("script.jax-update-outside-jit",
      "optimizer update outside `jax.jit`",
      "`{api}` walks the parameter pytree and runs several small ops per leaf; outside "
      "`jit` each is a separate dispatch from Python on every step (google-deepmind/"
      "optax#319: 28 s on a GPU vs 2 s on a CPU until the update moved under jit)",
      "put " + _STEP)
def update_outside_jit(ctx: Context) -> None:
    if not ctx.uses("jax"):
        return
    optimizers = {n for n, vs in ctx.assigns.items() for v in vs
                  if isinstance(v, ast.Call) and ctx.resolve(v.func).startswith("optax.")}
    for call, loop, via in _step_calls(ctx):
        q = ctx.resolve(call.func)
        recv = dotted(call.func.value) if isinstance(call.func, ast.Attribute) else ""
        if q == "optax.apply_updates" or q in _TREE_MAPS and len(call.args) >= 3 or (
                last_name(call) == "update" and recv.split(".")[0] in optimizers) or (
                last_name(call) == "apply_gradients" and any(k.arg == "grads"
                                                             for k in call.keywords)):
            if not via and grad_site(ctx, loop) is not None:
                continue  # reported with the gradient, at the function to compile
            node, seen = _where(ctx, call, loop, via)
            if via and _grad_compiled(ctx, ctx.funcs[via]):
                node = _statement(ctx, call)  # only the update runs un-jitted (round 17)
            ctx.add("script.jax-update-outside-jit", "warning", node, seen,
                    api=ast.unparse(call.func))


def _grad_compiled(ctx: Context, fn: ast.AST) -> bool:
    """``fn`` gets its gradient from a compiled function (``grads = pgrad(params, x)``,
    ``pgrad = jax.pmap(jax.grad(loss))``): the step's un-jitted part is its update
    statement, where the finding goes (google/learn-oss-with-google#5, issue 24 round 17)."""
    return any(isinstance(c.func, ast.Name) and c.func.id in ctx.compiled and any(
        is_grad_value(ctx, m) for v in ctx.assigns.get(c.func.id, []) for m in ast.walk(v))
        for c in ctx.calls(fn.body))


def _statement(ctx: Context, n: ast.AST) -> ast.AST:
    cur = n
    while cur is not None and not isinstance(cur, ast.stmt):
        cur = ctx.parents.get(cur)
    return cur or n


def grad_site(ctx: Context, loop: ast.AST) -> object | None:
    """The finding of this loop's un-jitted gradient (the step it belongs to), if any."""
    line, span = ctx.line(getattr(loop, "lineno", 0)), range(
        getattr(loop, "lineno", 0), (getattr(loop, "end_lineno", 0) or 0) + 1)
    return next((f for f in ctx.found.values() if f.id == "script.jax-grad-outside-jit"
                 and f"loop at {line}" in f.observed and not any(
                     f.location == ctx.locate(i) for i in span)), None)


@rule("script.jax-scalar-loop",
      "jitted `{fn}` called once per element from a Python loop",
      "each call is a separate dispatch (~5-10 us plus a host round trip to build the "
      "argument) doing one element's work: the device is idle almost all the time",
      "vectorise over the whole array: `jax.vmap({fn})(xs)` (or `jax.lax.map({fn}, xs)` to "
      "bound memory), jitted once")
def scalar_loop(ctx: Context) -> None:
    jitted = {n for n, k in ctx.compiled.items() if k == "jax"}
    if not jitted:
        return
    for node in ast.walk(ctx.tree):
        if isinstance(node, ast.ListComp | ast.GeneratorExp):
            targets = {n.id for g in node.generators for n in ast.walk(g.target)
                       if isinstance(n, ast.Name)}
            calls = [node.elt]
        elif (isinstance(node, ast.Call) and last_name(node) == "append"
              and isinstance(loop := ctx.enclosing(node, LOOPS), ast.For)):
            targets = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
            calls = list(node.args)
        else:
            continue
        for c in (m for e in calls for m in ast.walk(e)):
            if (isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id in jitted
                    and any(isinstance(a, ast.Name) and a.id in targets
                            for arg in c.args for a in ast.walk(arg))):
                ctx.add("script.jax-scalar-loop", "warning", c,
                        "called with the loop variable, one element at a time", fn=c.func.id)


def unjitted_flax_models(ctx: Context) -> None:
    """``script.jax-host-op-in-loop`` for a Flax model from ``transformers``
    (``FlaxWav2Vec2ForCTC.from_pretrained(...)``) called in a loop outside ``jax.jit``: its
    ``__call__`` is not compiled, so every call runs the network op by op
    (huggingface/transformers#19108, sanchit-gandhi: Flax is faster "**if** the `__call__`
    method is just in time (JIT) compiled")."""
    flax = {n for n, vs in ctx.assigns.items() for v in vs if isinstance(v, ast.Call)
            and last_name(v) == "from_pretrained" and dotted(v.func).startswith("Flax")}
    flax -= set(ctx.compiled)
    # a Flax Linen module (flax.linen.Dense(...), or a class of this file deriving from
    # nn.Module in a Flax script) run with `module.apply(params, x)` (google/flax#1080,
    # jheek: "the dispatch overheads disappear once you compile")
    linen_classes = {c.name for c in ctx.classes.values() if ctx.uses("flax") and any(
        ctx.resolve(b).startswith("flax.linen") for b in c.bases)}
    linen = {n for n, vs in ctx.assigns.items() for v in vs if isinstance(v, ast.Call) and (
        ctx.resolve(v.func).startswith("flax.linen.") and last_name(v)[:1].isupper()
        or isinstance(v.func, ast.Name) and v.func.id in linen_classes)}
    jitted = {ast.unparse(c.args[0]) for c in ctx.calls() if ctx.compiler(c.func) and c.args}
    for call, loop, via in _step_calls(ctx):
        f = call.func
        if not via and isinstance(f, ast.Attribute) and f.attr == "apply" and isinstance(
                f.value, ast.Name) and f.value.id in linen and f"{f.value.id}.apply" not in jitted:
            ctx.add("script.jax-host-op-in-loop", "warning", call,
                    f"`{f.value.id}` is a Flax module applied un-jitted on every iteration of "
                    f"the loop at {ctx.line(loop.lineno)}", op=f"{f.value.id}.apply(...)",
                    why="outside `jit` every primitive of the module is dispatched from "
                        "Python on each call, plus Flax's own per-call overhead "
                        "(google/flax#1080: 5-10 ms against 350 us for the bare `jnp.dot`; "
                        "jheek: \"the dispatch overheads disappear once you compile\")",
                    fix=f"jit it once: `apply = jax.jit({f.value.id}.apply)` and call "
                        "`apply(params, x)` in the loop (or jit the whole step)")
    for call, loop, via in _step_calls(ctx):
        if not via and isinstance(call.func, ast.Name) and call.func.id in flax:
            ctx.add("script.jax-host-op-in-loop", "warning", call,
                    f"`{call.func.id}` is a Flax model called un-jitted on every iteration of "
                    f"the loop at {ctx.line(loop.lineno)}", op=f"{call.func.id}(...)",
                    why="outside `jit` JAX dispatches every primitive of the network from "
                        "Python, one at a time, on every call (huggingface/transformers#19108: "
                        "1.14 s per call against PyTorch's 38 ms until the call is jitted)",
                    fix=f"compile the forward once: `forward = jax.jit({call.func.id}.__call__)`"
                        " (or jit a function that calls it) and call that in the loop")
