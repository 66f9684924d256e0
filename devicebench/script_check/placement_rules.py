"""PyTorch placement and distributed rules (issue 24, classes 16 and 18): `autocast` given a
device instead of a device type, CUDA-only calls on a script that also runs elsewhere, DDP
gradient synchronisation on every accumulation micro-step."""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import (
    LOOPS,
    dotted,
    keyword,
    last_name,
    target_names,
    walk,
)
from devicebench.script_check.context import Context, rule
from devicebench.script_check.kinds import repeat_site
from devicebench.script_check.reach_rules import cuda_amp_without_cuda, fsdp2_accumulation

_AUTOCAST = ("torch.autocast", "torch.amp.autocast", "torch.cuda.amp.autocast",
             "torch.cpu.amp.autocast")


def _device_kind(ctx: Context, node: ast.AST, depth: int = 2) -> str:
    """Why ``node`` is a device rather than a device type ("" if it is not known to be)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and ":" in node.value:
        return f"the string {node.value!r} names a device, not a device type"
    if isinstance(node, ast.JoinedStr) and any(
            isinstance(v, ast.Constant) and ":" in str(v.value) for v in node.values):
        return f"`{ast.unparse(node)}` names one device (`cuda:N`), not a device type"
    if isinstance(node, ast.Call) and ctx.resolve(node.func) == "torch.device":
        return f"`{ast.unparse(node)[:50]}` is a torch.device object, not a device type"
    if depth and isinstance(node, ast.Name):
        for v in ctx.assigns.get(node.id, []):
            why = _device_kind(ctx, v, depth - 1)
            if why:
                return f"`{node.id}` = " + why
    if depth and isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        for n in ast.walk(ctx.tree):  # self.device = device, a parameter defaulting to "cuda:0"
            if isinstance(n, ast.Assign) and any(dotted(t) == dotted(node) for t in n.targets):
                why = _device_kind(ctx, n.value, depth - 1) or _param_default(ctx, n)
                if why:
                    return f"`{dotted(node)}`: " + why
    return ""


def _param_default(ctx: Context, assign: ast.Assign) -> str:
    fn = ctx.enclosing(assign, (ast.FunctionDef, ast.AsyncFunctionDef))
    if fn is None or not isinstance(assign.value, ast.Name):
        return ""
    args = fn.args.args[len(fn.args.args) - len(fn.args.defaults):]  # type: ignore[attr-defined]
    for a, d in zip(args, fn.args.defaults, strict=False):  # type: ignore[attr-defined]
        if a.arg == assign.value.id:
            return _device_kind(ctx, d, 0) and f"defaults to {ast.unparse(d)}, a device"
    return ""


@rule("script.autocast-device-string",
      "`autocast` given a device, not a device type",
      "`torch.autocast(device_type=...)` takes a device type ('cuda', 'cpu', 'mps', 'xpu'): "
      "'cuda:0' raises \"RuntimeError: User specified an unsupported autocast device_type\", "
      "and so does a torch.device object in the releases that document `device_type` as a "
      "string (pytorch/pytorch#124738); the script breaks when it reaches this line",
      "pass the type: `torch.autocast(device_type=device.type, ...)` for a torch.device, or "
      "`device_type = 'cuda' if device.startswith('cuda') else device` for a string")
def autocast_device_string(ctx: Context) -> None:
    if not ctx.uses("torch"):
        return
    for call in ctx.calls():
        if ctx.resolve(call.func) not in _AUTOCAST:
            continue
        arg = keyword(call, "device_type") or (call.args[0] if call.args else None)
        why = _device_kind(ctx, arg) if arg is not None else ""
        if why:
            ctx.add("script.autocast-device-string", "error", call, why)


def _guarded(ctx: Context, node: ast.AST, words: tuple[str, ...]) -> bool:
    """Whether ``node`` only runs under a test naming one of ``words`` (its body, not else)."""
    child, cur = node, ctx.parents.get(node)
    while cur is not None:
        if isinstance(cur, ast.If | ast.IfExp) and child is not cur.test:
            text = ast.unparse(cur.test).lower()
            in_body = child in (cur.body if isinstance(cur.body, list) else [cur.body])
            if any(w in text for w in words) and (in_body or "!=" in text or " not " in text):
                return True
        if isinstance(cur, ast.BoolOp) and isinstance(cur.op, ast.And) and child in cur.values:
            before = cur.values[:cur.values.index(child)]  # `a and b`: b runs only if a holds
            if any(w in ast.unparse(v).lower() for v in before for w in words):
                return True
        if isinstance(cur, ast.FunctionDef | ast.AsyncFunctionDef) and any(
                w in cur.name.lower() for w in words):
            return True
        child, cur = cur, ctx.parents.get(cur)
    return False


def _code(ctx: Context) -> str:
    """The script's code without its comments."""
    return ast.unparse(ctx.tree)


def _runs_elsewhere(ctx: Context) -> str:
    """What shows that the script also runs without CUDA ("" if nothing does)."""
    text = _code(ctx)
    if ctx.snapshot is not None and ctx.snapshot.host.os == "Darwin":
        return "this machine is a Mac: no CUDA"
    for word, why in (("mps", "the script also selects Apple's MPS device"),
                      ("else 'cpu'", "the script falls back to the CPU"),
                      ("cuda.is_available()", "the script tests whether CUDA is there")):
        if word in text:
            return why
    return ""


@rule("script.cuda-only-call",
      "`{call}` runs unguarded on a script that also runs without {backend}",
      "{reason}: on a machine without it (an Apple-silicon Mac, a CPU-only build) the call raises "
      "(\"Torch not compiled with CUDA enabled\" / MPS backend not available) or, for a sync "
      "helper, measures nothing",
      "guard it with the device in use: `if device.type == '{kind}': {call}()`; for syncs use "
      "the matching backend (`torch.cuda.synchronize()` / `torch.mps.synchronize()`)")
def cuda_only_call(ctx: Context) -> None:
    if not ctx.uses("torch"):
        return
    elsewhere = _runs_elsewhere(ctx)
    for n in ast.walk(ctx.tree):  # sync = torch.cuda.synchronize if cuda else lambda: None
        if (isinstance(n, ast.IfExp) and ctx.resolve(n.body).endswith("cuda.synchronize")
                and isinstance(n.orelse, ast.Lambda) and "mps" in elsewhere.lower()):
            ctx.add("script.cuda-only-call", "warning", n,
                    "on MPS the sync is `lambda: None`", call="torch.cuda.synchronize",
                    backend="CUDA", kind="mps",
                    reason="the script also runs on MPS, where this sync does nothing: the "
                           "clock then measures dispatch, not the GPU's work (use "
                           "`torch.mps.synchronize`)")
    for call in ctx.calls():
        q = ctx.resolve(call.func)
        if q.startswith("torch.mps.") and not _guarded(ctx, call, ("mps",)):
            ctx.add("script.cuda-only-call", "warning", call,
                    "no test of the MPS device guards it", call=q, backend="MPS",
                    reason="`torch.mps` needs the MPS backend", kind="mps")
        elif (q.startswith("torch.cuda.") and elsewhere and last_name(call) not in (
                "is_available", "device_count", "Event", "amp", "autocast", "GradScaler")
                and not q.startswith("torch.cuda.amp.")
                and not _guarded(ctx, call, ("cuda", "gpu", "device"))):
            ctx.add("script.cuda-only-call", "error" if "Mac" in elsewhere else "warning",
                    call, elsewhere, call=q, backend="CUDA", reason=elsewhere, kind="cuda")
    cuda_amp_without_cuda(ctx)


def _ddp_names(ctx: Context) -> set[str]:
    """Models wrapped for data parallelism: ``DDP(model)``, and the model that
    ``accelerator.prepare(model, ...)`` returns (DDP when launched on several GPUs) unless
    the loop uses ``accelerator.accumulate`` (which skips the sync itself)."""
    out = {n for n, vs in ctx.assigns.items() for v in vs if isinstance(v, ast.Call) and (
        "DistributedDataParallel" in ctx.resolve(v.func) or last_name(v) in ("DDP", "FSDP")
        or "FullyShardedDataParallel" in ctx.resolve(v.func))}
    accelerators = {n for n, vs in ctx.assigns.items() for v in vs if isinstance(v, ast.Call)
                    and ctx.resolve(v.func).endswith("Accelerator")}
    if any(isinstance(c, ast.Call) and last_name(c) == "accumulate" for c in ctx.calls()):
        return out
    for node in ast.walk(ctx.tree):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and last_name(node.value) == "prepare"
                and isinstance(node.value.func, ast.Attribute)
                and dotted(node.value.func.value) in accelerators and node.value.args):
            first = node.value.args[0]
            names = [n for t in node.targets for n in target_names(t)]
            if isinstance(first, ast.Name) and names:
                out.add(names[0] if len(names) == len(node.value.args) else first.id)
    return out


def _steps_every_k(loop: ast.AST) -> ast.If | None:
    """``if (i + 1) % k == 0: optimizer.step()`` inside the loop body."""
    for n in walk(loop.body):  # type: ignore[attr-defined]
        if isinstance(n, ast.If) and any(isinstance(b, ast.BinOp) and isinstance(b.op, ast.Mod)
                                         for b in ast.walk(n.test)) and any(
                isinstance(c, ast.Call) and last_name(c) == "step" for c in ast.walk(n)):
            return n
    return None


@rule("script.ddp-no-sync",
      "DDP all-reduces the gradients on every accumulation micro-step",
      "{reason}",
      "run the forward and backward of every micro-step but the last under `model.no_sync()` "
      "(`ctx = model.no_sync() if (i + 1) % accum != 0 else contextlib.nullcontext()`, "
      "entered before the forward: DDP decides at the forward); `accelerate`'s "
      "`accumulate()` does this for you")
def ddp_no_sync(ctx: Context) -> None:
    fsdp2_accumulation(ctx)
    uses_no_sync = any(isinstance(n, ast.Attribute) and n.attr == "no_sync"
                       for n in ast.walk(ctx.tree))
    if not (ctx.uses("torch") or ctx.uses("accelerate") or uses_no_sync):
        return
    ddp = _ddp_names(ctx)
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, LOOPS):
            continue
        if uses_no_sync:
            _misplaced_no_sync(ctx, loop, ddp)
            continue
        if not ddp:
            continue
        backward = next((n for n in walk(loop.body, lambda x: isinstance(x, LOOPS))
                         if isinstance(n, ast.Call) and last_name(n) == "backward"), None)
        if backward is None:
            continue
        outer = ctx.enclosing(loop, LOOPS)
        accumulates = _steps_every_k(loop) is not None or (
            outer is not None and not any(isinstance(c, ast.Call) and last_name(c) == "step"
                                          for c in walk(loop.body)) and any(
                isinstance(c, ast.Call) and last_name(c) == "step" for c in walk(outer.body)))
        if not accumulates and not any(isinstance(c, ast.Call) and last_name(c) == "step"
                                       for c in walk(loop.body)):
            # the loop sits in a function (or loop) that a stepping loop runs once per
            # optimizer step (UKPLab/sentence-transformers#4039: a replay of mini-batches)
            site = repeat_site(ctx, loop)
            while site is not None and not accumulates:
                accumulates = any(isinstance(c, ast.Call) and last_name(c) == "step"
                                  for c in walk(getattr(site[0], "body", [])))
                site = repeat_site(ctx, site[0]) if not accumulates else None
        if accumulates:
            ctx.add("script.ddp-no-sync", "warning", backward,
                    f"`{sorted(ddp)[0]}` is DistributedDataParallel and the optimizer steps once "
                    "per several backward passes, none under `no_sync()`",
                    reason="every `backward()` of a DDP model starts an all-reduce of all "
                        "gradients; with K micro-steps per optimizer step K-1 of them are "
                        "wasted communication (pytorch/pytorch#43201)")


def _misplaced_no_sync(ctx: Context, loop: ast.AST, ddp: set[str]) -> None:
    """`no_sync` chosen on another micro-step than the one the optimizer steps after."""
    for n in walk(loop.body, lambda x: isinstance(x, LOOPS)):  # type: ignore[attr-defined]
        if isinstance(n, ast.With) and "no_sync" in ast.unparse(n.items[0].context_expr):
            calls = [c for c in ast.walk(n) if isinstance(c, ast.Call)]
            forward = any(isinstance(c.func, ast.Name) and c.func.id in ddp | {"model"}
                          or last_name(c) in ("forward", "compute_loss") for c in calls)
            if not forward and any(last_name(c) == "backward" for c in calls):
                ctx.add("script.ddp-no-sync", "warning", n,
                        "the `with` block holds the backward pass only; the forward ran before "
                        "it", reason="DDP decides whether to all-reduce during the forward "
                        "pass: `no_sync()` around `backward()` alone does nothing, so every "
                        "micro-step still all-reduces (baidu-baige/LoongForge#163)")
        if isinstance(n, ast.Assign | ast.With) and "no_sync" in ast.unparse(n):
            cond = next((b for b in ast.walk(n) if isinstance(b, ast.BinOp)
                         and isinstance(b.op, ast.Mod)), None)
            step_if = _steps_every_k(loop)
            step_mod = next((b for b in ast.walk(step_if.test) if isinstance(b, ast.BinOp)
                             and isinstance(b.op, ast.Mod)), None) if step_if else None
            if cond is not None and step_mod is not None and (
                    ast.dump(cond.left) != ast.dump(step_mod.left)):
                ctx.add("script.ddp-no-sync", "error", n,
                        f"`no_sync` follows `{ast.unparse(cond)}` but the optimizer steps on "
                        f"`{ast.unparse(step_mod)}` ({ctx.line(step_if.lineno)})",
                        reason="the micro-step that syncs is not the one before the optimizer "
                            "step: the step uses gradients that were never all-reduced, so the "
                            "ranks drift apart (modelscope/FunASR#3472)")


def _moved(ctx: Context, names: set[str]) -> bool:
    """Whether any of ``names`` (or a name assigned from one) is moved to a device."""
    family = set(names)
    for _ in range(3):
        family |= {n for n, vs in ctx.assigns.items() for v in vs
                   if any(isinstance(x, ast.Name) and x.id in family for x in ast.walk(v))}
    for c in ctx.calls():
        if last_name(c) in ("to", "cuda", "to_empty") and isinstance(c.func, ast.Attribute):
            root = c.func.value
            while isinstance(root, ast.Call | ast.Attribute):
                root = root.func if isinstance(root, ast.Call) else root.value
            if isinstance(root, ast.Name) and root.id in family:
                return True
        if keyword(c, "device_map") is not None or keyword(c, "device") is not None and any(
                isinstance(x, ast.Name) and x.id in family for x in ast.walk(c)):
            return True
    return False


@rule("script.model-not-on-device",
      "the model is never moved to the GPU",
      "the script times or runs on CUDA ({uses}), but `{model}` stays on the CPU: its work "
      "runs on the CPU (or fails with \"Expected all tensors to be on the same device\" once "
      "inputs are on the GPU)",
      "move it once after building it: `{model} = {model}.to(device)` (and the inputs with "
      "`.to(device)`) before compiling or timing it")
def model_not_on_device(ctx: Context) -> None:
    if not ctx.uses("torch"):
        return
    uses = next((ctx.resolve(c.func) for c in ctx.calls() if ctx.resolve(c.func).startswith(
        ("torch.cuda.Event", "torch.cuda.synchronize"))), "")
    if not uses:
        _trained_off_device(ctx)
        return
    for n in ast.walk(ctx.tree):
        if not (isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)):
            continue
        q = ctx.resolve(n.value.func)
        if not (q.startswith(("torch.hub.load", "torchvision.models.")) or last_name(
                n.value) == "from_pretrained"):
            continue
        names = set(target_names(n.targets[0]))
        if names and not _moved(ctx, names):
            ctx.add("script.model-not-on-device", "warning", n,
                    f"no `.to(...)`/`.cuda()` of `{sorted(names)[0]}` or of what is made from it",
                    uses=f"`{uses}`", model=sorted(names)[0])


_MOVERS = ("prepare", "fit", "Trainer", "DataParallel", "DistributedDataParallel", "FSDP",
           "fully_shard", "setup", "wrap")


def _trained_off_device(ctx: Context) -> None:
    """``script.model-not-on-device`` for a module built from a class (``net = Net()``) whose
    parameters are trained (``.parameters()`` given to an optimizer, a ``backward()`` in the
    file) in a script that picks a CUDA device (``torch.device("cuda" ...)``) but never moves
    that module -- nor passes it to a trainer/launcher or a local function that moves it."""
    device = next((v for vs in ctx.assigns.values() for v in vs if isinstance(v, ast.Call)
                   and ctx.resolve(v.func) == "torch.device" and "cuda" in ast.unparse(v)), None)
    if device is None or not any(last_name(c) == "backward" for c in ctx.calls()):
        return
    trained = {c.func.value.id for c in ctx.calls() if isinstance(c.func, ast.Attribute)
               and c.func.attr in ("parameters", "named_parameters")
               and isinstance(c.func.value, ast.Name)}
    for n in ctx.tree.body:
        if not (isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and isinstance(
                n.value.func, ast.Name) and n.value.func.id[:1].isupper()):
            continue
        names = set(target_names(n.targets[0])) & trained
        if not names or _moved(ctx, names) or _handed_over(ctx, names) or _moved_inside(n.value):
            continue
        name = sorted(names)[0]
        ctx.add("script.model-not-on-device", "warning", n,
                f"`{ast.unparse(device)[:50]}` picks the GPU, but no `.to(...)`/`.cuda()` of "
                f"`{name}` or of what is made from it", uses=f"`{ast.unparse(device)[:40]}`",
                model=name)


def _moved_inside(value: ast.expr) -> bool:
    """``DDP(build_model().to(device), ...)``: the module is moved inside the expression
    that builds what the name holds."""
    return any(isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
               and c.func.attr in ("to", "cuda", "to_empty") for c in ast.walk(value))


def _handed_over(ctx: Context, names: set[str]) -> bool:
    """Whether a model is passed to a trainer/launcher that places it (accelerate's
    ``prepare``, Lightning's ``fit``, DDP, ...) or to a local function that moves its
    argument (``def setup(m): return m.to(device)``)."""
    for c in ctx.calls():
        args = [a for a in [*c.args, *(k.value for k in c.keywords)]
                if isinstance(a, ast.Name) and a.id in names]
        if not args:
            continue
        if any(w in last_name(c) for w in _MOVERS):
            return True
        fn = ctx.funcs.get(c.func.id) if isinstance(c.func, ast.Name) else None
        if fn is not None and any(isinstance(m, ast.Call) and last_name(m) in ("to", "cuda")
                                  for m in ast.walk(fn)):
            return True
    return False


def _names_cuda(test: ast.AST) -> bool:
    """``"cuda" in device`` / ``device.startswith("cuda")``: a string test on the device name
    that sends every other device, ``mps`` included, to the other branch."""
    return any(isinstance(c, ast.Compare) and isinstance(c.left, ast.Constant)
               and c.left.value == "cuda" and isinstance(c.ops[0], ast.In) for c in ast.walk(test)
               ) or any(isinstance(c, ast.Call) and last_name(c) == "startswith" and c.args
                        and isinstance(c.args[0], ast.Constant) and c.args[0].value == "cuda"
                        for c in ast.walk(test))


@rule("script.device-choice-no-mps",
      "the device is chosen between CUDA and the CPU only",
      "on an Apple-silicon Mac `torch.cuda.is_available()` is False, so this picks the CPU "
      "although PyTorch's MPS backend could run the model on the Mac's GPU{mac}",
      "choose all three: `device = 'cuda' if torch.cuda.is_available() else 'mps' if "
      "torch.backends.mps.is_available() else 'cpu'` (and time both: small models can be "
      "faster on the CPU)")
def device_choice_no_mps(ctx: Context) -> None:
    if not ctx.uses("torch"):
        return
    mentions_mps = "mps" in _code(ctx).lower()
    mac = ctx.snapshot is not None and ctx.snapshot.host.os == "Darwin"
    for n in ast.walk(ctx.tree):
        test = n.test if isinstance(n, ast.IfExp | ast.If) else None
        if mentions_mps and not (test is not None and _names_cuda(test)):
            continue  # MPS is chosen somewhere; a string test still sends "mps" to the CPU
        if test is None or "cuda.is_available" not in ast.unparse(test) and not (
                isinstance(test, ast.Name) and any("cuda.is_available" in ast.unparse(v)
                                                   for v in ctx.assigns.get(test.id, []))
        ) and not _names_cuda(test):
            continue
        if isinstance(n, ast.IfExp) and "cpu" in ast.unparse(n.orelse) and not (
                mentions_mps and "mps" in ast.unparse(n.orelse)):
            where: ast.AST | None = n
        elif isinstance(n, ast.If) and not n.orelse:
            where = next((c for c in walk(n.body) if isinstance(c, ast.Call)
                          and last_name(c) in ("cuda", "to")), None)
        elif isinstance(n, ast.If):  # if cuda: device = "cuda:0"  else: device = "cpu"
            where = next((s for s in n.orelse if isinstance(s, ast.Assign) and any(
                isinstance(c, ast.Constant) and str(c.value).lower().startswith("cpu")
                for c in ast.walk(s.value))), None)
        else:
            where = None
        if where is not None:
            ctx.add("script.device-choice-no-mps", "warning" if mac else "info", where,
                    f"`{ast.unparse(test)[:50]}` decides; MPS is never tried",
                    mac=" (this machine is a Mac)" if mac else "")
            return
