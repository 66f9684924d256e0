"""Pitfall kinds first seen in corpus_round9's dev half (issue 24, round 10), each written as
the general form its thread names, all ``info`` (each can be what the code needs):

- ``jax.lax.map`` runs its function over the leading axis one element at a time (a
  ``scan``); ``jax.vmap`` runs it once on the whole batch.
- a tokenizer decoding the whole growing token list on every generated token: quadratic in
  the length of the generation.
- a constant tensor registered as a module buffer in a script that trains with
  DistributedDataParallel: DDP re-broadcasts every buffer from rank 0 before each forward
  (``broadcast_buffers=True`` is its default).
"""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import LOOPS, const, dotted, keyword, last_name, walk
from devicebench.script_check.context import Context, rule


@rule("script.lax-map-not-vmap",
      "`jax.lax.map` over a batch runs its function one element at a time",
      "`lax.map` lowers to a `lax.scan` over the leading axis: the elements run sequentially, "
      "each with the batch-of-one shapes, and no batched matmul reaches the device "
      "(reservoirpy/reservoirpy#239: 64 series, 1.83 s -> 0.24 s on an L4 with `jax.vmap`). "
      "It is the right choice only when the batched version does not fit in memory",
      "`jax.vmap(f)(xs)` (same numerics); if memory is the reason for `lax.map`, "
      "`jax.lax.map(f, xs, batch_size=k)` (JAX >= 0.4.31) vectorises k elements at a time",
      source="https://jax.readthedocs.io/en/latest/_autosummary/jax.lax.map.html")
def lax_map_not_vmap(ctx: Context) -> None:
    if not ctx.uses("jax"):
        return
    for call in ctx.calls():
        if ctx.resolve(call.func) == "jax.lax.map" and keyword(call, "batch_size") is None:
            ctx.add("script.lax-map-not-vmap", "info", call)


def _grown_in(loop: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Call) and last_name(n) in ("append", "extend")
               and isinstance(n.func, ast.Attribute) and dotted(n.func.value) == name
               for n in walk(loop.body))  # type: ignore[attr-defined]


@rule("script.decode-all-tokens-per-step",
      "the whole generated sequence is decoded again on every new token",
      "`{call}` runs on a list that grows by one token per iteration, so a generation of n "
      "tokens decodes 1 + 2 + ... + n tokens -- quadratic, and on the host between two "
      "device steps (ml-explore/mlx-examples#609: streaming only the new part, 85.8 -> 90.7 "
      "tokens/s for 500 tokens)",
      "decode incrementally: keep the text decoded so far and decode only the tokens added "
      "since the last printable boundary (a streaming detokenizer, e.g. mlx_lm's "
      "`StreamingDetokenizer` or Hugging Face's `TextStreamer`), or decode once after the loop")
def decode_all_tokens(ctx: Context) -> None:
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, LOOPS):
            continue
        for call in (n for n in walk(loop.body, lambda x: isinstance(x, LOOPS))
                     if isinstance(n, ast.Call)):
            if (last_name(call) in ("decode", "batch_decode") and call.args
                    and isinstance(call.func, ast.Attribute)
                    and "token" in dotted(call.func.value).lower()
                    and isinstance(call.args[0], ast.Name)
                    and _grown_in(loop, call.args[0].id)):
                ctx.add("script.decode-all-tokens-per-step", "info", call,
                        f"`{call.args[0].id}` gains a token on every iteration of the loop at "
                        f"{ctx.line(loop.lineno)}", call=ast.unparse(call)[:50])


_CONSTANT_BUILDERS = {"tril", "triu", "ones", "zeros", "arange", "eye", "full", "tensor",
                      "linspace", "randn", "rand"}


def _ddp_calls(ctx: Context) -> list[ast.Call]:
    return [c for c in ctx.calls()
            if "DistributedDataParallel" in ctx.resolve(c.func) or last_name(c) == "DDP"]


@rule("script.ddp-broadcast-buffers",
      "a constant buffer re-broadcast by DistributedDataParallel on every step",
      "DDP's default `broadcast_buffers=True` sends every registered buffer from rank 0 to "
      "all ranks before each forward; `{name}` is built once and never changes, so the "
      "broadcast is pure communication on the critical path (karpathy/nanoGPT#151: up to 8% "
      "on 8x3090 for the causal mask; more across nodes). Buffers that do change per step "
      "(BatchNorm running statistics) are what the broadcast is for",
      "when no buffer needs syncing: `DistributedDataParallel(model, ..., "
      "broadcast_buffers=False)`; otherwise keep the constant out of the broadcast (list it "
      "in `model._ddp_params_and_buffers_to_ignore`, or compute it in forward / use "
      "`F.scaled_dot_product_attention(is_causal=True)` for a causal mask)",
      source="https://pytorch.org/docs/stable/generated/torch.nn.parallel."
             "DistributedDataParallel.html (broadcast_buffers)")
def ddp_broadcast_buffers(ctx: Context) -> None:
    if not ctx.uses("torch"):
        return
    ddp = _ddp_calls(ctx)
    if not ddp or any(const(keyword(c, "broadcast_buffers")) is False for c in ddp):
        return
    for call in ctx.calls():
        if (last_name(call) == "register_buffer" and len(call.args) >= 2
                and isinstance(call.func, ast.Attribute) and dotted(call.func.value) == "self"
                and any(isinstance(n, ast.Call) and last_name(n) in _CONSTANT_BUILDERS
                        for n in ast.walk(call.args[1]))):
            name = ast.unparse(call.args[0])
            ctx.add("script.ddp-broadcast-buffers", "info", call,
                    f"buffer {name} in a script that wraps its model in DDP at "
                    f"{ctx.line(ddp[0].lineno)} without `broadcast_buffers=False`", name=name)
