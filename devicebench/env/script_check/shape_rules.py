"""Rules about shapes that change across steps: recompilation of compiled steps (issue 24,
class 13): inputs whose size changes every step, a ragged last batch, Python numbers passed to
a compiled function."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from devicebench.env.script_check.ast_tools import LOOPS, keyword, last_name, target_names, walk
from devicebench.env.script_check.context import Context, rule

_CREATORS = {"randn", "rand", "zeros", "ones", "empty", "full", "randint", "normal", "uniform",
             "arange", "linspace"}
_RANDOM_INTS = {"numpy.random.randint", "random.randint", "random.randrange", "random.choice",
                "numpy.random.choice"}
_PADDERS = ("pad_sequence", "pad_to_longest", "pad_batch")
_HOW = {"torch": "`torch.compile`", "jax": "`jax.jit`", "tf": "`tf.function`"}
_FIX = {"torch": "pad every batch to one length (or a few bucket lengths), or mark the "
                 "dimension dynamic once (`torch._dynamo.mark_dynamic(x, 0)`); `TORCH_LOGS="
                 "recompiles` lists each recompilation and its cause",
        "jax": "pad to a few bucket sizes (jit compiles once per distinct shape); "
               "`jax.config.update('jax_log_compiles', True)` shows each compilation",
        "tf": "give the function an `input_signature` with `None` for the varying dimension, "
              "or `reduce_retracing=True`; pass tensors, not Python numbers"}


def _compiled_calls(ctx: Context, loop: ast.AST) -> Iterator[tuple[ast.Call, str]]:
    """Calls of compiled callables made by one iteration of ``loop`` (following local calls)."""
    seen: set[str] = set()

    def visit(body: list[ast.stmt], depth: int) -> Iterator[tuple[ast.Call, str]]:
        for n in walk(body, lambda x: isinstance(x, LOOPS)):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
                kind = ctx.compiled.get(n.func.id)
                if kind:
                    yield n, kind
                elif depth and n.func.id in ctx.funcs and n.func.id not in seen:
                    seen.add(n.func.id)
                    yield from visit(ctx.funcs[n.func.id].body, depth - 1)
    yield from visit(loop.body, 2)  # type: ignore[attr-defined]


class _Varying:
    """Names bound, inside one loop, to values whose size changes from one iteration to the
    next: random or per-iteration sizes, tensors created with them, padded batches."""

    def __init__(self, ctx: Context, loop: ast.For | ast.AsyncFor | ast.While) -> None:
        self.ctx = ctx
        self.sizes: set[str] = set()   # ints that change per iteration
        self.shaped: set[str] = set()  # tensors whose shape changes per iteration
        self.why: dict[str, str] = {}
        if isinstance(loop, ast.For | ast.AsyncFor):
            if isinstance(loop.iter, ast.Call) and last_name(loop.iter) == "range":
                self.sizes |= set(target_names(loop.target))
            elif isinstance(loop.iter, ast.Name) and any(
                    "shape" in loop.iter.id or "size" in loop.iter.id for _ in [0]):
                self.sizes |= set(target_names(loop.target))  # for n in shape_array
        for _ in range(2):
            for n in walk(loop.body, lambda x: isinstance(x, LOOPS)):
                if isinstance(n, ast.Assign):
                    for t in n.targets:
                        for name in target_names(t):
                            self._bind(name, n.value)

    def _bind(self, name: str, value: ast.expr) -> None:
        if isinstance(value, ast.Call) and self.ctx.resolve(value.func) in _RANDOM_INTS:
            self.sizes.add(name)
            self.why[name] = f"`{name}` is drawn at random each iteration"
        elif self.shape_of(value):
            self.shaped.add(name)
            self.why.setdefault(name, self.shape_of(value))

    def shape_of(self, node: ast.AST) -> str:
        """Why ``node``'s shape changes per iteration ("" if it does not, as far as seen)."""
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and n.id in self.shaped:
                return self.why.get(n.id, f"`{n.id}` changes shape")
            if isinstance(n, ast.Call) and last_name(n) in _PADDERS:
                return (f"`{last_name(n)}` pads each batch to its own longest element, so the "
                        "length changes from batch to batch")
            if isinstance(n, ast.Call) and last_name(n) in _CREATORS:
                args = n.args[1:] if self.ctx.resolve(n.func).startswith("jax.random.") else n.args
                names = {m.id for a in [*args, *(k.value for k in n.keywords if k.arg in (
                    "shape", "size"))] for m in ast.walk(a) if isinstance(m, ast.Name)}
                hit = names & self.sizes
                if hit:
                    v = sorted(hit)[0]
                    return (self.why.get(v, f"`{v}` changes every iteration") +
                            f" and sizes `{ast.unparse(n)[:60]}`")
        return ""


@rule("script.recompile-shapes",
      "a compiled function called with a different shape on every step",
      "{how} specialises the compiled code to the shapes (and Python numbers) it was called "
      "with: a new shape means tracing and compiling again (often seconds), so the loop "
      "spends its time compiling instead of running",
      "{fixtext}")
def recompile_shapes(ctx: Context) -> None:
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, LOOPS) or ctx.is_compiled_scope(loop):
            continue
        varying = _Varying(ctx, loop)
        for call, kind in _compiled_calls(ctx, loop):
            why = next((varying.shape_of(a) for a in [*call.args, *(k.value for k in
                        call.keywords)] if varying.shape_of(a)), "")
            if not why and kind in ("torch", "tf"):
                num = next((a.id for a in call.args if isinstance(a, ast.Name)
                            and a.id in varying.sizes), "")
                if num:
                    why = (f"the Python number `{num}` changes every iteration and is passed "
                           "as an argument: each new value is a new specialisation")
            if why:
                ctx.add("script.recompile-shapes", "warning", call, why, how=_HOW[kind],
                        fixtext=_FIX[kind])
                break


def _iterated(ctx: Context, name: str) -> ast.AST | None:
    """A loop over ``name`` (``for b in name`` / ``enumerate(name)``) that calls compiled code."""
    for loop in ast.walk(ctx.tree):
        if isinstance(loop, ast.For | ast.AsyncFor):
            it = loop.iter.args[0] if isinstance(loop.iter, ast.Call) and last_name(
                loop.iter) == "enumerate" and loop.iter.args else loop.iter
            if isinstance(it, ast.Name) and it.id == name and (
                    next(_compiled_calls(ctx, loop), None) is not None):
                return loop
    return None


def _xla_keras(ctx: Context) -> bool:
    return any(isinstance(c, ast.Call) and (
        isinstance(keyword(c, "jit_compile"), ast.Constant) and keyword(c, "jit_compile")
        .value is True or "TPUStrategy" in ast.unparse(c.func)) for c in ctx.calls())


@rule("script.ragged-last-batch",
      "the last batch of each epoch is smaller: the compiled step compiles again for it",
      "{n} is rarely a multiple of the batch size, so the final batch has another shape; "
      "{how} compiles a second version for it{extra}",
      "{fixtext}")
def ragged_last_batch(ctx: Context) -> None:
    for node in ctx.calls():
        q = ctx.resolve(node.func)
        if (q.endswith("DataLoader") and ctx.uses("torch")
                and keyword(node, "batch_sampler") is None):
            drop = keyword(node, "drop_last")
            if isinstance(drop, ast.Constant) and drop.value is True:
                continue
            target = ctx.parents.get(node)
            names = [t.id for t in getattr(target, "targets", []) if isinstance(t, ast.Name)]
            loop = next((lp for n in names if (lp := _iterated(ctx, n)) is not None), None)
            if loop is None:
                continue
            ctx.add("script.ragged-last-batch", "warning", drop if drop is not None else node,
                    f"the loop at {ctx.line(loop.lineno)} feeds its batches to a compiled "
                    "model", n="the dataset's length", how="`torch.compile`",
                    extra=" and marks the batch dimension dynamic, so the kernels of every "
                          "later step are less specialised (Lightning-AI/litgpt#794)",
                    fixtext="`DataLoader(..., drop_last=True)` (or pad the last batch)")
        elif (isinstance(node.func, ast.Attribute) and node.func.attr == "batch"
              and ctx.uses("tensorflow") and _xla_keras(ctx)
              and keyword(node, "drop_remainder") is None and len(node.args) < 2
              and _is_tf_data(ctx, node.func.value)):
            ctx.add("script.ragged-last-batch", "info", node,
                    "the model is compiled with XLA (`jit_compile=True` / a TPU strategy)",
                    n="the number of examples", how="XLA",
                    extra=" (once per distinct size, then cached)",
                    fixtext="`.batch(n, drop_remainder=True)` for training")


def _is_tf_data(ctx: Context, node: ast.AST, seen: set[str] | None = None) -> bool:
    """Whether ``node`` is (a chain on) a ``tf.data`` dataset, following assignments."""
    seen = set() if seen is None else seen
    for n in ast.walk(node):
        if isinstance(n, ast.Call) and ctx.resolve(n.func).startswith("tensorflow.data."):
            return True
        if isinstance(n, ast.Name) and n.id not in seen:
            seen.add(n.id)
            if any(_is_tf_data(ctx, v, seen) for v in ctx.assigns.get(n.id, [])):
                return True
    return False
