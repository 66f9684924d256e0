"""Rules about shapes that change across steps: recompilation of compiled steps (issue 24,
class 13): inputs whose size changes every step, a ragged last batch, Python numbers passed to
a compiled function."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from devicebench.script_check.ast_tools import LOOPS, keyword, last_name, target_names, walk
from devicebench.script_check.context import Context, rule
from devicebench.script_check.dataflow import param_constant
from devicebench.script_check.form_rules import concat_in_conditional
from devicebench.script_check.varying import PADDERS, PER_ITEM, Varying

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
        varying = Varying(ctx, loop)
        outer = ctx.enclosing(loop, LOOPS)
        while outer is not None and not ctx.is_compiled_scope(outer):
            varying.inherit(Varying(ctx, outer))  # type: ignore[arg-type]
            outer = ctx.enclosing(outer, LOOPS)
        for call, kind in _compiled_calls(ctx, loop):
            why = next((varying.shape_of(a) for a in [*call.args, *(k.value for k in
                        call.keywords)] if varying.shape_of(a)), "")
            if not why and kind in ("torch", "tf"):
                num = next((ast.unparse(a) for a in call.args if isinstance(
                    a, ast.Name | ast.Subscript) and ast.unparse(a) in varying.sizes), "")
                if num:
                    why = (varying.why.get(num, f"the Python number `{num}` changes every "
                                                "iteration") + "; it is passed as an argument "
                           "(a Python number, not a tensor): each new value is a new "
                           "specialisation")
            if why:
                guessed = any(isinstance(x, ast.Name) and x.id in varying.guess
                              for arg in call.args for x in ast.walk(arg)) or (
                    kind == "torch" and ("pads" in why or "tokenized" in why)
                    and _torch_mode(ctx, call) != "cuda-graphs")
                if guessed and ("pads" in why or "tokenized" in why):
                    why += ("; torch.compile recompiles once and then treats the length as "
                            "dynamic (less specialised kernels); with mode='reduce-overhead' "
                            "each length records its own CUDA graph")
                ctx.add("script.recompile-shapes", "info" if guessed else "warning", call, why,
                        how=_HOW[kind], fixtext=_FIX[kind])
    _static_compile_varying(ctx)


_SHAPED = ("torch.randn", "torch.rand", "torch.zeros", "torch.ones", "torch.empty", "torch.full")


def _static_compile_varying(ctx: Context) -> None:
    """``torch.compile(..., dynamic=False)`` -- written there or passed in through a
    parameter every caller gives ``False`` -- in a file whose loop builds inputs of a new shape
    on each iteration: "always specialize" (torch.compile's documentation), so each new
    shape is a full recompile (issue 24 round 14: urlesistiana, kijai/ComfyUI-KJNodes#454)."""
    loop = next((lp for lp in ast.walk(ctx.tree) if isinstance(lp, ast.For) and any(
        isinstance(c, ast.Call) and ctx.resolve(c.func) in _SHAPED and any(
            isinstance(x, ast.Name) and x.id in target_names(lp.target)
            for a in c.args for x in ast.walk(a)) for c in walk(lp.body))), None)
    if loop is None:
        return
    for call in ctx.calls():
        dyn = keyword(call, "dynamic") if ctx.resolve(call.func) == "torch.compile" else None
        fn = ctx.enclosing(call, (ast.FunctionDef, ast.AsyncFunctionDef))
        if isinstance(dyn, ast.Name) and isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            dyn = param_constant(ctx, fn, dyn.id)
        if isinstance(dyn, ast.Constant) and dyn.value is False:
            ctx.add("script.recompile-shapes", "info", call,
                    f"`dynamic=False` forbids dynamic shapes, and the loop at "
                    f"{ctx.line(loop.lineno)} builds inputs of a new shape per iteration: "
                    "each one compiles again", how=_HOW["torch"], fixtext=_FIX["torch"] + (
                        "; leave `dynamic` at its default (None) so the second shape marks "
                        "the dimension dynamic"))


def _torch_mode(ctx: Context, call: ast.Call) -> str:
    """"cuda-graphs" when the compiled callable was made with mode="reduce-overhead"."""
    name = call.func.id if isinstance(call.func, ast.Name) else ""
    for v in ctx.assigns.get(name, []):
        mode = keyword(v, "mode") if isinstance(v, ast.Call) else None
        if isinstance(mode, ast.Constant) and "reduce-overhead" in str(mode.value):
            return "cuda-graphs"
    return ""


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
    ragged_generator_batches(ctx)


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


def _benchmark_on(ctx: Context) -> ast.Assign | None:
    """``cudnn.benchmark = True``, or set from a setting that defaults to True
    (``config.get("cudnn_benchmark", True)``, ``getattr(args, "benchmark", True)``)."""
    for n in ast.walk(ctx.tree):
        if isinstance(n, ast.Assign) and _true_or_default_true(n.value) and any(
                ctx.resolve(t).endswith("cudnn.benchmark") for t in n.targets):
            return n
    return None


def _true_or_default_true(v: ast.expr) -> bool:
    if isinstance(v, ast.Constant):
        return v.value is True
    if isinstance(v, ast.Call) and last_name(v) in ("get", "getattr", "pop") and len(v.args) >= 2:
        return _true_or_default_true(v.args[-1])
    return False


def _varying_sizes(ctx: Context) -> str:
    """Why the script's input sizes vary from step to step ("" when nothing shows it)."""
    for loop in ast.walk(ctx.tree):
        if isinstance(loop, LOOPS):
            v = Varying(ctx, loop)
            for call in walk(loop.body):  # type: ignore[attr-defined]
                if isinstance(call, ast.Call):
                    why = next((v.shape_of(a) for a in call.args if v.shape_of(a)), "")
                    if why:
                        return f"{why} ({ctx.line(call.lineno)})"
    for call in ctx.calls():
        q = ctx.resolve(call.func)
        if ".models.detection." in q or ".models.segmentation." in q:
            return f"`{q.rsplit('.', 1)[-1]}` takes images of their own sizes"
        if last_name(call) in PADDERS:
            return f"`{last_name(call)}` gives each batch its own length"
    for loop in ast.walk(ctx.tree):
        if isinstance(loop, ast.For) and isinstance(loop.iter, ast.Name) and any(
                w in loop.iter.id.lower() for w in PER_ITEM) and any(
                isinstance(c, ast.Call) and any(w in last_name(c).lower() for w in (
                    "read", "load", "imread", "open")) for c in walk(loop.body)):
            return (f"the loop at {ctx.line(loop.lineno)} reads one `{loop.iter.id}` item per "
                    "step, each of its own size")
    return ""


@rule("script.cudnn-benchmark-varying",
      "`cudnn.benchmark = True` with input sizes that change",
      "the autotuner times every cuDNN algorithm for each new input shape and caches the "
      "winner per shape: with sizes that keep changing it re-tunes on most steps and runs "
      "slower than without it (pytorch/pytorch#2759; torchvision turns it off for detection)",
      "leave `torch.backends.cudnn.benchmark = False` for varying sizes, or pad/resize the "
      "inputs to a few fixed sizes and keep it on")
def cudnn_benchmark_varying(ctx: Context) -> None:
    node = _benchmark_on(ctx)
    if node is None:
        return
    why = _varying_sizes(ctx)
    if why:
        ctx.add("script.cudnn-benchmark-varying", "warning", node, why)


_CONCAT = ("torch.cat", "torch.concat", "numpy.concatenate", "numpy.append", "numpy.vstack",
           "numpy.hstack", "jax.numpy.concatenate", "tensorflow.concat", "numpy.stack")


@rule("script.growing-tensor",
      "an array grown by concatenation inside a loop",
      "`{fn}` allocates a new array and copies everything gathered so far on every "
      "iteration: quadratic time and memory traffic{compiled}",
      "collect the pieces in a Python list and concatenate once after the loop, or "
      "preallocate the full array and fill slices")
def growing_tensor(ctx: Context) -> None:
    concat_in_conditional(ctx)  # `t = cat([t, y]) if t is not None else y`; MLX (round 11)
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, LOOPS) or ctx.is_compiled_scope(loop):
            continue
        for n in walk(loop.body, lambda x: isinstance(x, LOOPS)):
            if not (isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
                    and ctx.resolve(n.value.func) in _CONCAT and n.value.args):
                continue
            names = set(target_names(n.targets[0]))
            first = n.value.args[0]
            parts = first.elts if isinstance(first, ast.Tuple | ast.List) else [first]
            if any(isinstance(p, ast.Name) and p.id in names for p in parts):
                fed = next((c for c, _ in _compiled_calls(ctx, loop) if any(
                    isinstance(x, ast.Name) and x.id in names for a in c.args
                    for x in ast.walk(a))), None)
                ctx.add("script.growing-tensor", "warning" if fed else "info", n,
                        f"`{ast.unparse(n)[:60]}` in the loop at {ctx.line(loop.lineno)}",
                        fn=ctx.resolve(n.value.func),
                        compiled="; and the compiled function it feeds sees a new shape, so "
                                 "it recompiles, every iteration" if fed else "")


def _ragged_slices(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.AST | None:
    """``x[i:i + bs]`` in a loop whose bound lets the last slice run short."""
    for loop in walk(fn.body):
        if not isinstance(loop, ast.While | ast.For):
            continue
        bound = loop.test if isinstance(loop, ast.While) else loop.iter
        if any(isinstance(b, ast.BinOp) and isinstance(b.op, ast.Sub | ast.Add)
               for b in ast.walk(bound)):
            continue  # `while i + bs <= n` / `range(0, n - bs + 1, bs)`: full batches only
        for n in walk(loop.body):
            sl = n.slice if isinstance(n, ast.Subscript) else None
            if (isinstance(sl, ast.Slice) and isinstance(sl.lower, ast.Name)
                    and isinstance(sl.upper, ast.BinOp) and isinstance(sl.upper.op, ast.Add)
                    and isinstance(sl.upper.left, ast.Name)
                    and sl.upper.left.id == sl.lower.id):
                return n
    return None


def ragged_generator_batches(ctx: Context) -> None:
    """A hand-written batch generator whose last batch is short, feeding compiled code."""
    for fn in ctx.funcs.values():
        if not any(isinstance(n, ast.Yield | ast.YieldFrom) for n in ast.walk(fn)):
            continue
        hit = _ragged_slices(ctx, fn)
        if hit is None:
            continue
        for loop in ast.walk(ctx.tree):
            if isinstance(loop, ast.For | ast.AsyncFor) and any(
                    isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
                    and c.func.id == fn.name for c in ast.walk(loop.iter)):
                call = next(_compiled_calls(ctx, loop), None)
                if call is not None:
                    ctx.add("script.ragged-last-batch", "info", hit,
                            f"`{fn.name}` yields these slices to the loop at "
                            f"{ctx.line(loop.lineno)}, which calls compiled "
                            f"`{ast.unparse(call[0].func)}`", n="the data's length",
                            how=_HOW[call[1]], extra=" (once per distinct size, then cached)",
                            fixtext="stop at the last full batch (`while start + batch_size "
                                    "<= n`), or pad the last one")
                    break
