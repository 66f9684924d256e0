"""API-contract rules (issue 24, round 5): calls whose result or setting silently defeats
the speed-up the script asked for -- a pipeline or compiled function built and dropped, a
debugging switch left on, a Python generator feeding a tf.data pipeline under the GIL."""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import LOOPS, dotted, keyword, last_name
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
