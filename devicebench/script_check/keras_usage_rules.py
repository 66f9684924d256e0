"""Keras rules on how a script calls Keras: APIs Keras 3 removed, float64 arrays fed to
a float32 model, one ``predict``/``fit`` call per sample. (Model-building rules are in
:mod:`.keras_rules`; this module registers after it, keeping the rule order.)"""

from __future__ import annotations

import ast

from devicebench.env.finding import Severity
from devicebench.script_check.ast_tools import (
    LOOPS,
    const,
    dotted,
    keras_rel,
    keyword,
    last_name,
    root_name,
    walk,
)
from devicebench.script_check.context import Context, rule
from devicebench.script_check.keras_rules import RNN_LAYERS
from devicebench.script_check.kinds import repeat_site


def _model_or_metric(ctx: Context, recv: ast.AST) -> bool:
    """``recv`` is a Keras model or metric (where Keras 3 dropped ``reset_states``)."""
    if isinstance(recv, ast.Name):
        if recv.id in ctx.models:
            return True
        value = ctx.value_of(recv.id)
        if isinstance(value, ast.Call) and (keras_rel(ctx.resolve(value.func)) or "").startswith(
                "metrics."):
            return True
    name = (dotted(recv) or "").rsplit(".", 1)[-1].lower()
    return any(k in name for k in ("model", "metric", "loss", "acc", "auc", "precision",
                                   "recall")) and "layer" not in name


_REMOVED = {"fit_generator": "fit", "evaluate_generator": "evaluate",
            "predict_generator": "predict"}


@rule("script.keras3-removed",
      "`{api}` was removed in Keras 3",
      "{reason}",
      "{remedy}", "https://keras.io/guides/migrating_to_keras_3/")
def keras3_removed(ctx: Context) -> None:
    if not (ctx.uses("keras") or ctx.uses("tensorflow")):
        return
    sev: Severity = "info" if ctx.keras2 else "error"
    note = (f"works with keras {ctx.keras_v} here; breaks after an upgrade to Keras 3"
            if ctx.keras2 else f"assuming {ctx.keras_basis}")
    rnn_layers = {n for n, vs in ctx.assigns.items() for v in vs
                  if isinstance(v, ast.Call) and last_name(v) in RNN_LAYERS}
    for call in ctx.calls():
        name = last_name(call)
        recv = call.func.value if isinstance(call.func, ast.Attribute) else None
        if name in _REMOVED and recv is not None:
            ctx.add("script.keras3-removed", sev, call, note, api=f".{name}()",
                    reason=f"Keras 3 models have no `{name}` (AttributeError); `{_REMOVED[name]}` "
                    "takes generators and " + ("`keras.utils.Sequence` (Keras 2's name; Keras 3 "
                    "calls it `PyDataset`)" if ctx.keras2 else "`keras.utils.PyDataset`")
                    + " directly",
                    remedy=f"call `.{_REMOVED[name]}(...)` with the same arguments")
        elif name == "reset_states" and recv is not None and _model_or_metric(ctx, recv) and not (
                isinstance(recv, ast.Name) and recv.id in rnn_layers):
            ctx.add("script.keras3-removed", sev, call, note, api=".reset_states()",
                    reason="Keras 3 models and metrics have no `reset_states` (AttributeError); "
                    "the method is `reset_state()`, on each stateful RNN layer and metric",
                    remedy="for a metric: `metric.reset_state()`; for a stateful model: `for "
                    "layer in model.layers: layer.reset_state() if hasattr(layer, "
                    "'reset_state') else None`")
        elif keyword(call, "lr") is not None and (keras_rel(ctx.resolve(call.func)) or "") \
                .startswith("optimizers."):
            ctx.add("script.keras3-removed", sev, call, note, api="lr=",
                    reason="Keras 3 optimizers raise ValueError \"Argument(s) not "
                    "recognized: {'lr': ...}\"", remedy="write `learning_rate=` instead of `lr=`")
    for node in ast.walk(ctx.tree):
        q = ctx.resolve(node) if isinstance(node, ast.Attribute) else (
            node.module or "" if isinstance(node, ast.ImportFrom) else "")
        if "layers.experimental.preprocessing" in q and not isinstance(
                ctx.parents.get(node), ast.Attribute):
            ctx.add("script.keras3-removed", sev, node, note,
                    api="keras.layers.experimental.preprocessing",
                    reason="Keras 3 has no `layers.experimental` (AttributeError / ImportError)",
                    remedy="use the same layers from `keras.layers` (e.g. "
                    "`keras.layers.Rescaling`, `keras.layers.RandomFlip`)")


def _target_of(ctx: Context, node: ast.AST) -> str:
    """The variable an expression is assigned to (``a, b = x / 255, y / 255`` included)."""
    stmt = ctx.enclosing(node, (ast.Assign, ast.AugAssign))
    if stmt is None:
        return ""
    target = stmt.targets[0] if isinstance(stmt, ast.Assign) else stmt.target
    if isinstance(target, ast.Tuple) and isinstance(stmt.value, ast.Tuple):
        for t, v in zip(target.elts, stmt.value.elts, strict=False):
            if any(n is node for n in ast.walk(v)):
                return root_name(t)
    return root_name(target)


_NUMPY_SOURCES = ("load_data", "read_csv", "imread", "to_numpy", "values", "array", "asarray",
                  "load", "loadtxt", "fromfile", "stack", "concatenate", "reshape")


def _numpy_origin(ctx: Context, node: ast.AST, depth: int = 3) -> bool:
    """``node`` is (a slice of) an array that came from numpy or a Keras dataset loader."""
    while isinstance(node, ast.Subscript | ast.Attribute) and not (
            isinstance(node, ast.Attribute) and node.attr == "values"):
        node = node.value
    if isinstance(node, ast.Name):
        value = ctx.value_of(node.id)
        return depth > 0 and value is not None and _numpy_origin(ctx, value, depth - 1)
    if isinstance(node, ast.Attribute):  # df.values
        return True
    if isinstance(node, ast.Call):
        q = ctx.resolve(node.func)
        return q.startswith("numpy.") or last_name(node) == "load_data" or (
            last_name(node) in _NUMPY_SOURCES and not q.startswith(("tensorflow.", "torch.",
                                                                     "jax.")))
    return False


@rule("script.float64-input",
      "float64 arrays from dividing by {den}",
      "numpy divides an integer (uint8) array by a Python float in float64: 8 bytes a value, "
      "twice the memory of float32; Keras converts every batch to float32 on its way to the "
      "device, and torch keeps float64 (`expected scalar type Float but found Double`; MPS "
      "has no float64 at all)",
      "convert first: `{name} = {name}.astype(\"float32\") / {den}`")
def float64_input(ctx: Context) -> None:
    casts = [(root_name(c.func.value), c.lineno) for c in ctx.calls()
             if last_name(c) == "astype" and isinstance(c.func, ast.Attribute)
             and "float32" in ast.unparse(c)]
    for node in ast.walk(ctx.tree):
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)
                and isinstance(node.right, ast.Constant) and node.right.value in (255, 255.0)):
            continue
        left, parent = node.left, ctx.parents.get(node)
        if isinstance(left, ast.Call) and (ctx.is_tensor_op(left) or last_name(left) in (
                "astype", "cast")) or "float32" in ast.unparse(left) or (
                isinstance(parent, ast.Attribute) and parent.attr == "astype") or (
                isinstance(parent, ast.Call) and ("float32" in ast.unparse(parent)
                                                  or ctx.is_tensor_op(parent))):
            continue
        if not _numpy_origin(ctx, left):
            continue
        target = _target_of(ctx, node) or root_name(left)
        if any(name == target and line > node.lineno for name, line in casts):
            continue  # converted to float32 before use
        ctx.add("script.float64-input", "warning", node, name=ast.unparse(left),
                den=ast.unparse(node.right))


_PER_SAMPLE_CALLS = ("predict", "fit", "evaluate", "train_on_batch", "predict_on_batch")


def _one_sample(ctx: Context, arg: ast.AST, loop: ast.AST | None) -> bool:
    """``arg`` holds one sample: reshaped to a batch of 1, or a loop's per-sample variable."""
    def batch_of_one(v: ast.AST | None) -> bool:
        if isinstance(v, ast.Call):
            name = last_name(v)
            if name == "expand_dims":
                return True
            if name == "reshape":
                dims = v.args[1:] if dotted(v.func).split(".")[0] in ("np", "numpy") else v.args
                first = dims[0] if dims else None
                if isinstance(first, ast.List | ast.Tuple):
                    first = first.elts[0] if first.elts else None
                first = const(first)
                return first == 1
            if name in ("array", "asarray") and v.args and isinstance(v.args[0], ast.List):
                return len(v.args[0].elts) == 1
        if isinstance(v, ast.Subscript):
            sl = v.slice
            if isinstance(sl, ast.Slice) and isinstance(sl.upper, ast.BinOp) and isinstance(
                    sl.upper.op, ast.Add) and const(sl.upper.right) == 1 and sl.lower is not None \
                    and ast.dump(sl.upper.left) == ast.dump(sl.lower):
                return True  # x[s:s + 1]: a batch of one row
            return "None" in ast.unparse(sl) or "newaxis" in ast.unparse(sl)
        return False

    if batch_of_one(arg):
        return True
    if isinstance(arg, ast.Name):
        if isinstance(loop, ast.For) and arg.id in {n.id for n in ast.walk(loop.target)
                                                    if isinstance(n, ast.Name)}:
            return not isinstance(loop.iter, ast.Call) or last_name(loop.iter) not in (
                "range", "enumerate")  # `for x in samples` (not `for epoch in range`)
        return any(batch_of_one(v) for v in ctx.assigns.get(arg.id, []))
    return False


def _per_iteration(ctx: Context, arg: ast.AST, loop: ast.AST | None,
                   fn: ast.AST | None) -> bool:
    """``arg`` is made anew on each iteration: assigned in the loop (or a part of such a
    value, ``batch[0]``), or a parameter of the function the loop calls."""
    while isinstance(arg, ast.Subscript) and isinstance(arg.slice, ast.Constant):
        arg = arg.value
    if not isinstance(arg, ast.Name):
        return False
    if loop is not None:
        return any(isinstance(s, ast.Assign) and arg.id in {n.id for t in s.targets
                                                            for n in ast.walk(t)
                                                            if isinstance(n, ast.Name)}
                   for s in walk(loop.body))  # type: ignore[attr-defined]
    return isinstance(fn, ast.FunctionDef) and arg.id in {a.arg for a in fn.args.args}


@rule("script.keras-call-per-sample",
      "`{method}` called once per sample",
      "`{method}` is built for many samples at once: each call sets up a data adapter, "
      "runs a compiled step and copies results back (~milliseconds), so for one sample the "
      "overhead is nearly all of the time, on a GPU more than on a CPU",
      "{remedy}", "https://keras.io/api/models/model_training_apis/#predict-method")
def keras_call_per_sample(ctx: Context) -> None:
    if not (ctx.uses("keras") or ctx.uses("tensorflow")):
        return
    methods = {f.name: f for c in ctx.classes.values() for f in c.body
               if isinstance(f, ast.FunctionDef)}
    called_in_loops = {last_name(c) for lp in ast.walk(ctx.tree) if isinstance(lp, LOOPS)
                       for c in ctx.calls(lp.body)}
    for call in ctx.calls():
        method = last_name(call)
        if method not in _PER_SAMPLE_CALLS or not isinstance(call.func, ast.Attribute) \
                or not call.args:
            continue
        loop = ctx.enclosing(call, LOOPS)
        fn = ctx.enclosing(call, (ast.FunctionDef, ast.AsyncFunctionDef))
        in_loop = loop is not None or fn is not None and fn.name in called_in_loops and (
            fn.name in methods or fn.name in ctx.funcs) or repeat_site(ctx, call) is not None
        if not in_loop:  # (repeat_site: a function a loop reaches a few calls deep)
            continue
        one = _one_sample(ctx, call.args[0], loop)
        if not one and not (method == "predict" and _per_iteration(ctx, call.args[0], loop, fn)):
            continue
        remedy = ("call the model directly, `model(x, training=False)`, which skips "
                  "predict's per-call setup; better, collect the samples and predict them "
                  "as one batch" if method in ("predict", "predict_on_batch") else
                  "collect the samples and train on them as one batch (`model.fit(xs, ys, "
                  "batch_size=len(xs))` or `model.train_on_batch(xs, ys)`)")
        where = "inside a loop" if loop is not None else (
            f"in `{fn.name}`, which a loop calls")  # type: ignore[union-attr]
        ctx.add("script.keras-call-per-sample", "warning" if one else "info", call,
                f"with a single sample, {where}" if one else
                f"once per iteration, {where}, on data built for that iteration (tiny batches: "
                "predict's per-call setup can dominate)", method=f".{method}()", remedy=remedy)


_KERAS2_ADDONS = {"tensorflow_hub.KerasLayer": "tensorflow_hub's `KerasLayer`",
                  "tensorflow_addons.": "TensorFlow Addons",
                  "tensorflow_model_optimization.": "the Model Optimization Toolkit"}


@rule("script.keras2-only-addon",
      "{addon} is a Keras 2 add-on, used with Keras 3",
      "{addon} builds Keras 2 (`tf_keras`) objects; since TensorFlow 2.16 `tf.keras` is Keras "
      "3, which rejects them (\"Only instances of `keras.Layer` can be added to a Sequential "
      "model\", \"A KerasTensor is symbolic\"); this assumes {basis}",
      "run the script on Keras 2: `pip install tf-keras` and `export TF_USE_LEGACY_KERAS=1` "
      "before Python starts (or `import tf_keras as keras` and build the model with it); or "
      "pin `tensorflow<2.16`")
def keras2_only_addon(ctx: Context) -> None:
    if ctx.keras2 or not (ctx.uses("tensorflow") or ctx.uses("keras")):
        return
    for call in ctx.calls():
        q = ctx.resolve(call.func)
        addon = next((v for k, v in _KERAS2_ADDONS.items() if q == k or k.endswith(".")
                      and q.startswith(k)), "")
        if addon:
            ctx.add("script.keras2-only-addon", "error", call, f"`{q}`", addon=addon,
                    basis=ctx.keras_basis)
            return
