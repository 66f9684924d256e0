"""Keras rules: APIs Keras 3 removed or warns about, eager training, precision policy."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from devicebench.env.finding import Severity
from devicebench.env.script_check.ast_tools import Context, dotted, keras_rel, number, rule


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
        if snap is None:
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


@rule("script.input-shape",
      "`{arg}=` on a layer",
      "Keras 3 warns \"Do not pass an `input_shape`/`input_dim` argument to a layer\": it "
      "builds models from an explicit Input",
      "make `keras.Input(shape={shape})` the first layer and drop `{arg}=`, e.g. "
      "`keras.Sequential([keras.Input(shape={shape}), keras.layers.{layer}(...)])`")
def input_shape(ctx: Context) -> None:
    for node in ctx.calls():
        q = ctx.resolve(node.func)
        layer = dotted(node.func).rsplit(".", 1)[-1]
        for kw in node.keywords:
            if kw.arg in ("input_shape", "input_dim") and (
                    layer[:1].isupper() or (keras_rel(q) or "").startswith("layers.")):
                value = ast.unparse(kw.value)
                shape = value if kw.arg == "input_shape" else f"({value},)"
                ctx.add("script.input-shape", "info" if ctx.keras2 else "warning", node,
                        f"fine in keras {ctx.keras_v}, warns in Keras 3" if ctx.keras2 else "",
                        arg=kw.arg, shape=shape, layer=layer)


@rule("script.run-eagerly",
      "training runs eagerly",
      "every step then runs op by op in Python (~10-25 us dispatch per op), without "
      "tf.function graphs or XLA: typically several times slower; it is a debugging switch",
      "remove `run_eagerly=True` / `run_functions_eagerly(True)`: by default Keras compiles "
      "the train step (add `jit_compile=True` to try XLA)")
def run_eagerly(ctx: Context) -> None:
    for node in ctx.calls():
        for kw in node.keywords:
            if kw.arg == "run_eagerly" and isinstance(kw.value, ast.Constant) and kw.value.value:
                ctx.add("script.run-eagerly", "warning", node)
        q = ctx.resolve(node.func)
        if (q.endswith("run_functions_eagerly") and node.args
                and isinstance(node.args[0], ast.Constant) and node.args[0].value):
            ctx.add("script.run-eagerly", "warning", node)


@rule("script.mixed-float16",
      "mixed_float16 precision policy",
      "float16 pays off only on GPUs with Tensor Cores (NVIDIA compute capability >= 7.0); "
      "on a CPU it is emulated: seed 001's MNIST CNN took ~16-20 s/epoch with mixed_float16 "
      "vs ~4.5 s in float32 (4x slower)",
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
