"""Rules about shapes that change across steps: recompilation of compiled steps (issue 24,
class 13): inputs whose size changes every step, a ragged last batch, Python numbers passed to
a compiled function."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from devicebench.script_check.ast_tools import LOOPS, keyword, last_name, target_names, walk
from devicebench.script_check.context import Context, rule

_CREATORS = {"randn", "rand", "zeros", "ones", "empty", "full", "randint", "normal", "uniform",
             "arange", "linspace"}
_RANDOM_INTS = {"numpy.random.randint", "random.randint", "random.randrange", "random.choice",
                "numpy.random.choice"}
_PADDERS = ("pad_sequence", "pad_to_longest", "pad_batch")
_PER_ITEM = ("video", "path", "file", "image", "img")
_HOW = {"torch": "`torch.compile`", "jax": "`jax.jit`", "tf": "`tf.function`"}
_FIX = {"torch": "pad every batch to one length (or a few bucket lengths), or mark the "
                 "dimension dynamic once (`torch._dynamo.mark_dynamic(x, 0)`); `TORCH_LOGS="
                 "recompiles` lists each recompilation and its cause",
        "jax": "pad to a few bucket sizes (jit compiles once per distinct shape); "
               "`jax.config.update('jax_log_compiles', True)` shows each compilation",
        "tf": "give the function an `input_signature` with `None` for the varying dimension, "
              "or `reduce_retracing=True`; pass tensors, not Python numbers"}


def _shape_args(call: ast.Call, resolved: str) -> list[ast.expr]:
    """The positional arguments of a tensor creator that set its shape: not ``full``'s
    fill value, ``randint``'s bounds or ``normal``'s loc and scale, nor a JAX key."""
    name = last_name(call)
    if resolved.startswith("jax.random."):
        return call.args[1:]
    if name == "full":
        return call.args[:1]
    if name in ("randint", "normal", "uniform"):
        return call.args[2:]
    return call.args


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
        self.per_item = False  # a loop over files/videos/images: each has its own size
        self.guess: set[str] = set()  # shaped by a guess (the data's sizes are not in the file)
        if isinstance(loop, ast.For | ast.AsyncFor):
            if isinstance(loop.iter, ast.Call) and last_name(loop.iter) == "range":
                self.sizes |= set(target_names(loop.target))
            elif isinstance(loop.iter, ast.List | ast.Tuple) and len({ast.dump(e) for e in
                                                                    loop.iter.elts}) > 1:
                self.sizes |= set(target_names(loop.target))  # for n in [5, 8, 10]
                for name in target_names(loop.target):
                    self.why[name] = f"`{name}` takes the values of `{ast.unparse(loop.iter)}`"
            elif isinstance(loop.iter, ast.Name) and any(
                    "shape" in loop.iter.id or "size" in loop.iter.id for _ in [0]):
                self.sizes |= set(target_names(loop.target))  # for n in shape_array
            loader = loop.iter.args[0] if isinstance(loop.iter, ast.Call) and last_name(
                loop.iter) == "enumerate" and loop.iter.args else loop.iter
            if isinstance(loader, ast.Name) and any(
                    isinstance(v, ast.Call) and (any(
                        k.arg == "collate_fn" and "pad" in ast.unparse(k.value).lower()
                        for k in v.keywords) or _padded_batch(v))
                    for v in ctx.assigns.get(loader.id, [])):
                for name in target_names(loop.target):
                    self.shaped.add(name)
                    self.why[name] = (f"`{loader.id}` pads each batch to its own longest "
                                      "element (its collate_fn or padded_batch), so lengths "
                                      "change per batch")
            self.per_item = isinstance(loop.iter, ast.Name) and any(
                w in loop.iter.id.lower() for w in _PER_ITEM)
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
        elif name not in self.sizes and self._python_number_of(value):
            v = self._python_number_of(value)
            self.sizes.add(name)
            self.why[name] = (f"`{name}` is a Python number computed from `{v}`, which changes "
                              "every iteration")
        elif self.shape_of(value):
            self.shaped.add(name)
            self.why.setdefault(name, self.shape_of(value))
        elif self.per_item and isinstance(value, ast.Call) and any(
                w in last_name(value).lower() for w in ("read", "load", "imread", "open")):
            self.shaped.add(name)
            self.guess.add(name)
            self.why[name] = (f"`{name}` is read from one file per iteration "
                              f"(`{ast.unparse(value)[:40]}`); items of their own size each "
                              "give new shapes")

    def _python_number_of(self, value: ast.expr) -> str:
        """The changing number a plain Python arithmetic expression is computed from ("" if
        none, or if the expression makes a tensor)."""
        if not isinstance(value, ast.BinOp | ast.Call | ast.UnaryOp | ast.IfExp):
            return ""
        calls = [c for c in ast.walk(value) if isinstance(c, ast.Call)]
        if any(self.ctx.is_tensor_op(c) or last_name(c) in _CREATORS or isinstance(
                c.func, ast.Attribute) for c in calls):
            return ""
        if isinstance(value, ast.Call) and last_name(value) not in ("min", "max", "float", "int",
                                                                      "round", "abs") and not (
                isinstance(value.func, ast.Name) and value.func.id in self.ctx.funcs):
            return ""
        return next((n.id for n in ast.walk(value) if isinstance(n, ast.Name)
                     and n.id in self.sizes), "")

    def inherit(self, outer: _Varying) -> None:
        """Numbers that change per iteration of an enclosing loop change between calls too."""
        for name in outer.sizes - self.sizes:
            self.sizes.add(name)
            self.why.setdefault(name, outer.why.get(name, f"`{name}` changes every iteration "
                                                         "of an enclosing loop"))

    def shape_of(self, node: ast.AST) -> str:
        """Why ``node``'s shape changes per iteration ("" if it does not, as far as seen)."""
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and n.id in self.shaped:
                return self.why.get(n.id, f"`{n.id}` changes shape")
            if isinstance(n, ast.Call) and last_name(n) in _PADDERS:
                return (f"`{last_name(n)}` pads each batch to its own longest element, so the "
                        "length changes from batch to batch")
            if isinstance(n, ast.Call) and last_name(n) in _CREATORS:
                args = _shape_args(n, self.ctx.resolve(n.func))
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
        outer = ctx.enclosing(loop, LOOPS)
        while outer is not None and not ctx.is_compiled_scope(outer):
            varying.inherit(_Varying(ctx, outer))  # type: ignore[arg-type]
            outer = ctx.enclosing(outer, LOOPS)
        for call, kind in _compiled_calls(ctx, loop):
            why = next((varying.shape_of(a) for a in [*call.args, *(k.value for k in
                        call.keywords)] if varying.shape_of(a)), "")
            if not why and kind in ("torch", "tf"):
                num = next((a.id for a in call.args if isinstance(a, ast.Name)
                            and a.id in varying.sizes), "")
                if num:
                    why = (varying.why.get(num, f"the Python number `{num}` changes every "
                                                "iteration") + "; it is passed as an argument "
                           "(a Python number, not a tensor): each new value is a new "
                           "specialisation")
            if why:
                guessed = any(isinstance(x, ast.Name) and x.id in varying.guess
                              for arg in call.args for x in ast.walk(arg)) or (
                    kind == "torch" and "pads" in why and _torch_mode(ctx, call) != "cuda-graphs")
                if guessed and "pads" in why:
                    why += ("; torch.compile recompiles once and then treats the length as "
                            "dynamic (less specialised kernels); with mode='reduce-overhead' "
                            "each length records its own CUDA graph")
                ctx.add("script.recompile-shapes", "info" if guessed else "warning", call, why,
                        how=_HOW[kind], fixtext=_FIX[kind])
                break


def _padded_batch(call: ast.Call) -> bool:
    """``ds.padded_batch(n)`` without ``padded_shapes``: each batch padded to its own longest."""
    return any(isinstance(c, ast.Call) and last_name(c) == "padded_batch" and not (
        keyword(c, "padded_shapes") or len(c.args) > 1) for c in ast.walk(call))


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
    for n in ast.walk(ctx.tree):
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant) and (
                n.value.value is True) and any(ctx.resolve(t).endswith("cudnn.benchmark")
                                               for t in n.targets):
            return n
    return None


def _varying_sizes(ctx: Context) -> str:
    """Why the script's input sizes vary from step to step ("" when nothing shows it)."""
    for loop in ast.walk(ctx.tree):
        if isinstance(loop, LOOPS):
            v = _Varying(ctx, loop)
            for call in walk(loop.body):  # type: ignore[attr-defined]
                if isinstance(call, ast.Call):
                    why = next((v.shape_of(a) for a in call.args if v.shape_of(a)), "")
                    if why:
                        return f"{why} ({ctx.line(call.lineno)})"
    for call in ctx.calls():
        q = ctx.resolve(call.func)
        if ".models.detection." in q or ".models.segmentation." in q:
            return f"`{q.rsplit('.', 1)[-1]}` takes images of their own sizes"
        if last_name(call) in _PADDERS:
            return f"`{last_name(call)}` gives each batch its own length"
    for loop in ast.walk(ctx.tree):
        if isinstance(loop, ast.For) and isinstance(loop.iter, ast.Name) and any(
                w in loop.iter.id.lower() for w in _PER_ITEM) and any(
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
