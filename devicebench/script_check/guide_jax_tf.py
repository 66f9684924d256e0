"""Items of JAX's and TensorFlow's own performance guides as rules (issue 24, round 10).

- JAX, "Automatic differentiation" / ``jax.value_and_grad`` docs: a loss and its gradient
  computed by two calls run the forward pass twice.
- TensorFlow, "Better performance with the tf.data API", *Parallelizing data extraction*:
  ``interleave`` without ``num_parallel_calls`` reads its sources one at a time.

Both are ``info`` (the guides' "consider"). ``tests/fixtures/scripts/guides.md`` lists every
guide item and which rule covers it.
"""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import blocks, last_name, walk
from devicebench.script_check.context import Context, rule
from devicebench.script_check.data_rules import _pipelines

_WRAP = {"jax.jit", "jax.pmap", "equinox.filter_jit", "flax.nnx.jit"}
_GRAD = {"jax.grad", "equinox.filter_grad"}


def _unwrap(ctx: Context, node: ast.AST) -> tuple[str, bool] | None:
    """(base function name, whether it is its gradient) of ``jit(grad(f))``-like values."""
    grad = False
    while isinstance(node, ast.Call) and node.args:
        q = ctx.resolve(node.func)
        if q in _GRAD:
            grad = True
        elif q not in _WRAP:
            return None
        node = node.args[0]
    return (node.id, grad) if isinstance(node, ast.Name) else None


@rule("script.separate-loss-and-grad",
      "the loss and its gradient computed by two calls on the same batch",
      "`{grad}` runs the forward pass again to differentiate it, so the step runs the model's "
      "forward twice; `jax.value_and_grad` returns both from one forward and one backward "
      "pass (JAX docs, \"Automatic differentiation\": value_and_grad \"evaluates both fun and "
      "the gradient of fun\"; awf/functional-transformer#3)",
      "`loss, grads = jax.value_and_grad({base})(...)` (jit the result) and drop the separate "
      "loss call",
      source="https://jax.readthedocs.io/en/latest/automatic-differentiation.html; "
             "https://jax.readthedocs.io/en/latest/_autosummary/jax.value_and_grad.html")
def separate_loss_and_grad(ctx: Context) -> None:
    if not ctx.uses("jax"):
        return
    names: dict[str, tuple[str, bool]] = {}
    for node in ast.walk(ctx.tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(
                node.targets[0], ast.Name) and (u := _unwrap(ctx, node.value)):
            names[node.targets[0].id] = u
    for fn in ctx.funcs:
        names.setdefault(fn, (fn, False))
    for block in blocks(ctx.tree):
        plain: dict[tuple[str, str], ast.Call] = {}
        grads: dict[tuple[str, str], str] = {}
        for stmt in block:
            if isinstance(stmt, ast.FunctionDef | ast.ClassDef | ast.For | ast.While):
                continue
            for call in (n for n in walk([stmt]) if isinstance(n, ast.Call)):
                args = ast.unparse(ast.Tuple(elts=list(call.args), ctx=ast.Load()))
                if isinstance(call.func, ast.Name) and call.func.id in names:
                    base, grad = names[call.func.id]
                    if grad:
                        grads[(base, args)] = call.func.id
                    else:
                        plain.setdefault((base, args), call)
                elif isinstance(call.func, ast.Call) and (u := _unwrap(ctx, call.func)) and u[1]:
                    grads[(u[0], args)] = ast.unparse(call.func)[:40]
        for key, call in plain.items():
            if key in grads:
                ctx.add("script.separate-loss-and-grad", "info", call,
                        f"`{ast.unparse(call.func)}` and `{grads[key]}` on the same arguments",
                        grad=grads[key], base=key[0])


@rule("script.tfdata-serial-interleave",
      "`Dataset.interleave` reads its sources one at a time",
      "without `num_parallel_calls`, `interleave` opens and reads the files it interleaves "
      "sequentially; with remote or slow storage the pipeline waits on each read in turn "
      "(TensorFlow guide \"Better performance with the tf.data API\", Parallelizing data "
      "extraction)",
      "`.interleave(fn, cycle_length=..., num_parallel_calls=tf.data.AUTOTUNE)`",
      source="https://www.tensorflow.org/guide/data_performance#parallelizing_data_extraction")
def tfdata_serial_interleave(ctx: Context) -> None:
    if not ctx.uses("tensorflow"):
        return
    seen: set[int] = set()
    for seq in _pipelines(ctx):
        for c in seq:
            if last_name(c) == "interleave" and id(c) not in seen and not any(
                    k.arg == "num_parallel_calls" for k in c.keywords) and len(c.args) < 4:
                seen.add(id(c))
                ctx.add("script.tfdata-serial-interleave", "info", c)
