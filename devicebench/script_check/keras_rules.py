"""Keras rules on building and compiling a model: legacy optimizers, ``input_shape``,
eager training, precision policy, output layers and losses, batch size, RNNs on an Apple
GPU. How a script then calls Keras is :mod:`.keras_usage_rules`'s."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from packaging.version import Version

from devicebench.env.finding import Severity
from devicebench.script_check.ast_tools import (
    LOOPS,
    const,
    dotted,
    keras_rel,
    keyword,
    last_name,
    number,
)
from devicebench.script_check.context import Context, rule
from devicebench.script_check.pins import pinned_keras


def _legacy_nodes(ctx: Context) -> Iterator[tuple[ast.AST, str]]:
    """Imports and attribute chains naming ``optimizers.legacy`` (outermost chain only)."""
    stack: list[ast.AST] = [ctx.tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import):
            yield from ((node, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            yield from ((node, f"{node.module or ''}.{a.name}") for a in node.names)
        elif isinstance(node, ast.Attribute) and "legacy" in dotted(node).split("."):
            q = ctx.resolve(node)
            if _is_legacy(q):
                yield node, q
                continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _is_legacy(q: str) -> bool:
    rel = keras_rel(q) or ""
    return not q.startswith("tf_keras.") and rel.split(".")[:2] == ["optimizers", "legacy"]


@rule("script.legacy-optimizer",
      "`keras.optimizers.legacy` is gone in Keras 3",
      "Keras 3 keeps `keras.optimizers.legacy` only as a stub: creating an optimizer from it "
      "raises ImportError \"`keras.optimizers.legacy` is not supported in Keras 3\"",
      "use `keras.optimizers.{name}(learning_rate=...)` (the Keras 3 optimizer); to stay on "
      "Keras 2 instead: `pip install tf-keras` and `export TF_USE_LEGACY_KERAS=1` before "
      "importing TensorFlow", "https://keras.io/guides/migrating_to_keras_3/")
def legacy_optimizer(ctx: Context) -> None:
    for node, q in _legacy_nodes(ctx):
        if not _is_legacy(q):
            continue
        rel = keras_rel(q) or ""
        snap, kv = ctx.snapshot, ctx.keras_v
        flag = snap.env_vars.get("TF_USE_LEGACY_KERAS", "") if snap else ""
        sev: Severity = "error"
        pin = pinned_keras(ctx.lines, ctx.directory) if snap is None else None
        opt = (rel.split(".") + ["Adam"])[2]
        if pin is not None and pin[1] < Version("2.11"):
            ctx.add("script.legacy-optimizer", "error", node,
                    f"the script pins `{pin[0]}` (Keras {pin[1]}), which has no "
                    "`keras.optimizers.legacy` yet: the attribute lookup fails (AttributeError)",
                    why="`keras.optimizers.legacy` appeared in Keras 2.11, when the new "
                        "optimizers became the default; before that the plain names are the "
                        "old optimizers",
                    fix=f"use `tf.keras.optimizers.{opt}(learning_rate=...)` under this pin, "
                        "or raise the pin to >= 2.11", name=opt)
            continue
        if pin is not None and pin[1] < Version("3"):
            sev, seen = "info", (f"works under the script's pin `{pin[0]}` (Keras {pin[1]}); "
                                 "raises ImportError after an upgrade to Keras 3 / TF >= 2.16")
        elif snap is None:
            seen = "with Keras 3 (the Keras of TensorFlow >= 2.16) creating it raises ImportError"
        elif q.startswith("tensorflow.") and snap.has("tf-keras") and flag in ("1", "true", "True"):
            sev, seen = "info", (f"works here (tf-keras {snap.version_of('tf-keras')} with "
                                 f"TF_USE_LEGACY_KERAS={flag} makes tf.keras Keras 2), but "
                                 "raises ImportError wherever Keras 3 serves tf.keras")
        elif ctx.keras2:
            sev, seen = "info", (f"works with keras {kv} (Keras 2) here; raises ImportError "
                                 "after an upgrade to Keras 3 / TensorFlow >= 2.16")
        elif kv:
            seen = f"keras {kv} is installed: creating it raises ImportError"
        else:
            sev, seen = "warning", ("Keras is not installed in the probed environment; with "
                                    "Keras 3 creating it raises ImportError")
        ctx.add("script.legacy-optimizer", sev, node, seen, name=(rel.split(".") + ["Adam"])[2])


_APPLICATIONS = ("ResNet", "VGG", "MobileNet", "EfficientNet", "Inception", "Xception",
                 "DenseNet", "NASNet", "ConvNeXt", "RegNet")


@rule("script.input-shape",
      "`{arg}=` on a layer",
      "Keras 3 warns \"Do not pass an `input_shape`/`input_dim` argument to a layer\": it "
      "builds models from an explicit Input",
      "make `{ns}.Input(shape={shape})` the first layer and drop `{arg}=`, e.g. "
      "`{ns}.Sequential([{ns}.Input(shape={shape}), {ns}.layers.{layer}(...)])`")
def input_shape(ctx: Context) -> None:
    for node in ctx.calls():
        q = ctx.resolve(node.func)
        rel = keras_rel(q) or ""
        layer = dotted(node.func).rsplit(".", 1)[-1]
        if rel.startswith("applications.") or layer.startswith(_APPLICATIONS):
            continue  # application constructors take input_shape= by design
        for kw in node.keywords:
            if kw.arg == "input_dim" and layer == "Embedding":
                continue  # the vocabulary size, not an input shape
            if kw.arg in ("input_shape", "input_dim") and (
                    layer[:1].isupper() or rel.startswith("layers.")):
                value = ast.unparse(kw.value)
                shape = value if kw.arg == "input_shape" else f"({value},)"
                # The fix in the script's own spelling: `tf.keras.layers.Flatten(...)`
                # (TensorFlow's tutorials) gets `tf.keras.Input`, not a `keras` it lacks.
                spelled = dotted(node.func)
                ns = spelled.split(".layers.")[0] if ".layers." in spelled else "keras"
                ctx.add("script.input-shape", "info" if ctx.keras2 else "warning", node,
                        f"fine in keras {ctx.keras_v}, warns in Keras 3" if ctx.keras2 else "",
                        arg=kw.arg, shape=shape, layer=layer, ns=ns)


@rule("script.run-eagerly",
      "training runs eagerly",
      "every step then runs op by op in Python (~10-25 us dispatch per op), without "
      "tf.function graphs or XLA: typically several times slower; it is a debugging switch",
      "remove `run_eagerly=True` / `run_functions_eagerly(True)`: by default Keras compiles "
      "the train step (add `jit_compile=True` to try XLA)")
def run_eagerly(ctx: Context) -> None:
    turned_off = [c.lineno for c in ctx.calls()
                  if ctx.resolve(c.func).endswith("run_functions_eagerly") and c.args
                  and isinstance(c.args[0], ast.Constant) and c.args[0].value is False]
    jax_backend = _keras_backend(ctx) == "jax"
    for node in ctx.calls():
        for kw in node.keywords:
            if kw.arg == "run_eagerly" and isinstance(kw.value, ast.Constant) and kw.value.value:
                ctx.add("script.run-eagerly", "warning", node)
            elif (kw.arg == "jit_compile" and jax_backend and last_name(node) == "compile"
                  and isinstance(kw.value, ast.Constant) and kw.value.value is False):
                ctx.add("script.run-eagerly", "warning", node,
                        "on Keras 3's JAX backend `jit_compile=False` means the train step is "
                        "not jitted: it runs op by op (keras-team/keras#18648: ~44 ms against "
                        "~3 ms per epoch)",
                        fix="remove `jit_compile=False` (or pass `jit_compile=True`): on the JAX "
                            "backend jitting is what compiles the step")
        q = ctx.resolve(node.func)
        if (q.endswith("run_functions_eagerly") and node.args
                and isinstance(node.args[0], ast.Constant) and node.args[0].value
                and not any(line > node.lineno for line in turned_off)):
            ctx.add("script.run-eagerly", "warning", node)


def _keras_backend(ctx: Context) -> str:
    """The backend a Keras 3 script selects for itself (``os.environ["KERAS_BACKEND"] =
    "jax"``), "" when it does not say."""
    for node in ast.walk(ctx.tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and any(
                isinstance(t, ast.Subscript) and "KERAS_BACKEND" in ast.unparse(t.slice)
                for t in node.targets):
            return str(node.value.value)
        if isinstance(node, ast.Call) and last_name(node) in ("setdefault", "putenv") and len(
                node.args) == 2 and "KERAS_BACKEND" in ast.unparse(node.args[0]) and isinstance(
                node.args[1], ast.Constant):
            return str(node.args[1].value)
    return ""


@rule("script.mixed-float16",
      "mixed_float16 precision policy",
      "float16 pays off only on GPUs with Tensor Cores (NVIDIA compute capability >= 7.0); "
      "on a CPU it is emulated: the mnist-cnn workload took ~16-20 s/epoch with "
      "mixed_float16 vs ~4.5 s in float32 (4x slower)",
      "enable it only when such a GPU is present (`if tf.config.list_physical_devices('GPU')"
      "`); on CPUs with AVX512-BF16/AMX use 'mixed_bfloat16'; keep the output layer "
      "`dtype='float32'`", "https://keras.io/api/mixed_precision/")
def mixed_float16(ctx: Context) -> None:
    for node in ast.walk(ctx.tree):
        if isinstance(node, ast.Constant) and node.value == "mixed_float16":
            _mixed(ctx, node)


def _mixed(ctx: Context, node: ast.AST) -> None:
    snap, sev, related = ctx.snapshot, "warning", ()
    why = fix = ""
    gpus = [d for fw in (snap.frameworks.values() if snap else []) for d in fw.gpu_devices]
    if snap is None:
        seen = ""
    elif not gpus and snap.nvidia_smi is None and not snap.is_apple_silicon:
        related, seen = ("env.no-gpu",), "mixed_float16 on this CPU-only machine"
        flags = {f.lower() for f in snap.host.cpu_flags} & {"avx512_bf16", "amx_bf16"}
        fix = (f"this CPU has {', '.join(sorted(flags))}: use `keras.mixed_precision."
               "set_global_policy('mixed_bfloat16')` (measured ~3.6-4.9 s/epoch vs 4.5 "
               "float32), or drop the policy" if flags else
               "drop the policy and train in float32 (this CPU lacks AVX512-BF16/AMX, so "
               "'mixed_bfloat16' would not help either)")
    elif not gpus:
        seen = "no framework sees a GPU here, so the float16 math runs on the CPU"
    else:
        ccs = [c for c in (number(d.compute_capability) for d in gpus) if c is not None]
        names = ", ".join(sorted({d.description or d.name for d in gpus}))
        seen = f"GPU {names} without known Tensor Cores: measure before keeping it"
        if ccs and max(ccs) >= 7.0:
            sev, seen = "info", f"GPU {names} (compute capability {max(ccs)}) has Tensor Cores"
            why = "mixed_float16 can speed up training on Tensor Cores"
            fix = "keep the output layer `dtype='float32'`; compare against float32"
    ctx.add("script.mixed-float16", sev, node, seen, related, why, fix)  # type: ignore[arg-type]


# -- model structure ---------------------------------------------------------------------
RNN_LAYERS = ("SimpleRNN", "LSTM", "GRU", "CuDNNLSTM", "CuDNNGRU")
_SIZED = ("Dense", "Conv1D", "Conv2D", "Conv3D", *RNN_LAYERS)


def _activation(call: ast.Call) -> str:
    """The activation of a layer call ('softmax', 'sigmoid', ...), "" if none."""
    if last_name(call) == "Softmax":
        return "softmax"
    value = keyword(call, "activation")
    if value is None and last_name(call) == "Activation" and call.args:
        value = call.args[0]
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return value.value.lower()
    return dotted(value).rsplit(".", 1)[-1].lower() if value is not None else ""


def _units(call: ast.Call) -> int | None:
    value = const(call.args[0] if call.args else keyword(call, "units")
                  or keyword(call, "filters"))
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _is_keras_layer(ctx: Context, call: ast.AST) -> bool:
    if not isinstance(call, ast.Call):
        return False
    rel = keras_rel(ctx.resolve(call.func))
    return rel is not None and rel.rsplit(".", 1)[-1][:1].isupper() or (
        ctx.uses("keras") or ctx.uses("tensorflow")) and last_name(call) in (
        *_SIZED, "Activation", "Softmax", "Flatten", "Dropout", "Embedding")


def _output_layers(ctx: Context) -> list[ast.Call]:
    """The last layer of each model in the file: Sequential lists, ``add`` calls, outputs=."""
    outs: list[ast.Call] = []
    last_add: dict[str, ast.Call] = {}
    for call in ctx.calls():
        name = last_name(call)
        if name == "Sequential" and call.args and isinstance(call.args[0], ast.List | ast.Tuple):
            layers = [e for e in call.args[0].elts if _is_keras_layer(ctx, e)]
            outs += layers[-1:]  # type: ignore[list-item]
        elif name == "add" and isinstance(call.func, ast.Attribute) and call.args and (
                _is_keras_layer(ctx, call.args[0])):
            last_add[dotted(call.func.value)] = call.args[0]  # type: ignore[assignment]
        elif name == "Model":
            out = keyword(call, "outputs") or (call.args[1] if len(call.args) > 1 else None)
            value = ctx.value_of(out.id) if isinstance(out, ast.Name) else out
            if isinstance(value, ast.Call) and _is_keras_layer(ctx, value.func):
                outs.append(value.func)  # type: ignore[arg-type]
    return outs + list(last_add.values())


@rule("script.softmax-one-unit",
      "softmax over a single output unit",
      "softmax normalises across the units of the layer: with one unit it always outputs "
      "1.0, so the loss is constant, the gradients are zero and the model never learns",
      "for two classes use `Dense(1, activation=\"sigmoid\")` with "
      "`loss=\"binary_crossentropy\"`; for n classes `Dense(n, activation=\"softmax\")`")
def softmax_one_unit(ctx: Context) -> None:
    for call in ctx.calls():
        if last_name(call) == "Dense" and _units(call) == 1 and _activation(call) == "softmax":
            ctx.add("script.softmax-one-unit", "error", call)


@rule("script.from-logits-softmax",
      "`from_logits=True` on a model whose output already applies {act}",
      "`from_logits=True` tells the loss to apply {act} itself: with a {act} output layer it "
      "is applied twice, the loss sees squashed values, gradients shrink and training "
      "converges slower or stalls",
      "drop `activation=\"{act}\"` from the output layer ({line}) and keep "
      "`from_logits=True` (numerically safer), or keep the activation and set "
      "`from_logits=False`")
def from_logits_softmax(ctx: Context) -> None:
    outs = _output_layers(ctx)
    if not outs:
        return
    scope = (ast.FunctionDef, ast.AsyncFunctionDef)
    for call in ctx.calls():
        value = keyword(call, "from_logits")
        if not (isinstance(value, ast.Constant) and value.value is True) or "entropy" not in (
                last_name(call).lower()):
            continue
        # the model this loss trains: the nearest output layer above it in the same
        # function (or at module level)
        here = ctx.enclosing(call, scope)
        near = [o for o in outs if here is None or ctx.enclosing(o, scope) in (here, None)]
        above = [o for o in near if o.lineno <= call.lineno] or near
        if not above:
            continue
        out = max(above, key=lambda o: o.lineno)
        act = _activation(out)
        if act in ("softmax", "sigmoid"):
            ctx.add("script.from-logits-softmax", "warning", call,
                    f"the output layer `{ctx.code(out.lineno)}` ({ctx.line(out.lineno)}) "
                    f"applies {act}", act=act, line=ctx.line(out.lineno))


_DATASETS = ("Dataset", "dataset", "from_directory", "flow", "batch", "generator", "Sequence")


@rule("script.small-batch-default",
      "small model trained with the default batch size (32)",
      "with at most {units} unit(s) per layer, one step of batch 32 is a few microseconds of "
      "arithmetic but dozens of op launches: the step is dispatch-bound, the device (GPU or "
      "CPU) idles between launches, and a GPU rarely beats the CPU",
      "pass a larger batch, e.g. `model.fit(..., batch_size=256)` (a 1-unit SimpleRNN: batch 32 "
      "vs 256 changes the loss reached, so raise the learning rate with it and compare the "
      "loss); `devicebench run WORKLOAD --batch-size 32,256` measures both (WORKLOAD: "
      "`seed-rnn`, or your model as `path/to/file.py:function`)")
def small_batch_default(ctx: Context) -> None:
    sized = [u for c in ctx.calls() if last_name(c) in _SIZED and _is_keras_layer(ctx, c)
             for u in [_units(c)]]
    if not sized or None in sized or max(sized) > 64:  # type: ignore[type-var]
        return
    for call in ctx.calls():
        if last_name(call) != "fit" or keyword(call, "batch_size") is not None or (
                ctx.enclosing(call, LOOPS) is not None) or any(k.arg is None
                                                               for k in call.keywords):
            continue
        x = call.args[0] if call.args else keyword(call, "x")
        has_y = len(call.args) > 1 or keyword(call, "y") is not None
        src = ctx.value_of(x.id) if isinstance(x, ast.Name) else x
        if not has_y or (src is not None and any(d in ast.unparse(src) for d in _DATASETS)):
            continue
        gpu = bool(ctx.snapshot and any(fw.gpu_devices for fw in ctx.snapshot.frameworks.values()))
        ctx.add("script.small-batch-default", "warning" if gpu else "info", call,
                f"largest layer {max(sized)} unit(s), no `batch_size=`",  # type: ignore[type-var]
                units=str(max(sized)))  # type: ignore[type-var]


def _apple_gpu(ctx: Context) -> bool:
    snap = ctx.snapshot
    return bool(snap and snap.is_apple_silicon and (
        snap.has("tensorflow-metal") or any(fw.gpu_devices for fw in snap.frameworks.values())))


@rule("script.rnn-on-gpu",
      "recurrent layer on {where}",
      "a recurrent layer runs one small step per timestep; {detail}",
      "train this model on the CPU: `with tf.device('/CPU:0'): model.fit(...)` (or "
      "`export CUDA_VISIBLE_DEVICES=''`; on a Mac `pip uninstall tensorflow-metal`), or use "
      "the JAX backend (`export KERAS_BACKEND=jax`; a 1-unit SimpleRNN: ~0.05-0.09 s/epoch vs "
      "~1.1-1.6 on TF); compare with `devicebench run WORKLOAD --device cpu,gpu:0`")
def rnn_on_gpu(ctx: Context) -> None:
    snap = ctx.snapshot
    gpu = bool(snap and any(fw.gpu_devices for fw in snap.frameworks.values()))
    for call in ctx.calls():
        if last_name(call) not in RNN_LAYERS or not _is_keras_layer(ctx, call):
            continue
        units = _units(call)
        tiny = units is not None and units <= 32
        if _apple_gpu(ctx):
            ctx.add("script.rnn-on-gpu", "warning", call, "this Mac's Metal GPU is visible",
                    where="an Apple GPU", detail="on the Metal GPU each timestep is a handful "
                    "of tiny kernels with no cuDNN-style fused RNN and no XLA, so the GPU "
                    "mostly waits: a 1-unit SimpleRNN took ~140 s/epoch (670 ms/step)"
                    " on an M1 Ultra's GPU vs ~20 ms/step with tensorflow-metal uninstalled "
                    "(tensorflow/tensorflow#62397)")
        elif tiny and (gpu or snap is None or snap.nvidia_smi is not None):
            where = "a GPU" if gpu else "a GPU (if it runs on one)"
            ctx.add("script.rnn-on-gpu", "warning" if gpu else "info", call,
                    f"{units} unit(s)" + (", and this machine has a GPU" if gpu else ""),
                    where=where, detail=f"with {units} unit(s) each timestep is microseconds "
                    "of work behind a kernel launch: dispatch-bound, so a GPU is no faster "
                    "(often slower) than the CPU")
