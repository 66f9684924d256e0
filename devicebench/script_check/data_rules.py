"""Input-pipeline and host-work rules (issue 24, classes 15 and 19): ``tf.data`` ordering
and serial maps, JAX host ops between jitted steps."""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import LOOPS, last_name, walk
from devicebench.script_check.context import Context, rule
from devicebench.script_check.jax_rules import unjitted_flax_models
from devicebench.script_check.loop_rules import jax_dispatch_chain
from devicebench.script_check.reach_rules import unjitted_jax_callee

_SOURCES = ("TFRecordDataset", "TextLineDataset", "list_files", "FixedLengthRecordDataset")


def _chain(node: ast.AST) -> tuple[ast.AST, list[ast.Call]]:
    """``a.m1().m2()`` -> (a, [m1 call, m2 call]) in the order they run."""
    calls: list[ast.Call] = []
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        calls.append(node)
        node = node.func.value
    return node, list(reversed(calls))


def _pipelines(ctx: Context) -> list[list[ast.Call]]:
    """Per scope, each dataset variable's transformations in program order."""
    out: list[list[ast.Call]] = []
    for scope in [ctx.tree, *ctx.funcs.values()]:
        ops: dict[str, list[ast.Call]] = {}
        for stmt in walk(scope.body):
            value = stmt.value if isinstance(stmt, ast.Assign | ast.Return | ast.Expr) else None
            if not isinstance(value, ast.Call):
                continue
            root, calls = _chain(value)
            if isinstance(root, ast.Name) and root.id in ops:
                prior = ops[root.id]
            elif ctx.resolve(root).startswith(("tensorflow.data", "tensorflow_datasets.")) or (
                    _looks_tf_data(calls)):
                prior = []
            else:
                continue
            seq = prior + [c for c in calls if isinstance(c.func, ast.Attribute)]
            targets = [t.id for t in getattr(stmt, "targets", []) if isinstance(t, ast.Name)]
            for t in targets:
                ops[t] = seq
            if not targets:
                out.append(seq)
        out += [seq for seq in ops.values() if seq]
    return sorted(out, key=len, reverse=True)  # the longest view of a pipeline first


_TF_DATA_ONLY = {"prefetch", "padded_batch", "interleave", "cache", "shuffle", "repeat"}


def _looks_tf_data(calls: list[ast.Call]) -> bool:
    """A chain on a dataset this file did not build (``tfds.load(...)``, a parameter):
    methods only tf.data has, or ``map(..., num_parallel_calls=...)``."""
    names = {last_name(c) for c in calls}
    return bool(names & _TF_DATA_ONLY) or any(
        last_name(c) == "map" and any(k.arg == "num_parallel_calls" for k in c.keywords)
        for c in calls)


@rule("script.tfdata-order",
      "`tf.data` pipeline in an order that costs speed or shuffling",
      "{reason}",
      "the usual order: source -> `map(parse, num_parallel_calls=AUTOTUNE)` -> `cache()` (if "
      "it fits in memory) -> `shuffle(buffer)` -> `batch(n)` -> `repeat()` if needed -> "
      "`prefetch(AUTOTUNE)` last (https://www.tensorflow.org/guide/data_performance)")
def tfdata_order(ctx: Context) -> None:
    if not ctx.uses("tensorflow"):
        return
    seen: set[int] = set()
    for seq in _pipelines(ctx):
        names = [c.func.attr for c in seq]  # type: ignore[attr-defined]
        first = {n: names.index(n) for n in reversed(names)}
        if id(seq[0]) in seen:
            continue
        seen.add(id(seq[0]))
        if "repeat" in first and "shuffle" in first and first["repeat"] < first["shuffle"]:
            ctx.add("script.tfdata-order", "warning", seq[first["repeat"]],
                    "`repeat` comes before `shuffle`",
                    reason="shuffling a repeated dataset mixes epochs: some elements come twice "
                        "before others come once (tensorflow/docs#128)")
        if "cache" in first and "shuffle" in first and first["cache"] > first["shuffle"]:
            ctx.add("script.tfdata-order", "warning", seq[first["cache"]],
                    "`cache` comes after `shuffle`",
                    reason="the cache stores the first epoch's shuffled order and replays it: "
                        "every epoch sees the same order")
        if "shuffle" in first and "cache" not in first and "map" in first and (
                first["map"] < first["shuffle"]) and ("repeat" in first or _epochs(ctx)):
            ctx.add("script.tfdata-order", "info", seq[first["shuffle"]],
                    "elements are parsed by `map` and shuffled, with no `cache()` before",
                    reason="every epoch reads and parses all the data again; a `cache()` after "
                        "the parse and before `shuffle` does it once (google/ml-compiler-opt#34"
                        ": >5x for the input pipeline)")
        if "batch" in first and "shuffle" in first and first["shuffle"] > first["batch"]:
            ctx.add("script.tfdata-order", "warning", seq[first["shuffle"]],
                    "`shuffle` comes after `batch`" + (" and the maps" if "map" in first else ""),
                    reason="it shuffles whole batches (the same elements stay together every "
                        "epoch), and its buffer holds `buffer_size` batches: the first one waits "
                        "until that many batches were read, mapped and batched "
                        "(tensorflow/tensorflow#47687); shuffle elements, early")
        aug = _random_map(ctx, seq, first)
        if aug is not None:
            ctx.add("script.tfdata-order", "warning", seq[first["cache"]],
                    f"`cache` comes after `map({aug})`, which draws random numbers",
                    reason="the cache stores the first epoch's random augmentation and replays "
                        "it: every later epoch sees the same 'random' crops and flips "
                        "(tensorflow/tensorflow#47755); cache the deterministic decoding, map "
                        "the random augmentation after the cache")
        if "prefetch" in first and any(first["prefetch"] < i for n, i in first.items()
                                       if n in ("map", "batch", "shuffle", "cache")):
            ctx.add("script.tfdata-order", "info", seq[first["prefetch"]],
                    "`prefetch` is not the last transformation",
                    reason="`prefetch` overlaps the whole pipeline with training only at its end")


_CHEAP = {"cast", "reshape", "expand_dims", "squeeze", "identity", "one_hot", "ensure_shape"}


@rule("script.tfdata-serial-map",
      "`Dataset.map` runs its function on one element at a time",
      "without `num_parallel_calls`, tf.data applies the function sequentially, on one "
      "thread; {cost} bounds the whole input pipeline, and the device waits for it "
      "(https://www.tensorflow.org/guide/data_performance#parallelizing_data_transformation)",
      "`.map({fn}, num_parallel_calls=tf.data.AUTOTUNE)` (the output order stays the same; "
      "`deterministic=False` trades order for more speed)")
def tfdata_serial_map(ctx: Context) -> None:
    if not ctx.uses("tensorflow"):
        return
    seen: set[int] = set()
    for seq in _pipelines(ctx):
        for c in seq:
            if last_name(c) != "map" or id(c) in seen or not c.args or len(c.args) > 1 or any(
                    k.arg == "num_parallel_calls" for k in c.keywords):
                continue
            seen.add(id(c))
            fn = c.args[0]
            body = fn.body if isinstance(fn, ast.Lambda) else ctx.funcs[fn.id].body if (
                isinstance(fn, ast.Name) and fn.id in ctx.funcs) else None
            calls = [] if body is None else [n for n in walk(
                body if isinstance(body, list) else [body]) if isinstance(n, ast.Call)]
            cheap = body is not None and all(last_name(n) in _CHEAP for n in calls)
            # A cache() later in the chain keeps the map's output: it runs in epoch 1 only.
            cached = any(last_name(x) == "cache" for x in seq[seq.index(c) + 1:])
            ctx.add("script.tfdata-serial-map", "info" if cheap or cached else "warning", c,
                    f"`{ast.unparse(fn)[:40]}` " + (
                        "only casts or reshapes: cheap, but still one element at a time"
                        if cheap else "is mapped with no `num_parallel_calls`")
                    + ("; a later `cache()` keeps its output, so this costs the first epoch "
                       "only" if cached else ""),
                    fn=ast.unparse(fn)[:40],
                    cost="its per-element work" if cheap else "parsing and decoding each "
                    "element on one thread")


def _random_map(ctx: Context, seq: list[ast.Call], first: dict[str, int]) -> str | None:
    """The name of a function mapped before ``cache()`` that draws random numbers."""
    if "cache" not in first:
        return None
    for c in seq[:first["cache"]]:
        if last_name(c) != "map" or not c.args or not isinstance(c.args[0], ast.Name):
            continue
        fn = ctx.funcs.get(c.args[0].id)
        if fn is not None and any(isinstance(n, ast.Call) and (
                ctx.resolve(n.func).startswith(("tensorflow.random.", "numpy.random."))
                or ctx.resolve(n.func).startswith("tensorflow.image.random_"))
                for n in ast.walk(fn)):
            return fn.name
    return None


def _epochs(ctx: Context) -> bool:
    text = "\n".join(ctx.lines)
    return "epochs" in text or any(s in text for s in _SOURCES)


@rule("script.jax-host-op-in-loop",
      "JAX work dispatched between two jitted steps",
      "`{op}` runs outside the jitted step: JAX waits for the previous step to finish before "
      "it dispatches this op and then the next step, so the steps no longer queue up back to "
      "back (huggingface/transformers#11773: ~40% slower on TPU)",
      "move it into the jitted step (split the key inside it and return the new key), so "
      "each iteration is a single jitted call")
def jax_host_op_in_loop(ctx: Context) -> None:
    if not ctx.uses("jax"):
        return
    jax_dispatch_chain(ctx)
    unjitted_jax_callee(ctx)
    unjitted_flax_models(ctx)
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, LOOPS) or ctx.is_compiled_scope(loop):
            continue
        body = list(walk(loop.body, lambda x: isinstance(x, LOOPS)))
        if not any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                   and ctx.compiled.get(n.func.id) == "jax" for n in body):
            continue
        op = next((n for n in body if isinstance(n, ast.Call)
                   and ctx.resolve(n.func).startswith("jax.random.")
                   and last_name(n) in ("split", "fold_in")), None)
        if op is not None:
            ctx.add("script.jax-host-op-in-loop", "warning", op,
                    f"between calls of the jitted step in the loop at {ctx.line(loop.lineno)}",
                    op=ctx.resolve(op.func))
