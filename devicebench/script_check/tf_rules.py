"""TensorFlow rules: device initialisation order and custom training loops."""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import (
    LOOPS,
    dotted,
    keyword,
    last_name,
    walk,
)
from devicebench.script_check.context import Context, rule
from devicebench.script_check.vector_rules import mlx_training_mode_in_eval


def _local_import_touching_gpu(ctx: Context) -> tuple[ast.stmt, str] | None:
    """An import of a module next to the script whose top level initialises TF's devices."""
    if ctx.directory is None:
        return None
    for stmt in ctx.tree.body:
        names = [a.name for a in stmt.names] if isinstance(stmt, ast.Import) else (
            [stmt.module] if isinstance(stmt, ast.ImportFrom) and stmt.module else [])
        for name in names:
            path = ctx.directory / (name.replace(".", "/") + ".py")
            try:
                tree = ast.parse(path.read_text(encoding="utf-8"))
            except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
                continue
            other = Context(tree, [], str(path), None)
            hit = next((c for c in walk(tree.body) if isinstance(c, ast.Call)
                        and other.inits_devices(c)), None)
            if hit is not None:
                return stmt, (f": {path.name} runs `{ast.unparse(hit)[:60]}` at import "
                              f"time (its line {hit.lineno})")
    return None


@rule("script.memory-growth-late",
      "`set_memory_growth` after TensorFlow initialised its devices",
      "once an op runs, a model is built or logical devices are listed, TensorFlow raises "
      "RuntimeError \"Physical devices cannot be modified after being initialized\" (a "
      "try/except only hides that memory growth stays off)",
      "move the memory-growth block right after `import tensorflow as tf`, before any other "
      "TensorFlow call; or `export TF_FORCE_GPU_ALLOW_GROWTH=true` before starting Python",
      "https://www.tensorflow.org/guide/gpu#limiting_gpu_memory_growth")
def memory_growth_late(ctx: Context) -> None:
    """``set_memory_growth`` after a call in the same scope initialised the devices."""
    if not any("set_memory_growth" in line for line in ctx.lines):
        return
    for scope in [ctx.tree, *ctx.funcs.values()]:
        calls = sorted((n for n in walk(scope.body) if isinstance(n, ast.Call)),
                       key=lambda n: (n.lineno, n.col_offset))
        imported = _local_import_touching_gpu(ctx) if scope is ctx.tree else None
        first: ast.AST | None = imported[0] if imported else None
        for call in calls:
            if first is not None and call.lineno < first.lineno:
                continue
            if ctx.resolve(call.func).endswith("set_memory_growth"):
                if first is not None:
                    ctx.add("script.memory-growth-late", "error", call,
                            f"comes after `{ctx.code(first.lineno)}` "
                            f"({ctx.line(first.lineno)}), which initialises the devices"
                            + (imported[1] if imported and first is imported[0] else ""))
            elif first is None and ctx.search([call], ctx.inits_devices) is not None:
                first = call


def _tapes(ctx: Context) -> list[tuple[ast.With, str]]:
    """``with tf.GradientTape() as name:`` blocks and their names."""
    out = []
    for node in ast.walk(ctx.tree):
        if isinstance(node, ast.With):
            for item in node.items:
                c = item.context_expr
                if isinstance(c, ast.Call) and ctx.resolve(c.func).endswith("GradientTape"):
                    name = item.optional_vars.id if isinstance(item.optional_vars,
                                                               ast.Name) else ""
                    out.append((node, name))
    return out


def _keras_compiles(cls: ast.ClassDef, fn: ast.AST) -> bool:
    """A Keras model's train/test/predict step override, which fit() wraps in tf.function."""
    return getattr(fn, "name", "") in ("train_step", "test_step", "predict_step") and any(
        last_name(b) in ("Model", "Sequential", "Functional") for b in cls.bases)


def _loop_calling_method(ctx: Context, name: str) -> ast.AST | None:
    """A loop (outside compiled code) calling ``<obj>.name(...)``, directly or via a helper."""
    for node in ast.walk(ctx.tree):
        if isinstance(node, LOOPS) and not ctx.is_compiled_scope(node) and ctx.search(
                node.body, lambda n: isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and n.func.attr == name) is not None:
            return node
    return None


def _loop_calling(ctx: Context, fn: str) -> ast.AST | None:
    """A loop (outside compiled code) that calls function ``fn``, directly or via another;
    or a ``timeit.timeit("fn()", number=...)`` / ``timeit.repeat`` that runs it repeatedly
    (its statement given as a string, a lambda or the function itself)."""
    def calls_fn(n: ast.AST) -> bool:
        return isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == fn

    for node in ast.walk(ctx.tree):
        if isinstance(node, LOOPS) and not ctx.is_compiled_scope(node) and ctx.search(
                node.body, calls_fn) is not None:
            return node
        if isinstance(node, ast.Call) and ctx.resolve(node.func) in (
                "timeit.timeit", "timeit.repeat") and node.args:
            stmt = node.args[0]
            if isinstance(stmt, ast.Constant) and isinstance(stmt.value, str):
                try:
                    stmt = ast.parse(stmt.value)
                except SyntaxError:
                    continue
            if (isinstance(stmt, ast.Name) and stmt.id == fn
                    or ctx.search([stmt], calls_fn) is not None):
                return node
    return None


@rule("script.eager-custom-loop",
      "custom training step runs eagerly (no `tf.function`)",
      "without `tf.function` every op of the step is dispatched one by one from Python "
      "(~10-25 us each, plus the tape's bookkeeping): small and medium models become "
      "dispatch-bound and run several times slower than `model.fit`, on GPU more so",
      "compile the step: put `@tf.function` (try `@tf.function(jit_compile=True)`) above "
      "`def {fn}(...)` (for a tape written in the loop, move the tape, `gradient` and "
      "`apply_gradients` into such a function) and keep the Python loop outside it; see "
      "https://www.tensorflow.org/guide/function")
def eager_custom_loop(ctx: Context) -> None:
    if not ctx.uses("tensorflow"):
        return
    for with_node, _ in _tapes(ctx):
        if ctx.is_compiled_scope(with_node):
            continue
        fn = ctx.enclosing(with_node, (ast.FunctionDef, ast.AsyncFunctionDef))
        cls = ctx.parents.get(fn) if fn is not None else None
        if fn is not None and isinstance(cls, ast.ClassDef):
            if _keras_compiles(cls, fn):
                continue  # Keras compiles train_step/test_step overrides (fit, evaluate)
            loop = _loop_calling_method(ctx, fn.name)
            if loop is not None:
                ctx.add("script.eager-custom-loop", "warning", fn,
                        f"the method `{cls.name}.{fn.name}` runs once per iteration of the loop "
                        f"at {ctx.line(loop.lineno)}, outside any tf.function", fn=fn.name)
            continue
        inner = ctx.enclosing(with_node, LOOPS)
        if inner is not None and (fn is None or ctx.enclosing(inner, (ast.FunctionDef,
                                                                     ast.AsyncFunctionDef)) is fn):
            loop, where, name = inner, with_node, "train_step"  # the loop holds the tape itself
            seen = (f"the tape's forward and backward pass run eagerly on every iteration of "
                    f"the loop at {ctx.line(inner.lineno)}")
        else:
            loop = _loop_calling(ctx, fn.name) if fn is not None else None
            if loop is None or fn is None:
                continue
            where, name = fn, fn.name
            seen = f"runs once per iteration of the loop at {ctx.line(loop.lineno)}"
            above = ctx.code(fn.lineno - 1)
            if above.startswith("#") and "tf.function" in above:
                seen += f"; the decorator above it is commented out (`{above}`)"
        ctx.add("script.eager-custom-loop", "warning", where, seen, fn=name)


@rule("script.gradient-in-tape",
      "`{tape}.gradient` called inside a persistent tape's own block",
      "a persistent tape keeps recording while it computes the gradient, so the backward "
      "pass is itself recorded: more memory and time for nothing (TensorFlow warns that this "
      "is \"significantly less efficient\"); a non-persistent tape stops recording there "
      "and costs nothing",
      "dedent `{tape}.gradient(...)` (and `apply_gradients`) out of the `with` block; "
      "only the forward pass and the loss belong inside it")
def gradient_in_tape(ctx: Context) -> None:
    tapes = _tapes(ctx)
    for with_node, name in tapes:
        if not name or any(w is not with_node and ctx.enclosing(with_node, (ast.With,)) is w
                           for w, _ in tapes):
            continue  # a nested (higher-order) tape computes gradients inside the outer one
        persistent = keyword(with_node.items[0].context_expr, "persistent")  # type: ignore[arg-type]
        if not (isinstance(persistent, ast.Constant) and persistent.value is True):
            continue  # a non-persistent tape stops recording at `gradient`: nothing is lost
        for n in walk(with_node.body):
            if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                    and n.func.attr == "gradient" and dotted(n.func.value) == name):
                ctx.add("script.gradient-in-tape", "warning", n,
                        f"inside `with` at {ctx.line(with_node.lineno)}", tape=name)


_EVAL = ("eval", "test", "valid", "val_", "predict", "infer", "inference")


@rule("script.training-true-in-eval",
      "`training=True` while evaluating",
      "with `training=True` BatchNormalization normalises with the batch's own statistics "
      "and updates its moving averages, and Dropout drops units: evaluation figures are "
      "wrong, depend on the batch size, and evaluation changes the model",
      "call the model with `training=False` (or `model(x)`) in evaluation and inference")
def training_true_in_eval(ctx: Context) -> None:
    mlx_training_mode_in_eval(ctx)
    if "BatchNormalization" not in "\n".join(ctx.lines) or ctx.uses("pytest") or ctx.uses(
            "unittest"):
        return  # no BatchNorm (MC dropout is legitimate); test files are not evaluation
    for call in ctx.calls():
        value = keyword(call, "training")
        if not (isinstance(value, ast.Constant) and value.value is True):
            continue
        fn = ctx.enclosing(call, (ast.FunctionDef, ast.AsyncFunctionDef))
        loop = ctx.enclosing(call, (ast.For, ast.AsyncFor))
        loop_src = ast.unparse(loop.iter).lower() if loop is not None else ""
        fn_name = fn.name.lower() if fn is not None else ""
        if any(k in fn_name for k in _EVAL) or any(k in loop_src for k in ("val", "test")):
            where = f"in `{fn.name}`" if fn is not None and any(
                k in fn_name for k in _EVAL) else f"in the loop over `{ast.unparse(loop.iter)}`"
            ctx.add("script.training-true-in-eval", "warning", call,
                    f"{where}; the model has BatchNormalization")


@rule("script.device-scope-loop",
      "`tf.device({dev!r})` around a whole training loop",
      "`tf.device` only chooses where the ops created inside it run, and TensorFlow already "
      "puts ops on a visible GPU by itself: the scope neither makes an unseen GPU usable nor "
      "removes the Python and per-op dispatch cost of the loop",
      "drop the scope; check that TensorFlow sees the GPU with "
      "`tf.config.list_physical_devices('GPU')` (or `devicebench doctor`), and compile the "
      "step with `@tf.function` / let `model.fit` do it; to compare devices use "
      "`devicebench run WORKLOAD --device cpu,gpu:0` (your model as `file.py:function`)")
def device_scope_loop(ctx: Context) -> None:
    for node, dev in ctx.gpu_device_scopes():
        loop = next((n for n in walk(node.body) if isinstance(n, LOOPS) and ctx.search(
            n.body, ctx.is_step) is not None or isinstance(n, ast.Call)
            and last_name(n) == "fit"), None)
        if loop is not None:
            ctx.add("script.device-scope-loop", "info", node,
                    f"the scope holds `{ctx.code(loop.lineno)}` ({ctx.line(loop.lineno)})",
                    dev=dev)
