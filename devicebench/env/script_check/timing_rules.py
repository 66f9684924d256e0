"""Rules about when the host waits for the device: timing loops, per-step syncs, tiny ops."""

from __future__ import annotations

import ast

from devicebench.env.script_check.ast_tools import (
    CLOCKS,
    LOOPS,
    Context,
    blocks,
    dotted,
    outer_loops,
    rule,
    skip_in_step,
    walk,
)

OPS = "run `devicebench ops` for a sweep with warm-up, sync and the CPU/GPU crossover size"


@rule("script.unsynced-timing",
      "timing loop without a device sync",
      "tensor ops are dispatched asynchronously: without a sync the clock measures Python "
      "and dispatch overhead (~10-25 us per eager op), not the device's work; with tiny "
      "tensors that overhead is all there is, so CPU vs GPU reads ~1x",
      "sync before reading the clock ({sync}), warm up first, and move the loop into the "
      "graph ({graph}) or time one large op; or " + OPS)
def unsynced_timing(ctx: Context) -> None:
    for node in ctx.calls():
        q = ctx.resolve(node.func)
        if q in ("timeit.timeit", "timeit.repeat") and node.args:
            body = node.args[0].body if isinstance(node.args[0], ast.Lambda) else node.args[0]
            op = ctx.search([body], ctx.is_tensor_op)
            if op is not None and ctx.search([body], ctx.is_sync) is None:
                _timing(ctx, node, op, f"`{q}` times `{ctx.code(op.lineno)}`")
    for block in blocks(ctx.tree):
        _timed_block(ctx, block)


def _timed_block(ctx: Context, stmts: list[ast.stmt]) -> None:
    clocks = [i for i, s in enumerate(stmts) if not hasattr(s, "body")
              and any(isinstance(n, ast.Call) and ctx.resolve(n.func) in CLOCKS
                      for n in walk([s]))]
    for a, b in zip(clocks, clocks[1:], strict=False):
        region = stmts[a + 1:b]
        if not region or ctx.search(region, ctx.is_sync) is not None:
            continue
        for loop in (lp for s in region for lp in outer_loops(s)):
            for call in (n for n in walk(loop.body) if isinstance(n, ast.Call)):
                op = ctx.search([call], ctx.is_tensor_op)
                if op is not None:
                    via = "" if op is call else f"`{ast.unparse(call)}`, which runs "
                    _timing(ctx, loop, op, f"the loop timed between lines {stmts[a].lineno} "
                            f"and {stmts[b].lineno} calls {via}`{ctx.code(op.lineno)}`"
                            f" (line {op.lineno}) and never waits for the device")
                    break


def _timing(ctx: Context, node: ast.AST, op: ast.AST, seen: str) -> None:
    q = ctx.resolve(op.func) if isinstance(op, ast.Call) else ""
    if q.startswith("jax."):
        sync, graph = "`jax.block_until_ready(result)`", "`jax.jit` + `jax.lax.fori_loop`"
    elif q.startswith("torch."):
        sync, graph = "`torch.cuda.synchronize()` / `torch.mps.synchronize()`", "batch the ops"
    else:
        sync, graph = "`result.numpy()` on the last result", "`@tf.function`"
    ctx.add("script.unsynced-timing", "warning", node, seen, sync=sync, graph=graph)


@rule("script.sync-in-step-loop",
      "host sync on every training step",
      "`.numpy()`/`.item()`/`float()` copies a value to the host and waits for the device "
      "to finish, so the next step cannot be queued while this one runs",
      "accumulate on the device (`total += loss`, or a `keras.metrics.Mean`) and read it "
      "every N steps (`if step % 100 == 0: print(float(loss))`) or once per epoch")
def sync_in_step_loop(ctx: Context) -> None:
    for node in ast.walk(ctx.tree):
        if not isinstance(node, LOOPS):
            continue
        body = node.body
        if ctx.search(body, ctx.is_step, skip_in_step) is None:
            continue
        direct = list(walk(body, skip_in_step))
        assigned = {n.id for s in direct if isinstance(s, ast.Assign | ast.AugAssign)
                    for t in getattr(s, "targets", [getattr(s, "target", None)])
                    for n in ast.walk(t) if isinstance(n, ast.Name)}
        for n in direct:
            f = n.func if isinstance(n, ast.Call) else None
            if (isinstance(f, ast.Attribute) and f.attr in ("numpy", "item") and not n.args
                    or isinstance(f, ast.Name) and f.id == "float" and len(n.args) == 1
                    and dotted(n.args[0]).split(".")[0] in assigned):
                ctx.add("script.sync-in-step-loop", "warning", n,
                        f"runs on every step of the training loop at line {node.lineno}")


@rule("script.gpu-tiny-op",
      "tiny tensor work placed on a GPU",
      "each GPU op costs a launch and, for host constants, a copy (tens of us), far more "
      "than the arithmetic on a few elements: CPU and GPU tie (~1x) or the CPU wins",
      "keep tiny work on the CPU; to compare devices use tensors of 1000x1000 or more, "
      "created on the device; or " + OPS)
def gpu_tiny_op(ctx: Context) -> None:
    for node in ast.walk(ctx.tree):
        if not isinstance(node, ast.With):
            continue
        for item in node.items:
            c = item.context_expr
            if not (isinstance(c, ast.Call) and ctx.resolve(c.func) == "tensorflow.device"
                    and c.args and isinstance(c.args[0], ast.Constant)
                    and "gpu" in str(c.args[0].value).lower()):
                continue
            op = ctx.search(node.body, lambda n: ctx.is_small_tensor(n) or (
                ctx.is_tensor_op(n) and any(isinstance(a, ast.Name) and a.id in ctx.small
                                            for a in walk(n.args))))
            if op is not None:
                ctx.add("script.gpu-tiny-op", "warning", node,
                        f"`{ctx.code(op.lineno)}` (line {op.lineno}) works on a tiny constant "
                        f"under tf.device({c.args[0].value!r})")
