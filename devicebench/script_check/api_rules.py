"""API-contract rules (issue 24, round 5): calls whose result or setting silently defeats
the speed-up the script asked for -- a pipeline or compiled function built and dropped, a
debugging switch left on, loss scaling where the dtype needs none, workers re-forked every
epoch, Python feeding a tf.data pipeline under the GIL."""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import LOOPS, const, dotted, keyword, last_name
from devicebench.script_check.context import Context, rule

# tf.data.Dataset methods: each returns a new dataset and leaves its receiver unchanged
DATASET_METHODS = {"prefetch", "batch", "padded_batch", "map", "shuffle", "repeat", "cache",
                   "filter", "take", "skip", "unbatch", "interleave", "flat_map",
                   "with_options", "apply", "shard", "rebatch", "ragged_batch"}


def dataset_names(ctx: Context) -> set[str]:
    """Names bound to tf.data pipelines: assigned from ``tf.data...``/``tfds`` calls or from
    a chain of Dataset methods on a name already known (``ds = ds.shuffle(...)``)."""
    if not ctx.uses("tensorflow"):
        return set()
    out: set[str] = set()
    for _ in range(3):
        for name, values in ctx.assigns.items():
            for v in values:
                call = v
                while isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and (
                        call.func.attr in DATASET_METHODS):
                    call = call.func.value
                q = ctx.resolve(call.func) if isinstance(call, ast.Call) else ""
                if (q.startswith(("tensorflow.data.", "tensorflow_datasets."))
                        or isinstance(call, ast.Name) and call is not v and (
                            call.id in out or call.id == name)):  # ds = ds.shuffle(...)
                    out.add(name)
    return out


@rule("script.result-discarded",
      "the result of `{api}` is thrown away",
      "`{api}` does not change its argument: it returns a new {what}, and this line drops it "
      "(or binds it to a local name nothing reads), so the script runs without it -- "
      "tensorflow/models#4354 (a `dataset.prefetch(...)` with no effect), "
      "google-research/timesfm#459 (`self = torch.compile(self)` gave no speed-up)",
      "use the returned value: `{repl}`")
def result_discarded(ctx: Context) -> None:
    datasets = dataset_names(ctx)
    for node in ast.walk(ctx.tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            call = node.value
            kind = ctx.compiler(call.func)
            if kind and call.args and last_name(call) != "partial":
                arg = ast.unparse(call.args[0])
                ctx.add("script.result-discarded", "warning", node,
                        "the compiled function is never stored or called",
                        api=dotted(call.func) or "compile", what="compiled callable",
                        repl=f"{arg} = {ast.unparse(call)}")
            elif (isinstance(call.func, ast.Attribute) and call.func.attr in DATASET_METHODS
                  and isinstance(call.func.value, ast.Name)
                  and call.func.value.id in datasets):
                name = call.func.value.id
                ctx.add("script.result-discarded", "warning", node,
                        f"`{name}` is a tf.data pipeline; `.{call.func.attr}(...)` returns a "
                        f"new one", api=f"{name}.{call.func.attr}(...)", what="dataset",
                        repl=f"{name} = {ast.unparse(call)}")
        elif isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "self" for t in node.targets) and (
                isinstance(node.value, ast.Call)):
            fn = ctx.enclosing(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            if fn is not None and fn.args.args and fn.args.args[0].arg == "self":
                api = dotted(node.value.func) or "the call"
                ctx.add("script.result-discarded", "warning", node,
                        "assigning to `self` rebinds the method's local name only; the object "
                        "the caller holds is unchanged", api=api, what="object",
                        repl="self.forward = torch.compile(self.forward)` (or return it and "
                             "rebind it in the caller: `model = torch.compile(model)")


@rule("script.detect-anomaly-on",
      "autograd anomaly detection is switched on for training",
      "anomaly mode records a traceback for every forward op and checks every backward "
      "output for NaN, which synchronizes the device on each backward op; it is a debugging "
      "aid (snap-stanford/SATURN#97: always on, it forced a device sync per backward op)",
      "remove it, or enable it only behind a debug flag "
      "(`torch.autograd.set_detect_anomaly(args.debug)`)")
def detect_anomaly_on(ctx: Context) -> None:
    if not ctx.uses("torch"):
        return
    for node in ast.walk(ctx.tree):
        if isinstance(node, ast.Call) and ctx.resolve(node.func) in (
                "torch.autograd.set_detect_anomaly", "torch.autograd.anomaly_mode."
                "set_detect_anomaly"):
            mode = node.args[0] if node.args else keyword(node, "mode")
            if isinstance(mode, ast.Constant) and mode.value is True:
                guarded = ctx.enclosing(node, (ast.If,)) is not None
                ctx.add("script.detect-anomaly-on", "info" if guarded else "warning", node,
                        "set for the whole process" + (" when its branch runs" if guarded
                                                       else ""))
        elif isinstance(node, ast.With):
            for item in node.items:
                c = item.context_expr
                if isinstance(c, ast.Call) and ctx.resolve(c.func) == (
                        "torch.autograd.detect_anomaly") and ctx.search(
                        node.body, lambda n: isinstance(n, LOOPS) or ctx.is_step(n)):
                    ctx.add("script.detect-anomaly-on", "warning", node,
                            "the block runs training steps")


_BF16 = ("torch.bfloat16",)
_FP16 = ("torch.float16", "torch.half")


def _dtype_of(ctx: Context, node: ast.AST | None, depth: int = 2) -> str:
    """"bf16", "fp16" or "" for an autocast ``dtype=`` value (following a variable)."""
    if node is None:
        return "fp16"  # CUDA autocast's default dtype
    q = ctx.resolve(node)
    text = str(const(node) or "").lower()
    if q in _BF16 or text in ("bfloat16", "bf16"):
        return "bf16"
    if q in _FP16 or text in ("float16", "fp16", "half"):
        return "fp16"
    if isinstance(node, ast.Name) and depth:
        values = ctx.assigns.get(node.id, [])
        kinds = {_dtype_of(ctx, v, depth - 1) for v in values}
        return kinds.pop() if len(kinds) == 1 else ""
    return ""


def _conditional_on_fp16(expr: ast.AST | None) -> bool:
    """``enabled=(dtype == "float16")`` / ``enabled=use_fp16``: the scaler follows fp16."""
    text = ast.unparse(expr).lower() if expr is not None else ""
    return any(w in text for w in ("float16", "fp16", "half", "16-mixed"))


@rule("script.gradscaler-bf16",
      "loss scaling on a bfloat16 run",
      "a GradScaler exists for float16's narrow exponent range; bfloat16 has float32's, so "
      "nothing underflows -- the scaler only adds a scale, an unscale and an inf/NaN check to "
      "every step (and can silently skip steps) (ecmwf/WeatherGenerator#874: a considerable "
      "share of step time in an Nsight trace; decoderesearch/SAELens#723)",
      "create the scaler only for float16: `GradScaler(enabled=(dtype == torch.float16))`, "
      "or drop it and call `loss.backward()` / `optimizer.step()` directly")
def gradscaler_bf16(ctx: Context) -> None:
    if not ctx.uses("torch"):
        return
    kinds = {_dtype_of(ctx, keyword(c, "dtype")) for c in ctx.calls()
             if last_name(c) == "autocast" and ctx.resolve(c.func).startswith("torch.")}
    if kinds != {"bf16"}:
        return
    for c in ctx.calls():
        if last_name(c) != "GradScaler" or not ctx.resolve(c.func).startswith("torch."):
            continue
        enabled = keyword(c, "enabled")
        if isinstance(enabled, ast.Constant) and not enabled.value or _conditional_on_fp16(
                enabled):
            continue
        ctx.add("script.gradscaler-bf16", "warning", c,
                "every autocast region in this file uses `dtype=torch.bfloat16`")


def _iterated_in(ctx: Context, name: str) -> ast.AST | None:
    """A ``for ... in name`` (or ``enumerate(name)``/``tqdm(name)``) nested in another loop."""
    for node in ast.walk(ctx.tree):
        if not isinstance(node, ast.For | ast.AsyncFor):
            continue
        it = node.iter
        while isinstance(it, ast.Call) and it.args and last_name(it) in (
                "enumerate", "tqdm", "iter", "zip"):
            it = it.args[0]
        if isinstance(it, ast.Name) and it.id == name and ctx.enclosing(node, LOOPS):
            return node
    return None


@rule("script.dataloader-workers-respawn",
      "DataLoader workers are started again every epoch",
      "without `persistent_workers=True` each pass over the loader forks {workers} new worker "
      "processes, each with its own copy of the dataset, and tears them down at the end; the "
      "start-up is paid once per epoch (metatensor/metatrain#1271: epoch 1.10 s -> 0.74 s; "
      "open-mmlab/mmhuman3d#233: data start-up ~7 min -> ~35 s per epoch)",
      "pass `persistent_workers=True` to the DataLoader that is iterated every epoch")
def dataloader_workers_respawn(ctx: Context) -> None:
    if not ctx.uses("torch"):
        return
    builders = {fn.name: fn for fn in ctx.funcs.values()}
    for call in ctx.calls():
        if last_name(call) != "DataLoader" or keyword(call, "persistent_workers") is not None:
            continue
        workers = keyword(call, "num_workers")
        if workers is None or isinstance(workers, ast.Constant) and not workers.value:
            continue
        if ctx.enclosing(call, LOOPS) is not None:
            continue  # a loader built inside the loop: a different cost
        names: list[str] = []
        parent = ctx.parents.get(call)
        if isinstance(parent, ast.Assign):
            names = [t.id for t in parent.targets if isinstance(t, ast.Name)]
        elif isinstance(parent, ast.Return):
            fn = ctx.enclosing(call, (ast.FunctionDef, ast.AsyncFunctionDef))
            if fn is not None and fn.name in builders:
                names = [name for name, values in ctx.assigns.items() for v in values
                         if isinstance(v, ast.Call) and isinstance(v.func, ast.Name)
                         and v.func.id == fn.name]
        loop = next((hit for n in names if (hit := _iterated_in(ctx, n)) is not None), None)
        if loop is not None:
            ctx.add("script.dataloader-workers-respawn", "info", call,
                    f"it is iterated once per pass of the loop around {ctx.line(loop.lineno)}",
                    workers=ast.unparse(workers))


_PY_FUNCS = ("tensorflow.py_function", "tensorflow.py_func", "tensorflow.numpy_function",
             "tensorflow.compat.v1.py_func")


@rule("script.tfdata-python-in-pipeline",
      "Python code inside the tf.data input pipeline",
      "{what} runs Python, which holds the GIL: parallel map calls (and the pipeline's other "
      "threads) wait for one interpreter, so the input pipeline runs at Python speed "
      "(tensorflow/tensorflow#15694, mrry: `tf.py_func()` \"has to acquire the GIL\"; "
      "jpata/particleflow#202: `from_generator` \"doesn't release the GIL\")",
      "{remedy}")
def tfdata_python_in_pipeline(ctx: Context) -> None:
    if not ctx.uses("tensorflow"):
        return
    for call in ctx.calls():
        q = ctx.resolve(call.func)
        if q == "tensorflow.data.Dataset.from_generator":
            ctx.add("script.tfdata-python-in-pipeline", "info", call,
                    "every element comes from a Python generator", what="the generator",
                    remedy="when the input pipeline is the bottleneck, read from files with "
                           "tf.data readers (TFRecordDataset, `tfds` `as_dataset`) or index a "
                           "data source with `Dataset.from_tensor_slices` + `map`")
        elif last_name(call) == "map" and isinstance(call.func, ast.Attribute) and call.args:
            fn = call.args[0]
            body: list[ast.AST] = [fn.body] if isinstance(fn, ast.Lambda) else []
            if isinstance(fn, ast.Name) and fn.id in ctx.funcs:
                body = list(ctx.funcs[fn.id].body)
            hit = next((c for c in ctx.calls(body) if ctx.resolve(c.func) in _PY_FUNCS), None)
            if hit is not None:
                name = dotted(hit.func)
                ctx.add("script.tfdata-python-in-pipeline", "warning", call,
                        f"the map function calls `{name}`", what=f"`{name}`",
                        remedy="write the map function with TensorFlow ops (`tf.io`, `tf.image`, "
                            "`tf.strings`) so tf.data can run it in parallel without the GIL")

