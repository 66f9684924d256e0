"""Rules for feeding and sizing work on an accelerator (mostly PyTorch idioms)."""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import (
    LOOPS,
    const,
    dotted,
    keyword,
    last_name,
    skip_in_step,
    target_names,
    walk,
)
from devicebench.script_check.context import Context, rule
from devicebench.script_check.dataflow import callees
from devicebench.script_check.gap_rules import accelerate_device, lightning_gpu, lightning_loaders
from devicebench.script_check.kind_rules import jax_host_state_per_call
from devicebench.script_check.reach_rules import host_copies
from devicebench.script_check.round11_rules import (
    copying_constructor_copies,
    loader_kwargs,
    non_blocking_default_false,
)
from devicebench.script_check.setup_rules import unset_workers

_PER_ITEM = ("Image.open", "imread", "imdecode", "transform", "transforms", "read_image",
             "load", "resize", "convert")


def _accelerator(ctx: Context) -> str:
    """"cuda" / "mps" when the script puts work on one, "" otherwise."""
    text = "\n".join(ctx.lines)
    for dev in ("cuda", "mps"):
        if f"'{dev}" in text or f'"{dev}' in text or f".{dev}(" in text:
            return dev
    return ""


def _per_item_work(ctx: Context, dataset: ast.AST) -> str:
    """What per-item Python work the dataset does, "" if none is visible."""
    value = ctx.value_of(dataset.id) if isinstance(dataset, ast.Name) else dataset
    if not isinstance(value, ast.Call):
        return ""
    q = ctx.resolve(value.func)
    if q.startswith("torchvision.datasets.") and keyword(value, "transform") is not None:
        return f"`{last_name(value)}` decodes a PIL image and runs its transform per item"
    cls = ctx.classes.get(value.func.id) if isinstance(value.func, ast.Name) else None
    getitem = next((f for f in (cls.body if cls else []) if isinstance(f, ast.FunctionDef)
                    and f.name == "__getitem__"), None)
    hits = sorted((min(i for i, k in enumerate(_PER_ITEM) if k in dotted(n.func)), n.lineno,
                   dotted(n.func)) for n in (ast.walk(getitem) if getitem else ())
                  if isinstance(n, ast.Call) and any(k in dotted(n.func) for k in _PER_ITEM))
    if cls is None or not hits:
        return ""
    return f"`{cls.name}.__getitem__` calls `{hits[0][2]}` per item"


@rule("script.dataloader-workers",
      "DataLoader does per-item Python work in the training process",
      "{work}: with `num_workers=0` that runs in the main process between steps, so the "
      "{dev} waits for every batch (GPU utilisation drops to a fraction)",
      "load in parallel: `DataLoader(..., num_workers=4, pin_memory=True, "
      "persistent_workers=True)` (start at the number of cores; on macOS and Windows the "
      "training code must sit under `if __name__ == \"__main__\":`); for a small dataset "
      "preprocess once into tensors on the device instead")
def dataloader_workers(ctx: Context) -> None:
    dev = _accelerator(ctx)
    if not dev:
        return
    for call in ctx.calls():
        if last_name(call) != "DataLoader" or not call.args:
            continue
        workers = keyword(call, "num_workers")
        if workers is not None and const(workers) != 0 or any(k.arg is None
                                                              for k in call.keywords):
            continue  # workers set, or unknown (`**loader_kwargs`)
        work = _per_item_work(ctx, call.args[0])
        if work:
            ctx.add("script.dataloader-workers", "warning", call,
                    f"{work}; num_workers is {'0' if workers is not None else 'not set (0)'}",
                    work=work.replace("`", ""), dev=dev.upper() if dev == "mps" else "GPU")
        elif workers is None:
            if not _in_memory(ctx, call.args[0]):
                unset_workers(ctx, call, dev)  # a data set this file does not define (round 13)
        elif not _in_memory(ctx, call.args[0]):
            # info: `num_workers=0` written out, for a dataset this file does not show to be
            # in-memory tensors -- its loading and collation run between the steps
            ctx.add("script.dataloader-workers", "info", call,
                    "`num_workers=0` is set explicitly: every batch is loaded and collated in "
                    "the training process", work="each batch is loaded and collated here",
                    dev=dev.upper() if dev == "mps" else "GPU")


def _in_memory(ctx: Context, dataset: ast.AST) -> bool:
    """``TensorDataset(...)`` (or a name bound to one): indexing it is a tensor slice."""
    values = [dataset] + (ctx.assigns.get(dataset.id, []) if isinstance(dataset, ast.Name) else [])
    return any(isinstance(v, ast.Call) and last_name(v) == "TensorDataset" for v in values)


_TO_DEVICE = ("to", "cuda")


def _device_arg(ctx: Context, call: ast.Call) -> bool:
    """``x.to(...)`` names a device: ``device``, ``"cuda"``, ``torch.device(...)``."""
    args = [*call.args, *(k.value for k in call.keywords if k.arg == "device")]
    for a in args:
        text = ast.unparse(a).lower()
        if "dev" in text or "cuda" in text or "mps" in text or "gpu" in text:
            return True
    return False


def _whole_data(ctx: Context, name: str) -> bool:
    """``name`` holds a whole dataset in host memory (built outside the loop)."""
    value = ctx.value_of(name)
    if not isinstance(value, ast.Call) or keyword(value, "device") is not None:
        return False
    q = ctx.resolve(value.func)
    return q.startswith(("numpy.", "torch.")) or last_name(value) in (
        "load_data", "from_numpy", "tensor", "read_csv", "to_numpy", "float", "load")


@rule("script.per-step-copy",
      "the same host data copied to the device on every step",
      "`{data}` is held in host memory as a whole and a slice of it is copied to the "
      "device each step: a synchronous host-to-device transfer (pageable memory) the device "
      "waits for, repeated every epoch",
      "if it fits in device memory, move it once before the loop (`{data} = "
      "{data}.to(device)`) and slice on the device; otherwise use a DataLoader with "
      "`pin_memory=True` and `.to(device, non_blocking=True)`")
def per_step_copy(ctx: Context) -> None:
    jax_host_state_per_call(ctx)
    copying_constructor_copies(ctx)
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, LOOPS):
            continue
        for n in walk(loop.body, skip_in_step):
            if not (isinstance(n, ast.Call) and (
                    last_name(n) in _TO_DEVICE and isinstance(n.func, ast.Attribute)
                    or ctx.resolve(n.func) == "jax.device_put")):
                continue
            target = n.func.value if last_name(n) in _TO_DEVICE else (  # type: ignore[union-attr]
                n.args[0] if n.args else None)
            if last_name(n) == "to" and not _device_arg(ctx, n):
                continue  # .to(torch.float32): a dtype change, not a copy to the device
            sub = next((s for s in ast.walk(target) if isinstance(s, ast.Subscript)
                        and isinstance(s.slice, ast.Slice | ast.Name | ast.BinOp)), None) \
                if target is not None else None
            data = dotted(sub.value) if sub is not None else ""
            loop_vars = {t.id for t in ast.walk(loop.target) if isinstance(t, ast.Name)} \
                if isinstance(loop, ast.For) else set()
            if data.isidentifier() and data not in loop_vars and _whole_data(ctx, data):
                ctx.add("script.per-step-copy", "warning", n,
                        f"inside the loop at {ctx.line(loop.lineno)}", data=data)
    host_copies(ctx)


_TENSOR_FROM = ("torch.tensor", "torch.Tensor", "torch.FloatTensor", "torch.LongTensor",
                "torch.as_tensor", "jax.numpy.array", "jax.numpy.asarray", "tensorflow.constant",
                "tensorflow.convert_to_tensor")


@rule("script.list-batches",
      "batch built from a Python list on every step",
      "building the batch element by element in Python and converting the list costs "
      "Python time per element and a fresh host-to-device copy per step; the device waits "
      "for it",
      "convert the dataset to one tensor/array once before the loop and index it with a "
      "tensor of indices (`xb = X[idx]`, `idx = torch.randperm(n, device=device)[:bs]`), "
      "or use a `TensorDataset` + `DataLoader`")
def list_batches(ctx: Context) -> None:
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, LOOPS) or ctx.search(loop.body, ctx.is_step,
                                                     skip_in_step) is None:
            continue
        direct = list(walk(loop.body, skip_in_step))
        appended = {dotted(c.func.value) for c in ast.walk(loop) if isinstance(c, ast.Call)
                    and last_name(c) == "append" and isinstance(c.func, ast.Attribute)}
        built = {t.id for s in direct if isinstance(s, ast.Assign) and isinstance(
            s.value, ast.ListComp) for t in s.targets if isinstance(t, ast.Name)} | appended
        for n in direct:
            if not (isinstance(n, ast.Call) and ctx.resolve(n.func) in _TENSOR_FROM and n.args):
                continue
            arg = n.args[0]
            if isinstance(arg, ast.ListComp) or isinstance(arg, ast.Name) and arg.id in built:
                ctx.add("script.list-batches", "warning", n,
                        f"inside the training loop at {ctx.line(loop.lineno)}")


def _params(ctx: Context, call: ast.Call) -> int | None:
    """Parameter count of a torch.nn layer from literal sizes; None when unknown."""
    name = last_name(call)
    nums = [const(a) for a in call.args]
    ints = [v for v in nums if isinstance(v, int) and not isinstance(v, bool)]
    if name in ("Linear", "Bilinear") and len(ints) >= 2:
        return ints[0] * ints[1] + ints[1]
    if name.startswith("Conv") and len(ints) >= 3:
        return ints[0] * ints[1] * ints[2] ** (int(name[4]) if name[4:5].isdigit() else 2)
    if name in ("LSTM", "GRU", "RNN") and len(ints) >= 2:
        gates = {"LSTM": 4, "GRU": 3}.get(name, 1)
        layers = const(keyword(call, "num_layers")) or 1
        return gates * (ints[0] * ints[1] + ints[1] ** 2 + 2 * ints[1]) * layers  # type: ignore[operator]
    if name == "Embedding" and len(ints) >= 2:
        return ints[0] * ints[1]
    if name == "TransformerEncoderLayer":
        d = const(keyword(call, "d_model")) or (ints[0] if ints else None)
        ff = const(keyword(call, "dim_feedforward")) or 2048
        return 4 * d * d + 2 * d * ff if isinstance(d, int) else None  # type: ignore[operator]
    if name in ("ReLU", "Sigmoid", "Tanh", "Dropout", "Flatten", "Sequential", "Softmax",
                "TransformerEncoder", "LogSoftmax", "MSELoss", "CrossEntropyLoss", "BCELoss",
                "BCEWithLogitsLoss", "Identity", "GELU", "LayerNorm", "BatchNorm1d"):
        return 0
    return None


_TINY_PARAMS = 100_000


@rule("script.tiny-model-on-gpu",
      "a model of ~{params} parameters put on the {dev}",
      "each step launches dozens of kernels of a few microseconds of arithmetic each: the "
      "step is bound by launch and Python overhead, the {dev} mostly idles, and the CPU is "
      "usually as fast or faster (ml-explore/mlx-examples#26, pytorch/pytorch#122973)",
      "measure both before choosing (on the CPU: the same script with `device = \"cpu\"`); "
      "to make the "
      "accelerator pay off give it more work per step (batch size in the thousands), or "
      "compile the step (`torch.compile(model)`)")
def tiny_model_on_gpu(ctx: Context) -> None:
    dev = _accelerator(ctx)
    if not dev or not ctx.uses("torch"):
        return
    layers = [c for c in ctx.calls() if ctx.resolve(c.func).startswith("torch.nn.")
              and last_name(c)[:1].isupper()]
    sizes = [_params(ctx, c) for c in layers]
    if not layers or None in sizes or any(last_name(c) == "Module" for c in layers):
        return
    total = sum(sizes)  # type: ignore[arg-type]
    if total == 0 or total > _TINY_PARAMS:
        return
    for call in ctx.calls():
        if not (isinstance(call.func, ast.Attribute) and call.func.attr in _TO_DEVICE):
            continue
        recv = call.func.value
        if isinstance(recv, ast.Name) and recv.id in ctx.models or isinstance(
                recv, ast.Call) and ctx.resolve(recv.func).startswith("torch.nn.") or (
                isinstance(recv, ast.Call) and isinstance(recv.func, ast.Name)
                and recv.func.id in ctx.classes):
            ctx.add("script.tiny-model-on-gpu", "warning", call,
                    f"{len(layers)} layer(s), ~{total:,} parameters counted from their sizes",
                    params=f"{total:,}", dev="MPS GPU" if dev == "mps" else "GPU")
            return


def _pinned(ctx: Context, loader: ast.Call) -> bool:
    """Whether a DataLoader pins its batches: ``pin_memory=True``, or a ``**kwargs`` of the
    function that builds it to which a caller passes ``pin_memory=True``."""
    pin = keyword(loader, "pin_memory")
    if pin is not None:
        return not (isinstance(pin, ast.Constant) and pin.value is False)
    if not any(k.arg is None for k in loader.keywords):
        return False
    fn = ctx.enclosing(loader, (ast.FunctionDef, ast.AsyncFunctionDef))
    return fn is None or any(isinstance(c.func, ast.Name) and c.func.id == fn.name and (
        keyword(c, "pin_memory") is not None or any(k.arg is None for k in c.keywords))
        for c in ctx.calls())  # type: ignore[union-attr]


def _blocking_copies(ctx: Context, pinned_too: bool = False) -> list[tuple[ast.AST, ast.Call]]:
    """(loop, copy): ``x.to(device)``/``x.cuda()`` without ``non_blocking`` of a batch the
    step loop gets from its iterable -- the batch itself or a part of it (``batch["x"]``,
    ``batch.x``, ``batch[0]``), in the loop or in a function it runs that takes the batch with
    ``next(...)`` -- in a CUDA torch script whose DataLoaders do not pin (``pinned_too``: or
    do: a pinned batch copied without ``non_blocking=True`` still blocks the host)."""
    if not ctx.uses("torch") or _accelerator(ctx) != "cuda" and not accelerate_device(ctx):
        return []
    loaders = _loader_calls(ctx)
    if not loaders or any(_pinned(ctx, c) for c in loaders) and not pinned_too:
        return []
    out = _iterator_copies(ctx) if pinned_too else []
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, LOOPS) or ctx.search(loop.body, ctx.is_step, skip_in_step) is None:
            continue
        batch = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)} if isinstance(
            loop, ast.For | ast.AsyncFor) else set()
        bodies = [list(walk(loop.body))] + [list(walk(fn.body)) for _, fn in callees(
            ctx, list(loop.body), depth=1)]
        for nodes in bodies:
            names = batch | {t for n in nodes if isinstance(n, ast.Assign) and isinstance(
                n.value, ast.Call) and last_name(n.value) == "next" for x in n.targets
                for t in target_names(x)}
            out += [(loop, n) for n in nodes if isinstance(n, ast.Call) and isinstance(
                n.func, ast.Attribute) and n.func.attr in ("to", "cuda") and _part_of(
                n.func.value, names) and keyword(n, "non_blocking") is None]
            if out and not pinned_too:
                return out[:1]  # the no-pin finding needs one example
    return out


def _loader_classes(ctx: Context) -> list[ast.ClassDef]:
    """Classes of this file deriving from ``DataLoader`` (a loader that moves its batches)."""
    return [c for c in ctx.classes.values() if any(last_name(b) == "DataLoader" for b in c.bases)]


def _loader_calls(ctx: Context) -> list[ast.Call]:
    """``DataLoader(...)`` calls, and a DataLoader subclass's ``super().__init__(...)``."""
    subs = _loader_classes(ctx)
    return [c for c in ctx.calls() if last_name(c) == "DataLoader" or last_name(c) == "__init__"
            and "super" in ast.unparse(c.func) and any(
                ctx.enclosing(c, (ast.ClassDef,)) is k for k in subs)]


def _iterator_copies(ctx: Context) -> list[tuple[ast.AST, ast.Call]]:
    """(loop, copy) for a DataLoader subclass whose ``__iter__`` moves each batch to the
    device -- in its loop or a function that loop gives the batch to -- without
    ``non_blocking``: the training loop waits for that copy on every batch
    (huggingface/accelerate#2685)."""
    out = []
    for cls in _loader_classes(ctx):
        it = next((m for m in cls.body if isinstance(m, ast.FunctionDef) and m.name == "__iter__"),
                  None)
        for loop in [n for n in walk(it.body if it else []) if isinstance(n, ast.For)]:
            batch = set(target_names(loop.target))
            for call, fn in callees(ctx, list(loop.body), depth=1):
                given = {a.arg for a, v in zip(fn.args.args, getattr(call, "args", []),
                                               strict=False) if _part_of(v, batch)}
                names = given | {t for g in walk(fn.body) if isinstance(g, ast.comprehension)
                                 and _part_of(getattr(g.iter, "func", g.iter), given)
                                 for t in target_names(g.target)}
                out += [(loop, n) for n in walk(fn.body) if isinstance(n, ast.Call) and isinstance(
                    n.func, ast.Attribute) and n.func.attr in ("to", "cuda") and _part_of(
                    n.func.value, names) and keyword(n, "non_blocking") is None]
    return out


def _part_of(node: ast.AST, names: set[str]) -> bool:
    while isinstance(node, ast.Subscript | ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id in names


@rule("script.blocking-h2d-copy",
      "each batch is copied to the GPU from pageable memory, blocking",
      "the DataLoader ({loader}) does not pin its batches, so `.to(device)` copies through "
      "pageable memory, synchronously: the host waits for every copy and the copy cannot "
      "overlap the previous step's kernels (usually a few %, more with large batches or "
      "offloaded models)",
      "`DataLoader(..., pin_memory=True)` and `x.to(device, non_blocking=True)` "
      "(https://pytorch.org/docs/stable/notes/cuda.html#cuda-memory-pinning)")
def blocking_h2d_copy(ctx: Context) -> None:
    non_blocking_default_false(ctx)
    copies = _blocking_copies(ctx, pinned_too=True)
    loaders = _loader_calls(ctx)
    pinned = any(_pinned(ctx, c) for c in loaders)
    for loop, copy in copies:
        ctx.add("script.blocking-h2d-copy", "info", copy,
                f"`{ast.unparse(copy.func.value)[:40]}` comes from the loop at "  # type: ignore[attr-defined]
                f"{ctx.line(loop.lineno)}", loader=ctx.line(loaders[0].lineno), why=(
                    "the DataLoader pins its batches, but `.to(device)` without "
                    "`non_blocking=True` is still a synchronous copy: the host waits for it "
                    "before queueing the next kernels (hao-ai-lab/FastVideo#1217: part of 45% "
                    "GPU idle in an Nsight trace)") if pinned else "")


@rule("script.dataloader-no-pin-memory",
      "DataLoader without pin_memory feeding a CUDA training loop",
      "its batches are copied to the GPU in the training loop ({copy}); from pageable memory "
      "each copy is staged and synchronous, so the host waits for it and it cannot overlap "
      "the previous step (ostris/ai-toolkit#813: 20 s -> 10 s per step on an RTX 5090 from "
      "pinning alone)",
      "`DataLoader(..., pin_memory=True)`, and copy with `x.to(device, non_blocking=True)` "
      "(https://pytorch.org/docs/stable/notes/cuda.html#cuda-memory-pinning)")
def dataloader_no_pin_memory(ctx: Context) -> None:
    if lightning_gpu(ctx):  # Lightning copies the batches of train_dataloader() to the GPU
        for c in lightning_loaders(ctx):
            given = loader_kwargs(ctx, c)
            if given is not None and "pin_memory" not in given:
                ctx.add("script.dataloader-no-pin-memory", "info", c,
                        "no `pin_memory=True`; `train_dataloader()` returns it to a Trainer "
                        "on the GPU, which copies every batch to the device before the step",
                        copy="Lightning's batch transfer")
    copies = _blocking_copies(ctx)
    if not copies:
        return
    loop, copy = copies[0]
    for c in ctx.calls():
        if last_name(c) == "DataLoader":
            ctx.add("script.dataloader-no-pin-memory", "info", c,
                    f"no `pin_memory=True`; the loop at {ctx.line(loop.lineno)} copies its "
                    f"batches with `{ast.unparse(copy)[:50]}`", copy=ctx.line(copy.lineno))


def _autocast_call(ctx: Context, node: ast.AST | None) -> bool:
    return isinstance(node, ast.Call) and last_name(node) == "autocast" and ctx.resolve(
        node.func).startswith("torch.")


def _null_context(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Call) and last_name(node) == "nullcontext"


@rule("script.amp-off-on-mps",
      "autocast only on CUDA: on the Mac's GPU the model runs in float32",
      "the script also runs on Apple's MPS device, but mixed precision is switched on only "
      "when the device is CUDA and every other device gets `nullcontext()`; `torch.autocast` "
      "supports MPS (float16, bfloat16 on recent macOS), so the MPS GPU does float32 work it "
      "need not (nagadomi/nunif#643; karpathy/nanoGPT#698)",
      "use `torch.autocast(device_type=device.type, dtype=...)` for every GPU type (`cuda`, "
      "`mps`) and keep `nullcontext()` for the CPU only")
def amp_off_on_mps(ctx: Context) -> None:
    if not ctx.uses("torch") or "mps" not in ast.unparse(ctx.tree).lower():
        return
    for n in ast.walk(ctx.tree):
        if isinstance(n, ast.IfExp) and _cuda_only_test(n.test) and (
                _autocast_call(ctx, n.body) and _null_context(n.orelse)
                or _autocast_call(ctx, n.orelse) and _null_context(n.body)):
            ctx.add("script.amp-off-on-mps", "warning", n,
                    f"`{ast.unparse(n.test)[:50]}` decides; MPS gets no autocast")
        if not isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for i, s in enumerate(n.body):
            if not (isinstance(s, ast.If) and _cuda_only_test(s.test) and any(
                    isinstance(r, ast.Return) and _autocast_call(ctx, r.value)
                    for r in walk(s.body))):
                continue
            rest = s.orelse or n.body[i + 1:]
            null = next((r for r in walk(rest) if isinstance(r, ast.Return)
                         and _null_context(r.value)), None)
            if null is not None:
                ctx.add("script.amp-off-on-mps", "warning", null,
                        f"`{n.name}` returns autocast only when `{ast.unparse(s.test)[:40]}`")


def _cuda_only_test(test: ast.AST) -> bool:
    text = ast.unparse(test).lower()
    return "cuda" in text and "mps" not in text
