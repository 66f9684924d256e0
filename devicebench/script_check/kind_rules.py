"""Rules written on :mod:`.kinds` (issue 24, round 7): costs that depend on what a value is
(a Python list built element by element, a function that runs an MLX training step) and on
whether the code runs repeatedly -- in a loop, a function a loop calls, or a per-item
method of the data pipeline -- rather than on where in the loop's own body it is written."""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import last_name, walk
from devicebench.script_check.context import Context, rule
from devicebench.script_check.kinds import (
    list_elements,
    python_list,
    repeat_site,
    repeated_functions,
    scope_of,
)
from devicebench.script_check.round10_rules import jnp_nested_list

_TENSOR_FROM = {"torch.tensor", "torch.Tensor", "torch.as_tensor", "torch.FloatTensor",
                "torch.LongTensor", "torch.DoubleTensor", "torch.IntTensor",
                "tensorflow.convert_to_tensor", "tensorflow.constant",
                "mlx.core.array", "jax.numpy.array", "jax.numpy.asarray"}


def _where(ctx: Context, site: tuple[ast.AST, ast.AST | None]) -> str:
    loop, call = site
    if isinstance(loop, ast.FunctionDef | ast.AsyncFunctionDef):
        return f"`{loop.name}` runs once per item or batch of the data pipeline"
    if call is None:
        return f"it runs on every iteration of the loop at {ctx.line(loop.lineno)}"
    return (f"the loop at {ctx.line(loop.lineno)} runs it on every iteration "
            f"(`{ast.unparse(call)[:50]}`, {ctx.line(call.lineno)})")


@rule("script.tensor-from-python-list",
      "tensor built from a Python list, element by element",
      "`{ctor}` of {how} walks every element through Python (for a list of NumPy arrays "
      "PyTorch warns \"Creating a tensor from a list of numpy.ndarrays is extremely slow\"); "
      "one array conversion does the same in a single copy (facebook/Ax#4798: 3.6x faster; "
      "kan-bayashi/ParallelWaveGAN#367; tensorflow/similarity#210)",
      "stack the list once and convert the array: `{ctor}(np.stack(items))` for NumPy arrays "
      "(`np.asarray(values)` for numbers), `torch.stack(items)` for tensors -- or fill a "
      "preallocated array instead of a list")
def tensor_from_python_list(ctx: Context) -> None:
    for call in ctx.calls():
        if not call.args or ctx.resolve(call.func) not in _TENSOR_FROM:
            continue
        how = python_list(ctx, call.args[0], scope_of(ctx, call))
        site = repeat_site(ctx, call) if how else None
        if site is None:
            continue
        ctor = ctx.resolve(call.func).replace("tensorflow.", "tf.").replace(
            "mlx.core.", "mx.").replace("jax.numpy.", "jnp.")
        held = list_elements(ctx, call.args[0], scope_of(ctx, call))
        # a list of arrays or tensors: the slow path PyTorch warns about; a list of Python
        # numbers (or rows of unknown kind) converts element by element too, but cheaply
        ctx.add("script.tensor-from-python-list", "warning" if held == "arrays" else "info",
                call, f"`{ast.unparse(call.args[0])[:30]}` is {how} (of {held}), and "
                f"{_where(ctx, site)}",
                ctor=ctor, how=how)
    _tensor_list_to_numpy(ctx)
    jnp_nested_list(ctx)  # jnp.array of a nested Python list (round 11)


def _framework_results(ctx: Context, name: str, scope: ast.AST) -> bool:
    """Whether the list ``name`` is grown with results of framework calls: a model's
    output (``outputs.append(model(x))``) or a TensorFlow/PyTorch op."""
    body = scope.body if hasattr(scope, "body") else []
    params = {a.arg for a in scope.args.args} if isinstance(
        scope, ast.FunctionDef | ast.AsyncFunctionDef) else set()
    for n in walk(body):
        if (isinstance(n, ast.Call) and last_name(n) == "append" and n.args
                and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name)
                and n.func.value.id == name and isinstance(n.args[0], ast.Call)):
            f = n.args[0].func
            if isinstance(f, ast.Name) and (f.id in ctx.models or f.id in params and f.id in (
                    "model", "net", "module")) or ctx.resolve(f).startswith(
                        ("tensorflow.", "torch.")):
                return True
    return False


_LIST_TO_NUMPY_WHY = (
    "`np.array(list_of_tensors)` does not use the tensors' array conversion: NumPy walks "
    "each tensor as a sequence, element by element (tensorflow/tensorflow#27692, TensorFlow "
    "team: \"if you do np.array(tensor) there's no slowdown, it's only if you do "
    "np.array(list_of_tensors)\" -- orders of magnitude slower)")
_LIST_TO_NUMPY_FIX = (
    "join them in the framework first and convert once: `tf.concat(outputs, 0).numpy()` / "
    "`torch.cat(outputs).cpu().numpy()`, or append `t.numpy()` instead of `t`")


def _tensor_list_to_numpy(ctx: Context) -> None:
    """``np.array(outputs)`` of a list of model outputs (issue 24, round 10)."""
    if not (ctx.uses("tensorflow") or ctx.uses("torch")):
        return
    for call in ctx.calls():
        if (ctx.resolve(call.func) in ("numpy.array", "numpy.asarray") and call.args
                and isinstance(call.args[0], ast.Name)
                and python_list(ctx, call.args[0], scope_of(ctx, call))
                and _framework_results(ctx, call.args[0].id, scope_of(ctx, call))):
            ctx.add("script.tensor-from-python-list", "info", call,
                    f"`{call.args[0].id}` is a list of framework tensors (model outputs or "
                    "ops) appended one by one",
                    why=_LIST_TO_NUMPY_WHY, fix=_LIST_TO_NUMPY_FIX,
                    ctor="np.array", how="a list of tensors")


_MLX_GRADS = ("mlx.nn.value_and_grad", "mlx.core.value_and_grad", "mlx.core.grad")


def _mlx_compiled(ctx: Context) -> set[str]:
    """Names of functions passed to ``mx.compile`` (as a decorator, ``partial(mx.compile,
    ...)`` or a call) anywhere in the file."""
    out: set[str] = set()
    for n in ast.walk(ctx.tree):
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and any(
                "compile" in ast.unparse(d) for d in n.decorator_list):
            out.add(n.name)
        if isinstance(n, ast.Call) and ctx.resolve(n.func) == "mlx.core.compile":
            out |= {a.id for a in n.args if isinstance(a, ast.Name)}
    return out


def _mlx_step(ctx: Context, fn: ast.AST, grads: set[str]) -> str:
    """What makes ``fn`` an MLX training step: it calls a gradient function made by
    ``nn.value_and_grad``."""
    for n in walk(getattr(fn, "body", [])):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in grads:
            return f"it runs `{n.func.id}` (a gradient) and the update"
    return ""


@rule("script.mlx-not-compiled",
      "MLX step function run without `mx.compile`",
      "{what}, once per iteration, as separate kernel launches; `mx.compile` fuses them into "
      "one graph traced once -- ml-explore/mlx-lm#53 (awni: compiling the step, 1819 -> 2296 "
      "tokens/s), Blaizzy/mlx-vlm#971 (1.9x per step). For a very small model the compile "
      "overhead can outweigh the gain (teilomillet/textpolicy#40: 4x slower at 50K params): "
      "measure both",
      "compile it with its state: `step = mx.compile(step, inputs=state, outputs=state)` "
      "(or `@partial(mx.compile, inputs=state, outputs=state)`), with `state = [model.state, "
      "optimizer.state, mx.random.state]`")
def mlx_not_compiled(ctx: Context) -> None:
    if not ctx.uses("mlx"):
        return
    grads = {name for name, values in ctx.assigns.items() for v in values
             if isinstance(v, ast.Call) and ctx.resolve(v.func) in _MLX_GRADS}
    compiled = _mlx_compiled(ctx)
    _compiled_off_by_default(ctx)
    for loop, call, fn in repeated_functions(ctx).values():
        if fn.name in compiled or call is fn or ctx.enclosing(fn, (
                ast.FunctionDef, ast.AsyncFunctionDef)) is not None:
            continue
        what = _mlx_step(ctx, fn, grads)
        if what:
            ctx.add("script.mlx-not-compiled", "info", fn,
                    f"`{fn.name}` is called on every iteration of the loop at "
                    f"{ctx.line(loop.lineno)} and is not compiled", what=what)


_TRAINERS = ("pytorch_lightning.Trainer", "lightning.Trainer", "lightning.pytorch.Trainer",
             "pytorch_lightning.trainer.Trainer")


@rule("script.cudnn-benchmark-overridden",
      "Lightning's `Trainer` may reset `torch.backends.cudnn.benchmark`",
      "the script turns cuDNN autotuning on, then builds a Lightning `Trainer` without "
      "`benchmark=`: before Lightning 1.6.4 the Trainer set the flag to its own default "
      "(False before 1.6.0) when it starts, so the setting is silently undone "
      "(RangiLyu/nanodet#249; Lightning 1.6.4 release notes, #13154: \"Prevent modification of "
      "torch.backends.cudnn.benchmark when Trainer(benchmark=...) is not set\")",
      "pass it to the Trainer as well: `Trainer(..., benchmark=True)` (harmless on any "
      "version), or check the installed Lightning is 1.6.4 or newer")
def cudnn_benchmark_overridden(ctx: Context) -> None:
    if not ctx.uses("torch"):
        return
    on = any(isinstance(n, ast.Assign) and any(ctx.resolve(t) == "torch.backends.cudnn.benchmark"
                                                for t in n.targets)
             and isinstance(n.value, ast.Constant) and n.value.value is True
             for n in ast.walk(ctx.tree))
    if not on:
        return
    for call in ctx.calls():
        if ctx.resolve(call.func) in _TRAINERS and not any(
                k.arg == "benchmark" or k.arg is None for k in call.keywords):
            ctx.add("script.cudnn-benchmark-overridden", "info", call,
                    "`torch.backends.cudnn.benchmark = True` is set, and this Trainer gets no "
                    "`benchmark=`")


@rule("script.mps-non-blocking-copy",
      "`non_blocking=True` copies on Apple's MPS",
      "on a Mac CPU and GPU share one memory; PyTorch's MPS backend gains nothing from an "
      "asynchronous host-to-device copy and, measured, can lose to the plain copy "
      "(Emmi-AI/noether#157: `non_blocking=False` on MPS \"leads to roughly x2 better MPS "
      "performance during training\"); measured on MPS only -- on CUDA keep it",
      "copy with `non_blocking=(device.type == \"cuda\")`, and time both on your Mac")
def mps_non_blocking_copy(ctx: Context) -> None:
    if not ctx.uses("torch"):
        return
    text = "\n".join(ctx.lines)
    if "mps" not in text or "cuda" in text.replace("non_blocking", ""):
        return  # a script that (also) targets CUDA: the flag is right there
    for call in ctx.calls():
        nb = next((k.value for k in call.keywords if k.arg == "non_blocking"), None)
        if last_name(call) == "to" and isinstance(nb, ast.Constant) and nb.value is True and (
                repeat_site(ctx, call) is not None):
            ctx.add("script.mps-non-blocking-copy", "info", call,
                    "the script's device is MPS and this copy runs on every iteration")



def _compiled_off_by_default(ctx: Context) -> None:
    """``if compile_training: f = mx.compile(f)`` with ``compile_training=False`` as the
    parameter's default: unless a caller opts in, every step runs uncompiled
    (teilomillet/textpolicy#40: 1,069 -> 918 ms/step on Qwen3-0.6B once compiled)."""
    for call in ctx.calls():
        if ctx.resolve(call.func) != "mlx.core.compile" or not call.args:
            continue
        guard = ctx.enclosing(call, (ast.If,))
        fn = ctx.enclosing(call, (ast.FunctionDef, ast.AsyncFunctionDef))
        if guard is None or fn is None or not isinstance(guard.test, ast.Name):
            continue
        args = fn.args.args[len(fn.args.args) - len(fn.args.defaults):]
        default = {a.arg: d for a, d in zip(args, fn.args.defaults, strict=True)}.get(
            guard.test.id)
        if not (isinstance(default, ast.Constant) and default.value is False):
            continue
        target = ast.unparse(call.args[0])
        made = next((s for s in walk(fn.body) if isinstance(s, ast.Assign) and s is not
                     ctx.enclosing(call, (ast.Assign,)) and any(
                         ast.unparse(t) == target for t in s.targets)), None)
        ctx.add("script.mlx-not-compiled", "info", made or call,
                f"`{target}` is compiled only under `if {guard.test.id}:` "
                f"({ctx.line(guard.lineno)}), and `{guard.test.id}` defaults to False",
                what="unless a caller opts in, it runs uncompiled")


def _numpy_state(ctx: Context, node: ast.AST) -> bool:
    """``node`` (a name or ``self.attr``) is bound only to NumPy data: ``np.asarray(...)``,
    ``np.array(...)``, or a dict/list comprehension of them (``{k: np.asarray(v) ...}``)."""
    key = ast.unparse(node)
    values = [n.value for n in ast.walk(ctx.tree) if isinstance(n, ast.Assign)
              and any(ast.unparse(t) == key for t in n.targets)]

    def numpy(v: ast.AST) -> bool:
        if isinstance(v, ast.DictComp):
            v = v.value
        elif isinstance(v, ast.ListComp):
            v = v.elt
        return isinstance(v, ast.Call) and ctx.resolve(v.func) in (
            "numpy.asarray", "numpy.array", "numpy.load")
    return bool(values) and all(numpy(v) for v in values)


def jax_host_state_per_call(ctx: Context) -> None:
    """``script.per-step-copy`` for JAX: host (NumPy) state -- fixed across calls, kept on an
    object or a module variable -- passed to a jitted function on every call: JAX copies
    NumPy arguments to the device on each call (markean/aimz#267)."""
    if not ctx.uses("jax"):
        return
    for call in ctx.calls():
        if not (isinstance(call.func, ast.Name) and ctx.compiled.get(call.func.id) == "jax"):
            continue
        site = repeat_site(ctx, call)
        if site is None:
            continue
        for a in call.args:
            if isinstance(a, ast.Attribute | ast.Name) and _numpy_state(ctx, a):
                ctx.add("script.per-step-copy", "warning", call, f"`{ast.unparse(a)}` is NumPy "
                        f"data, and {_where(ctx, site)}", data=ast.unparse(a),
                        why="a jitted function copies each NumPy argument to the device on "
                            "every call: the same host data crosses to the device every time",
                        fix=f"put it on the device once: `{ast.unparse(a)} = "
                            f"jax.device_put({ast.unparse(a)})` (a pytree of arrays works too)")
                break
