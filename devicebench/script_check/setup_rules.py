"""Work the framework's set-up repeats (issue 24, round 6): DataLoader worker processes
forked again every epoch, a loss scaler kept for a dtype that cannot underflow, and Python
functions run inside a tf.data ``map``."""

from __future__ import annotations

import ast
import re

from devicebench.script_check.ast_tools import LOOPS, const, keyword, last_name, walk
from devicebench.script_check.context import Context, rule
from devicebench.script_check.gap_rules import lightning_epochs, lightning_loaders

_TORCH_LOADERS = ("torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader")


def _loader_calls(ctx: Context) -> list[ast.Call]:
    return [c for c in ctx.calls() if ctx.resolve(c.func) in _TORCH_LOADERS
            or last_name(c) == "DataLoader" and ctx.uses("torch")]


def _names_bound_to(ctx: Context, call: ast.Call) -> set[str]:
    """Names that hold the loader: ``loader = DataLoader(...)``, or the result of a local
    function that returns it (``data_loader = build_dataloader(...)``, also unpacked)."""
    parent = ctx.parents.get(call)
    if isinstance(parent, ast.Assign):
        return {t.id for t in parent.targets if isinstance(t, ast.Name)}
    if not isinstance(parent, ast.Return):
        return set()
    fn = ctx.enclosing(call, (ast.FunctionDef, ast.AsyncFunctionDef))
    name = getattr(fn, "name", "")
    out: set[str] = set()
    for n in ast.walk(ctx.tree):
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and isinstance(
                n.value.func, ast.Name) and n.value.func.id == name:
            out |= {e.id for t in n.targets for e in ast.walk(t) if isinstance(e, ast.Name)}
    return out


def _iterates(ctx: Context, loop: ast.AST, names: set[str]) -> bool:
    it = getattr(loop, "iter", None)
    while isinstance(it, ast.Call) and last_name(it) in ("enumerate", "tqdm", "zip") and it.args:
        it = it.args[0]
    return isinstance(it, ast.Name) and it.id in names


def _epoch_loop(ctx: Context, names: set[str]) -> tuple[ast.AST, ast.AST] | None:
    """(outer loop, inner loop) when a loop over the loader runs inside another loop --
    directly, or in a function of this file the outer loop calls with the loader."""
    for inner in ast.walk(ctx.tree):
        if not isinstance(inner, ast.For | ast.AsyncFor):
            continue
        if _iterates(ctx, inner, names):
            outer = ctx.enclosing(inner, LOOPS)
            if outer is not None:
                return outer, inner
        fn = ctx.enclosing(inner, (ast.FunctionDef, ast.AsyncFunctionDef))
        params = {a.arg for a in fn.args.args} if isinstance(fn, ast.FunctionDef) else set()
        if fn is None or not _iterates(ctx, inner, params):
            continue
        for c in ctx.calls():  # train_one_epoch(model, loader) inside `for epoch in ...`
            if isinstance(c.func, ast.Name) and c.func.id == fn.name and any(
                    isinstance(a, ast.Name) and a.id in names
                    for a in [*c.args, *(k.value for k in c.keywords)]):
                outer = ctx.enclosing(c, LOOPS)
                if outer is not None:
                    return outer, inner
    return None


@rule("script.dataloader-workers-respawn",
      "DataLoader worker processes are started again every epoch",
      "with `num_workers > 0` and no `persistent_workers=True`, every pass over the loader "
      "forks its workers afresh (each one re-imports and copies the dataset) and tears them "
      "down at the end: a pause at the start of every epoch, and more memory at each start "
      "(open-mmlab/mmpose#923: 180 s -> 2 s per epoch start; metatensor/metatrain#1271: "
      "steady-state epoch 1.10 s -> 0.74 s)",
      "keep the workers alive across epochs: `DataLoader(..., num_workers={workers}, "
      "persistent_workers=True)` (PyTorch >= 1.7)")
def dataloader_workers_respawn(ctx: Context) -> None:
    for call in _loader_calls(ctx):
        workers = keyword(call, "num_workers")
        if workers is None or const(workers) in (0, None) and isinstance(workers, ast.Constant):
            continue  # no worker processes to restart
        persistent = keyword(call, "persistent_workers")
        if persistent is not None and const(persistent) is not False:
            continue  # kept alive (or chosen by a setting this file does not show)
        if any(k.arg is None for k in call.keywords):
            continue  # **kwargs may hold persistent_workers
        found = _epoch_loop(ctx, _names_bound_to(ctx, call))
        if found is None:
            epochs = lightning_epochs(ctx) if call in lightning_loaders(ctx) else None
            if epochs is not None and epochs > 1:  # Trainer.fit drives the epoch loop
                ctx.add("script.dataloader-workers-respawn", "info", call,
                        f"`num_workers={ast.unparse(workers)}` and no `persistent_workers`; "
                        f"`train_dataloader()` returns it to Lightning's Trainer, which goes "
                        f"over it once per epoch ({epochs} epochs)",
                        workers=ast.unparse(workers))
            continue
        outer, inner = found
        # info: what a restart costs is the dataset's start-up in each worker (seconds for a
        # dataset that indexes files in __init__, little for tensors), which the file rarely
        # shows; the canonical loop of the PyTorch examples pays it too
        ctx.add("script.dataloader-workers-respawn", "info", call,
                f"`num_workers={ast.unparse(workers)}` and no `persistent_workers`; the loop "
                f"at {ctx.line(inner.lineno)} goes over the loader once per iteration of the "
                f"loop at {ctx.line(outer.lineno)}", workers=ast.unparse(workers))


_SCALERS = ("torch.amp.GradScaler", "torch.cuda.amp.GradScaler", "torch.GradScaler",
            "torch.amp.grad_scaler.GradScaler")


def _autocast_dtypes(ctx: Context) -> set[str]:
    """The dtypes the file's autocast regions use ("bfloat16", "float16", "?" unknown)."""
    out: set[str] = set()
    for c in ctx.calls():
        q = ctx.resolve(c.func)
        if not (q.endswith("autocast") and q.startswith("torch.")):
            continue
        dtype = keyword(c, "dtype")
        if dtype is None:
            out.add("float16")  # CUDA autocast's default
            continue
        values = [dtype]
        if isinstance(dtype, ast.Name):
            values = ctx.assigns.get(dtype.id, []) or [dtype]
        for v in values:
            text = ast.unparse(v)
            if "float16" in text.replace("bfloat16", "") or "half" in text:
                out.add("float16")
            if "bfloat16" in text:
                out.add("bfloat16")
            if "float16" not in text and "half" not in text:
                out.add("?")
    return out


@rule("script.gradscaler-bf16",
      "a GradScaler for bfloat16 autocast",
      "loss scaling exists for float16, whose narrow exponent lets small gradients underflow; "
      "bfloat16 has float32's exponent range, so the scaler only adds work on every step "
      "(scaling the loss, unscaling every gradient, an inf/NaN check that waits for the "
      "device) and can skip steps for nothing (ecmwf/WeatherGenerator#874, "
      "decoderesearch/SAELens#723)",
      "drop the scaler with bfloat16: `loss.backward(); optimizer.step()`; keep "
      "`GradScaler` only for `dtype=torch.float16`")
def gradscaler_bf16(ctx: Context) -> None:
    if not ctx.uses("torch"):
        return
    dtypes = _autocast_dtypes(ctx)
    if dtypes != {"bfloat16"}:
        scaler_for_chosen_dtype(ctx, _SCALERS)  # `fp16 if ... else bf16`, one scaler (round 13)
        return  # float16 (or an unknown dtype) somewhere: a scaler may be needed
    for c in ctx.calls():
        if ctx.resolve(c.func) in _SCALERS:
            ctx.add("script.gradscaler-bf16", "warning", c,
                    "every autocast region of this file uses `torch.bfloat16`")


_PY_FUNCS = ("tensorflow.py_function", "tensorflow.numpy_function", "tensorflow.py_func",
             "tensorflow.compat.v1.py_func")


def _calls_python(ctx: Context, fn: ast.AST) -> bool:
    body = [fn.body] if isinstance(fn, ast.Lambda) else getattr(fn, "body", [])
    return any(isinstance(n, ast.Call) and ctx.resolve(n.func) in _PY_FUNCS
               for n in walk(body if isinstance(body, list) else [body]))


@rule("script.tfdata-python-in-pipeline",
      "Python code runs inside the tf.data input pipeline",
      "`Dataset.from_generator` and `tf.py_function`/`tf.numpy_function` inside `map` run "
      "Python, which holds the GIL: the pipeline's threads wait for one interpreter, so when "
      "the loop is input-bound the input pipeline runs at Python speed "
      "(tensorflow/tensorflow#15694, mrry: the function \"runs in Python\" and is serialized "
      "by the GIL; jpata/particleflow#202)",
      "when the input pipeline is the bottleneck, read from files with tf.data readers "
      "(TFRecordDataset, `tfds` `as_dataset`) or index the data with "
      "`Dataset.from_tensor_slices` + `map` over TensorFlow ops")
def tfdata_python_in_pipeline(ctx: Context) -> None:
    if not ctx.uses("tensorflow"):
        return
    for call in ctx.calls():
        if ctx.resolve(call.func) == "tensorflow.data.Dataset.from_generator":
            ctx.add("script.tfdata-python-in-pipeline", "info", call,
                    "every element comes from a Python generator")
        elif last_name(call) == "map" and isinstance(call.func, ast.Attribute) and call.args:
            fn = call.args[0]
            if isinstance(fn, ast.Name):
                fn = ctx.funcs.get(fn.id)  # type: ignore[assignment]
            if fn is not None and _calls_python(ctx, fn):
                ctx.add("script.tfdata-python-in-pipeline", "warning", call,
                        "the mapped function calls a Python function for every element")


_AMP_WORDS = re.compile(r"autocast|\bamp\b|gradscaler|\bhalf\b|bfloat16|float16|\bbf16|"
                        r"\bfp16|mixed_precision|\bprecision\b|accelerat")


@rule("script.no-autocast",
      "the CUDA model runs in float32 only",
      "no autocast (or half/bfloat16 weights) anywhere in the script: every matmul and "
      "convolution runs in float32, while GPUs since Volta run them several times faster in "
      "bfloat16/float16 on their tensor cores (FGA-DIKU/BONSAI#162: a pretraining epoch "
      "19 -> 12 minutes with bfloat16 autocast)",
      "wrap the forward pass and the loss in `with torch.autocast(device_type=\"cuda\", "
      "dtype=torch.bfloat16):` (bfloat16 needs no GradScaler; float16 does), then compare the "
      "step time and the loss curve: small models may gain nothing")
def no_autocast(ctx: Context) -> None:
    if not ctx.uses("torch") or ctx.uses("tensorflow") or ctx.uses("jax"):
        return
    code = "\n".join(line.split("#", 1)[0] for line in ctx.lines).lower()
    if "cuda" not in code or _AMP_WORDS.search(code):
        return
    if not any(last_name(c) == "backward" for c in ctx.calls()):
        return  # not a training script
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, LOOPS) or ctx.is_compiled_scope(loop):
            continue
        call = next((n for n in walk(loop.body, lambda x: isinstance(x, LOOPS))
                     if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                     and n.func.id in ctx.models), None)
        if call is not None:
            # info: whether it pays depends on the GPU and the model's size
            ctx.add("script.no-autocast", "info", call,
                    f"`{call.func.id}` runs in float32 in the loop at "  # type: ignore[attr-defined]
                    f"{ctx.line(loop.lineno)} on a CUDA device")


def _bf16_reaches(ctx: Context, node: ast.AST) -> bool:
    """``node`` sits under an ``if`` that the bf16 setting takes (``if args.fp16 or
    args.bf16:``): the file builds the scaler for bfloat16 on purpose, not only for a
    float16 that may be chosen."""
    cur = ctx.parents.get(node)
    while cur is not None:
        if isinstance(cur, ast.If):  # the innermost condition decides
            return any(w in ast.unparse(cur.test) for w in ("bf16", "bfloat16")) and (
                not isinstance(cur.test, ast.UnaryOp))
        cur = ctx.parents.get(cur)
    return False


def scaler_for_chosen_dtype(ctx: Context, scalers: tuple[str, ...]) -> None:
    """``script.gradscaler-bf16`` for ``GradScaler()`` built under ``if fp16 or bf16:``
    where the autocast dtype is then ``torch.float16 if fp16 else torch.bfloat16`` (held in
    a name or an attribute): in the bf16 branch every step still scales, unscales and
    checks. A scaler built for a dtype that merely may be float16 stays silent."""
    choices = [n for n in ast.walk(ctx.tree) if isinstance(n, ast.IfExp)
               and {"float16", "bfloat16"} <= {ast.unparse(b).split(".")[-1]
                                               for b in (n.body, n.orelse)}]
    if not choices:
        return
    for c in ctx.calls():
        if ctx.resolve(c.func) in scalers and keyword(c, "enabled") is None and (
                _bf16_reaches(ctx, c)):
            ctx.add("script.gradscaler-bf16", "info", c,
                    f"built when bf16 is set, and the autocast dtype is then "
                    f"`{ast.unparse(choices[0])[:60]}`: the scaler runs in bfloat16 too")


def unset_workers(ctx: Context, call: ast.Call, dev: str) -> None:
    """``script.dataloader-workers`` (info) for a DataLoader with no ``num_workers`` over a
    data set this file does not define, that an epoch loop goes over again and again with a
    training loop copying its batches to the device (a one-pass loop stays silent, as the
    unset default did before; round 13, EthoML/VAME#220)."""
    data = call.args[0] if call.args else None
    if not isinstance(data, ast.Name) or data.id in ctx.assigns:
        return  # (the caller has ruled out in-memory tensors)
    found = _epoch_loop(ctx, _names_bound_to(ctx, call))
    if found is None:
        return
    outer, inner = found
    copies = any(isinstance(c, ast.Call) and last_name(c) in ("to", "cuda") and isinstance(
        c.func, ast.Attribute) for c in walk(getattr(inner, "body", [])))
    if copies and ctx.search(getattr(inner, "body", []), ctx.is_step) is not None:
        ctx.add("script.dataloader-workers", "info", call,
                f"`num_workers` is not set (0): `{data.id}`'s items are loaded and collated in "
                f"the training process, between the steps of the loop at "
                f"{ctx.line(inner.lineno)}, on every epoch of the loop at "
                f"{ctx.line(outer.lineno)}", work="each batch is loaded and collated here",
                dev=dev.upper() if dev == "mps" else "GPU")
