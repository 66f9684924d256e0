"""Step 0 of issue 24's round 13: corpus_round11's held-out misses, written generally.

Analysis gaps (each read by the older rules through helpers): a host value taken inside a
helper's ``return`` and passed on to another call (``sync_rules._consumed_in_return``);
values followed through tuple unpacking from ``zip(*rows)`` and through parameters whose
every caller passes a Python list (``kinds.python_list``); and here, a Python loop over the
rows of a device tensor that the training loop passes to a function of this file.

Kinds no rule knew, each an ``info`` (the cost depends on what the file does not show):

- ``torch.no_grad()`` in a file that never trains: ``torch.inference_mode()`` also skips
  autograd's version counters and view tracking (J22Melody/fairseq#16, AmitMY: 11% faster
  generation, 2026; PyTorch's autograd notes recommend inference mode for inference);
- Keras 2's ``steps_per_epoch`` / ``validation_steps`` given a count of samples (fchollet,
  keras-team/keras#6406, 2017: "we use number of steps instead of number of samples now");
- MONAI's ``CacheDataset`` deep-copying every cached item before its random transforms
  (``copy_cache=True`` by default; Nic-Ma, Project-MONAI/tutorials#410, 2021);
- a tensor cast to a wider float type on the host and then copied to the device, per step:
  four times the bytes of uint8 frames (Robotwithsoul on Kaixhin/Rainbow#48, 2019, labelled
  an enhancement by Kaixhin).
"""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import (
    LOOPS,
    keyword,
    last_name,
    root_name,
    target_names,
    walk,
)
from devicebench.script_check.context import Context, rule
from devicebench.script_check.dataflow import callees
from devicebench.script_check.kinds import repeat_site
from devicebench.script_check.sync_flow import device_params

# -- loops over a device tensor's rows in a callee -----------------------------------------


def _row_iter(loop: ast.For, held: set[str]) -> str:
    """The held name ``loop`` iterates row by row (``for r in t``, ``enumerate(t)``), or ""."""
    it = loop.iter
    if isinstance(it, ast.Call) and last_name(it) == "enumerate" and it.args:
        it = it.args[0]
    return it.id if isinstance(it, ast.Name) and it.id in held else ""


def device_row_loops(ctx: Context) -> None:
    """``script.per-sample-python-loop`` for ``for row in x`` over a device tensor ``x`` in a
    function the training loop calls (HarryVolek/PyTorch_Speaker_Verification#33: GE2E loss
    helpers looping over speakers and utterances, 20.3 ms -> 398 us once vectorised)."""
    if not ctx.uses("torch"):
        return
    from devicebench.script_check.sync_rules import _device_names, _in_step

    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, LOOPS) or ctx.search(loop.body, ctx.is_step) is None:
            continue
        direct = list(walk(loop.body, _in_step(ctx)))
        device = _device_names(ctx, direct) | {  # `e = model(x).reshape(...)`
            t for s in direct if isinstance(s, ast.Assign) and isinstance(s.value, ast.Call)
            and root_name(s.value) in ctx.models for tg in s.targets for t in target_names(tg)}
        for call, fn in callees(ctx, [n for n in direct if isinstance(n, ast.Call)], depth=1):
            held = device_params(ctx, call, fn, device)
            for n in walk(fn.body):
                if not isinstance(n, ast.For) or not (name := _row_iter(n, held)):
                    continue
                if isinstance(ctx.enclosing(n, (ast.For, ast.FunctionDef)), ast.For):
                    continue  # the outermost loop carries the finding
                ctx.add("script.per-sample-python-loop", "info", n,
                        f"`{fn.name}` loops over the rows of `{name}`, a device tensor the "
                        f"training loop at {ctx.line(loop.lineno)} passes it "
                        f"(`{ast.unparse(call)[:40]}`), on every step",
                        what=ctx.code(n.lineno)[:50])


# -- no_grad where inference_mode serves ---------------------------------------------------

def _trains(ctx: Context) -> bool:
    return any(last_name(c) in ("backward", "grad", "step", "requires_grad_", "zero_grad")
               for c in ctx.calls()) or any(
        isinstance(n, ast.keyword) and n.arg == "requires_grad" for n in ast.walk(ctx.tree))


def _no_grad(ctx: Context, node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and ctx.resolve(node.func) == "torch.no_grad"


@rule("script.no-grad-not-inference-mode",
      "`torch.no_grad()` in a script that only runs inference",
      "nothing in this file trains, so no tensor made here is later used by autograd; "
      "`torch.inference_mode()` skips what `no_grad` still does per op -- version-counter "
      "bumps and view tracking -- (J22Melody/fairseq#16, 2026: 11% faster generation; "
      "PyTorch's autograd notes: inference mode is the faster variant of no-grad mode)",
      "`with torch.inference_mode():` (or `@torch.inference_mode()`); keep `no_grad` where "
      "the outputs are later used in a computation that is differentiated")
def no_grad_not_inference_mode(ctx: Context) -> None:
    if not ctx.uses("torch") or _trains(ctx):
        return
    for n in ast.walk(ctx.tree):
        if isinstance(n, ast.With) and any(_no_grad(ctx, i.context_expr) for i in n.items):
            ctx.add("script.no-grad-not-inference-mode", "info", n,
                    "the file has no backward pass, optimizer step or `requires_grad`")
        elif isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef):
            for d in n.decorator_list:
                if _no_grad(ctx, d):
                    ctx.add("script.no-grad-not-inference-mode", "info", d,
                            "the file has no backward pass, optimizer step or `requires_grad`")


# -- steps_per_epoch given a sample count ---------------------------------------------------

_SAMPLE_WORDS = ("sample", "num_train", "n_train", "train_size", "num_val", "n_val",
                 "num_examples", "n_examples", "dataset_size")
_STEP_KWARGS = ("steps_per_epoch", "validation_steps", "steps")


def _sample_count(ctx: Context, value: ast.AST, generator: ast.AST | None) -> str:
    """Why ``value`` reads as a number of samples, or "" (``n // batch_size`` and
    ``len(generator)`` are step counts)."""
    if any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.FloorDiv | ast.Div)
           for n in ast.walk(value)) or any(
            isinstance(n, ast.Call) and last_name(n) in ("ceil", "floor") for n in ast.walk(value)):
        return ""
    if isinstance(value, ast.Name) and any(w in value.id.lower() for w in _SAMPLE_WORDS):
        return f"`{value.id}` names a number of samples"
    if isinstance(value, ast.Call) and last_name(value) == "len" and value.args and isinstance(
            value.args[0], ast.Name) and not (generator is not None and ast.unparse(
                value.args[0]) == ast.unparse(generator)) and any(
            w in value.args[0].id.lower() for w in ("x_", "train_x", "data", "images", "_x")):
        return f"`{ast.unparse(value)}` counts the samples of an array"
    return ""


@rule("script.steps-per-epoch-samples",
      "`{kw}` given a number of samples",
      "since Keras 2, `steps_per_epoch`/`validation_steps` count batches, not samples: given "
      "the sample count, every epoch draws batch_size times as many batches as the data has "
      "(keras-team/keras#6406, fchollet: \"we use number of steps instead of number of samples "
      "now\"; ~260 s -> ~10000 s per epoch in the report)",
      "`{kw}=math.ceil({value} / batch_size)` (or leave it out for a `Sequence` or a finite "
      "`tf.data` data set: Keras counts the batches itself)")
def steps_per_epoch_samples(ctx: Context) -> None:
    if not (ctx.uses("keras") or ctx.uses("tensorflow")):
        return
    for call in ctx.calls():
        if last_name(call) not in ("fit", "fit_generator", "evaluate", "evaluate_generator",
                                   "predict_generator", "predict"):
            continue
        gen = call.args[0] if call.args else keyword(call, "generator") or keyword(call, "x")
        for k in call.keywords:
            if k.arg in _STEP_KWARGS and (why := _sample_count(ctx, k.value, gen)):
                ctx.add("script.steps-per-epoch-samples", "info", call, why, kw=k.arg,
                        value=ast.unparse(k.value)[:30])


# -- MONAI CacheDataset copying its cache ---------------------------------------------------

_CACHE_DATASETS = ("monai.data.CacheDataset", "monai.data.SmartCacheDataset",
                   "monai.data.dataset.CacheDataset")


def _random_transforms(ctx: Context, node: ast.AST | None, depth: int = 2) -> list[str]:
    if node is None or depth < 0:
        return []
    if isinstance(node, ast.Name):
        return [t for v in ctx.assigns.get(node.id, []) for t in
                _random_transforms(ctx, v, depth - 1)]
    return [last_name(c) for c in ast.walk(node) if isinstance(c, ast.Call)
            and last_name(c).startswith("Rand")]


@rule("script.cache-dataset-copy",
      "`CacheDataset` deep-copies every cached item before the random transforms",
      "with `copy_cache=True` (the default) MONAI deep-copies each cached item on every "
      "access so the random transforms ({rand}) cannot change the cache; when they do not "
      "modify their input in place that copy is pure overhead per item (Project-MONAI/"
      "tutorials#410, Nic-Ma: ~1.5 s faster per round in the fast-training tutorial)",
      "`CacheDataset(..., copy_cache=False)` once the random transforms are known not to "
      "write into their input in place")
def cache_dataset_copy(ctx: Context) -> None:
    if not ctx.uses("monai"):
        return
    for call in ctx.calls():
        if ctx.resolve(call.func) not in _CACHE_DATASETS or keyword(call, "copy_cache") is not None:
            continue
        rand = _random_transforms(ctx, keyword(call, "transform") or (
            call.args[1] if len(call.args) > 1 else None))
        if rand:
            ctx.add("script.cache-dataset-copy", "info", call,
                    f"random transforms after the cache: {', '.join(sorted(set(rand)))}",
                    rand=", ".join(sorted(set(rand)))[:60])


# -- cast to a wider type before the copy to the device ------------------------------------

_WIDE = ("float32", "float", "float64", "double")


def _wide(ctx: Context, node: ast.AST | None) -> bool:
    return node is not None and ctx.resolve(node).split(".")[-1] in _WIDE and (
        ctx.resolve(node).startswith("torch."))


def _device_arg(ctx: Context, call: ast.Call) -> bool:
    args = [*call.args, *(k.value for k in call.keywords if k.arg == "device")]
    return any(not _wide(ctx, a) and any(w in ast.unparse(a).lower() for w in (
        "device", "cuda", "mps")) for a in args)


@rule("script.cast-before-copy",
      "cast to a wider type on the host, then copied to the device",
      "`{form}` converts on the CPU first, so the copy to the device moves the wide type's "
      "bytes (four times those of uint8 frames) and the host does the conversion; copying "
      "the narrow tensor and casting it on the device moves less and casts in parallel "
      "(Kaixhin/Rainbow#48: measured with timeit, labelled an enhancement by the author)",
      "copy first, then cast on the device: `x.to(device, non_blocking=True).float()` "
      "(`.to(device=d).to(dtype=torch.float32)`)")
def cast_before_copy(ctx: Context) -> None:
    if not ctx.uses("torch"):
        return
    for call in ctx.calls():
        if not (isinstance(call.func, ast.Attribute) and call.func.attr == "to"):
            continue
        inner = call.func.value
        both = _device_arg(ctx, call) and (_wide(ctx, keyword(call, "dtype")) or any(
            _wide(ctx, a) for a in call.args))
        chained = isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) and (
            inner.func.attr in ("float", "double") and not inner.args or inner.func.attr == "to"
            and any(_wide(ctx, a) for a in inner.args) and not _device_arg(ctx, inner)
        ) and _device_arg(ctx, call)
        if not (both or chained) or repeat_site(ctx, call) is None:
            continue
        form = ast.unparse(call)
        form = form if len(form) <= 50 else "..." + form[-47:]
        ctx.add("script.cast-before-copy", "info", call,
                "the cast and the copy are one call (the cast runs first, on the host)"
                if both else "the tensor is cast on the host, then copied", form=form)
