"""Items of PyTorch's own performance checklists as rules (issue 24, round 10).

Each rule is one item of the PyTorch Performance Tuning Guide
(https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html, section named in the rule),
the DDP / FSDP API notes or the AMP recipe, checked where the script shows it statically. All
are ``info``: the guides say "consider" for each (the gain depends on the model), except where
the text says otherwise. ``tests/fixtures/scripts/guides.md`` lists every guide item and which
rule, if any, covers it.
"""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import const, dotted, keyword, last_name
from devicebench.script_check.context import Context, rule

_TUNING = "https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html"


@rule("script.ddp-find-unused-parameters",
      "DistributedDataParallel with `find_unused_parameters=True`",
      "with this flag DDP traverses the autograd graph from the outputs after every forward "
      "to find parameters that get no gradient, and can only mark buckets ready after that "
      "traversal, which reduces the overlap of the all-reduce with the backward pass (PyTorch "
      "DDP API notes: \"this flag results in an extra traversal of the autograd graph every "
      "iteration, which can slow down training\"; Tuning Guide, Distributed optimizations). "
      "A model whose every parameter gets a gradient gains nothing from it",
      "drop the flag (`find_unused_parameters=False`, the default) unless DDP raises that some "
      "parameters received no gradient; for Hugging Face `TrainingArguments` pass "
      "`ddp_find_unused_parameters=False`; `static_graph=True` when the unused set never changes",
      source=f"{_TUNING} (Distributed optimizations); torch.nn.parallel.DistributedDataParallel")
def ddp_find_unused(ctx: Context) -> None:
    for call in ctx.calls():
        for name in ("find_unused_parameters", "ddp_find_unused_parameters"):
            if const(keyword(call, name)) is True:
                ctx.add("script.ddp-find-unused-parameters", "info", call,
                        f"`{name}=True` passed to `{dotted(call.func) or last_name(call)}`")


@rule("script.data-parallel",
      "`torch.nn.DataParallel` for multi-GPU training",
      "DataParallel is one process driving every GPU: it replicates the model and scatters "
      "the batch on every step and gathers outputs to the first device, under one Python "
      "interpreter's GIL; the Tuning Guide (\"Use efficient multi-GPU backend\") and the "
      "DataParallel docs recommend DistributedDataParallel, one process per GPU, even on one "
      "machine",
      "launch one process per GPU (`torchrun --nproc_per_node=N train.py`) and wrap the model "
      "in `torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank])` with a "
      "`DistributedSampler`",
      source=f"{_TUNING} (Use efficient multi-GPU backend)")
def data_parallel(ctx: Context) -> None:
    if not ctx.uses("torch"):
        return
    for call in ctx.calls():
        if ctx.resolve(call.func) in ("torch.nn.DataParallel",
                                      "torch.nn.parallel.DataParallel"):
            ctx.add("script.data-parallel", "info", call)


_CONV = {"Conv1d", "Conv2d", "Conv3d"}
_BN = {"BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm"}


def _layer(ctx: Context, node: ast.AST) -> str:
    if isinstance(node, ast.Call) and ctx.resolve(node.func).startswith("torch.nn."):
        return last_name(node)
    return ""


def _biased_conv(ctx: Context, node: ast.AST) -> bool:
    if _layer(ctx, node) not in _CONV:
        return False
    bias = keyword(node, "bias")  # type: ignore[arg-type]
    return bias is None and len(node.args) < 8 or const(bias) is True  # type: ignore[attr-defined]


@rule("script.conv-bias-before-bn",
      "convolution with a bias directly followed by batch norm",
      "batch norm subtracts the channel mean right after the convolution, so the "
      "convolution's bias has no effect on the output; it is still computed, stored and "
      "updated on every step (Tuning Guide, \"Disable bias for convolutions directly followed "
      "by a batch norm\")",
      "`nn.Conv2d(..., bias=False)` when a `BatchNorm` follows it",
      source=f"{_TUNING} (Disable bias for convolutions directly followed by a batch norm)")
def conv_bias_before_bn(ctx: Context) -> None:
    if not ctx.uses("torch"):
        return
    for call in ctx.calls():
        if _layer(ctx, call) == "Sequential":
            for a, b in zip(call.args, call.args[1:], strict=False):
                if _biased_conv(ctx, a) and _layer(ctx, b) in _BN:
                    ctx.add("script.conv-bias-before-bn", "info", a)
    for fn in ast.walk(ctx.tree):
        if not isinstance(fn, ast.FunctionDef) or fn.name != "forward":
            continue
        cls = ctx.enclosing(fn, (ast.ClassDef,))
        convs = _conv_attrs(ctx, cls) if isinstance(cls, ast.ClassDef) else {}
        for call in ast.walk(fn):  # self.bn(self.conv(x))
            if (isinstance(call, ast.Call) and call.args and isinstance(call.args[0], ast.Call)
                    and isinstance(call.func, ast.Attribute)
                    and convs.get(call.func.attr) == "bn"
                    and isinstance(call.args[0].func, ast.Attribute)
                    and isinstance(convs.get(call.args[0].func.attr), ast.Call)):
                ctx.add("script.conv-bias-before-bn", "info", convs[call.args[0].func.attr])


def _conv_attrs(ctx: Context, cls: ast.ClassDef) -> dict[str, object]:
    """self.<name> = nn.Conv2d(...) (biased) -> its call; self.<name> = nn.BatchNorm2d -> "bn"."""
    out: dict[str, object] = {}
    for node in ast.walk(cls):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        t = node.targets[0]
        if isinstance(t, ast.Attribute) and dotted(t.value) == "self":
            if _biased_conv(ctx, node.value):
                out[t.attr] = node.value
            elif _layer(ctx, node.value) in _BN:
                out[t.attr] = "bn"
    return out


@rule("script.backward-in-autocast",
      "`backward()` called inside the `autocast` block",
      "the AMP recipe: \"Backward passes under autocast are not recommended. Backward ops run "
      "in the same type that autocast used for corresponding forward ops\" -- the block "
      "should wrap only the forward pass and the loss; inside it the backward pass also pays "
      "autocast's per-op dispatch and cast-cache bookkeeping",
      "end the `with torch.autocast(...)` block after the loss, then call "
      "`scaler.scale(loss).backward()` / `loss.backward()` outside it",
      source="https://pytorch.org/tutorials/recipes/recipes/amp_recipe.html (Adding "
             "torch.autocast); https://pytorch.org/docs/stable/amp.html")
def backward_in_autocast(ctx: Context) -> None:
    if not ctx.uses("torch"):
        return
    for node in ast.walk(ctx.tree):
        if not isinstance(node, ast.With) or not any(
                isinstance(i.context_expr, ast.Call)
                and last_name(i.context_expr) == "autocast" for i in node.items):
            continue
        for call in ctx.calls(node.body):
            if (last_name(call) == "backward" and isinstance(call.func, ast.Attribute)
                    and not call.args):
                ctx.add("script.backward-in-autocast", "info", call)


def _code(ctx: Context) -> str:
    """The script's source without comments (headers often name what they lack)."""
    return "\n".join(line.split("#", 1)[0] for line in ctx.lines)


def _vision(ctx: Context) -> bool:
    text = _code(ctx).lower()
    return any(w in text for w in ("conv2d", "torchvision", "timm", "resnet", "unet", "yolo"))


@rule("script.no-channels-last",
      "convolutional model under mixed precision without `channels_last`",
      "Tensor Core convolutions work in NHWC; a model and inputs kept in PyTorch's default "
      "NCHW layout make cuDNN transpose around (or pick slower kernels for) each convolution. "
      "Tuning Guide, \"Enable channels_last memory format for computer vision models\": "
      "\"channels_last ... can speed up training and inference of computer vision models\" "
      "(ultralytics/ultralytics#25362: 1.19-1.26x on a T4 with AMP)",
      "`model = model.to(device, memory_format=torch.channels_last)` and the inputs "
      "`x = x.to(device, memory_format=torch.channels_last)` (4-D tensors only)",
      source=f"{_TUNING} (Enable channels_last memory format for computer vision models)")
def no_channels_last(ctx: Context) -> None:
    if not ctx.uses("torch") or any(
            isinstance(n, ast.Attribute) and n.attr == "channels_last"
            or isinstance(n, ast.Constant) and n.value == "channels_last"
            for n in ast.walk(ctx.tree)):
        return
    text = _code(ctx)
    amp = "autocast" in text or ".half()" in text or "float16" in text
    if not amp or not _vision(ctx) and not any(
            w in text.lower() for w in ("imgs", "image", "tile")):
        return
    models = ctx.models
    for call in ctx.calls():
        if last_name(call) not in ("to", "cuda") or not isinstance(call.func, ast.Attribute):
            continue
        stmt = ctx.enclosing(call, (ast.Assign,))
        held = [dotted(t).split(".")[-1] for t in stmt.targets] if isinstance(
            stmt, ast.Assign) else []
        name = dotted(call.func.value).split(".")[-1] or (held[0] if held else "")
        dev = call.args and any(w in ast.unparse(call.args[0]).lower()
                                for w in ("cuda", "dev", "gpu"))
        if (name in models or "model" in name.lower() or name == "net") and (
                dev or last_name(call) == "cuda"):
            ctx.add("script.no-channels-last", "info", call)
            return


@rule("script.mixed-precision-fp32-params",
      "FSDP mixed-precision policy keeps `param_dtype=torch.float32`",
      "FSDP's `MixedPrecision(param_dtype=...)` is the dtype the gathered parameters and "
      "the forward/backward compute run in; float32 there means no mixed precision at all -- "
      "fp32 matmuls and twice the all-gather traffic of bf16 (FSDP API notes, "
      "`torch.distributed.fsdp.MixedPrecision`; meta-llama/llama-cookbook#283)",
      "`MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16, "
      "buffer_dtype=torch.bfloat16)` (keep float32 only in `reduce_dtype` if the reduction "
      "needs it)",
      source="https://pytorch.org/docs/stable/fsdp.html (MixedPrecision)")
def fsdp_fp32_params(ctx: Context) -> None:
    for call in ctx.calls():
        if last_name(call) != "MixedPrecision":
            continue
        v = keyword(call, "param_dtype")
        if v is not None and dotted(v).endswith(("float32", "float")):
            ctx.add("script.mixed-precision-fp32-params", "info", call)
