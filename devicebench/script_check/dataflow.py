"""What a timed region runs: device work followed through values, wrappers and methods.

Issue 24, classes 15-17: a clock pair around ``backbone_trt(images)`` (a model wrapped by a
converter), ``foo.factors.sum()`` (a value a jitted function produced, kept on an object),
``self.forward(device)`` or ``loss.backward()`` times device work just as a call of the model
itself does. These helpers answer "does this call queue device work?" and "does this
region really wait for the device?" for the timing rules; they never import a framework.
"""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import dotted, last_name, root_name, walk
from devicebench.script_check.context import Context

_DEVICE_METHODS = {"forward", "backward", "generate", "train_step", "training_step",
                   "step_fn", "run_backward", "run_forward"}
_WRAPPER_FACTORIES = {"torch2trt", "pipeline", "DataParallel", "DistributedDataParallel",
                      "DDP", "FSDP", "fully_shard", "prepare", "compile", "trace", "script"}
_CREATORS = {"randn", "rand", "zeros", "ones", "empty", "full", "tensor", "arange", "load",
             "randint", "linspace", "from_numpy"}
# methods of a model or tensor that do no asynchronous device work (or wait for it)
_HOST_METHODS = {"summary", "save", "save_weights", "load_weights", "get_weights", "set_weights",
                 "compile", "state_dict", "load_state_dict", "parameters", "named_parameters",
                 "train", "eval", "to", "cuda", "cpu", "numpy", "item", "tolist", "fit",
                 "evaluate", "predict", "predict_on_batch", "train_on_batch", "test_on_batch",
                 "size", "dim", "append", "keys", "values", "items", "count_params", "zero_grad"}
_TRANSFORMS = {"jit", "pmap", "vmap", "grad", "value_and_grad", "shard_map", "xmap"}
_GPU_WORDS = ("cuda", "mps", "device", "accelerator", "xpu", "gpu", "tpu")


def device_values(ctx: Context) -> set[str]:
    """Names and attribute names (``x``, ``.factors``) bound to values that live on a device:
    results of tensor ops, model calls, ``.cuda()``/``.to(...)``, and what is computed from
    them. Attributes are keyed ``"." + attr`` (``self.factors = f(...)`` marks ``.factors``)."""
    cached = getattr(ctx, "_device_values", None)
    if cached is not None:
        return cached
    out: set[str] = set()
    assigns = [n for n in ast.walk(ctx.tree) if isinstance(n, ast.Assign)]
    for _ in range(3):
        for a in assigns:
            if not _is_device_expr(ctx, a.value, out):
                continue
            for t in a.targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        out.add(n.id)
                if isinstance(t, ast.Attribute):
                    out.add("." + t.attr)
    ctx._device_values = out  # type: ignore[attr-defined]
    return out


def _is_device_expr(ctx: Context, node: ast.AST, known: set[str]) -> bool:
    while isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Name):
        return node.id in known
    if isinstance(node, ast.Attribute):
        return "." + node.attr in known or _is_device_expr(ctx, node.value, known)
    if not isinstance(node, ast.Call):
        return False
    if ctx.is_tensor_op(node) or last_name(node) in ("cuda", "to") and isinstance(
            node.func, ast.Attribute) or isinstance(node.func, ast.Call) and ctx.compiler(
                node.func):
        return True  # a tensor op, a copy to a device, `jax.jit(f)(x)`
    return isinstance(node.func, ast.Attribute) and _is_device_expr(ctx, node.func.value, known)


def wrapped_models(ctx: Context) -> set[str]:
    """Names bound to a model wrapped by a converter or launcher: ``trt = torch2trt(model,
    ...)``, ``pipe = pipeline(...)``, ``m = DDP(model)``."""
    out: set[str] = set()
    models = module_names(ctx)
    for name, values in ctx.assigns.items():
        for v in values:
            if isinstance(v, ast.Call) and (last_name(v) in _WRAPPER_FACTORIES and (
                    last_name(v) == "pipeline" or any(
                        isinstance(a, ast.Name) and a.id in models or isinstance(a, ast.Call)
                        and root_name(a) in models for a in v.args))):
                out.add(name)
    return out


def module_names(ctx: Context) -> set[str]:
    """Models known by what is done to them in a torch script: names on which
    ``.eval()``, ``.train()`` or ``.parameters()`` is called (a global model used in a
    function without being built in this file), besides ``ctx.models``."""
    out = set(ctx.models)
    if ctx.uses("torch"):
        out |= {c.func.value.id for c in ctx.calls() if isinstance(c.func, ast.Attribute)
                and c.func.attr in ("eval", "train", "parameters", "named_parameters")
                and isinstance(c.func.value, ast.Name) and not c.args}
    return out


def is_device_work(ctx: Context, node: ast.AST) -> bool:
    """A call that queues device work: a tensor op or model call, a method of a device value
    (``out.mean()``, ``foo.factors.sum()``), a wrapped model, ``.forward``/``.backward``."""
    if not isinstance(node, ast.Call):
        return False
    if ctx.is_tensor_op(node) and not ctx.is_sync(node):
        return True
    func = node.func
    if isinstance(func, ast.Call):  # jax.vmap(f)(x), or `map_fn(f)(x)` with map_fn a transform
        return bool(ctx.compiler(func)) or _jax_transform(ctx, func.func)
    if isinstance(func, ast.Name):
        return func.id in wrapped_models(ctx) or func.id in device_values(ctx)
    if not isinstance(func, ast.Attribute) or ctx.is_sync(node) or func.attr in _HOST_METHODS:
        return False
    if func.attr in _DEVICE_METHODS and framework_used(ctx):
        return True
    recv = func.value
    values = device_values(ctx)
    if isinstance(recv, ast.Name):
        return recv.id in values or recv.id in wrapped_models(ctx)
    return isinstance(recv, ast.Attribute) and ("." + recv.attr in values
                                                or root_name(recv) in values)


def _jax_transform(ctx: Context, node: ast.AST) -> bool:
    """``jax.vmap``/``jax.pmap``/... or a name bound to one (``map_fn = jax.pmap if n > 1
    else jax.vmap``): calling what it returns runs device work."""
    if ctx.resolve(node).startswith("jax.") and last_name(node) in _TRANSFORMS:
        return True
    values = ctx.assigns.get(node.id, []) if isinstance(node, ast.Name) else []
    return bool(values) and all(
        all(_jax_transform(ctx, b) for b in (v.body, v.orelse)) if isinstance(v, ast.IfExp)
        else not isinstance(v, ast.Name) and _jax_transform(ctx, v) for v in values)


def framework_used(ctx: Context) -> bool:
    return ctx.uses("torch") or ctx.uses("jax") or ctx.uses("tensorflow")


def torch_cpu_only(ctx: Context) -> bool:
    """A torch script that never names a GPU or a device: its ops run synchronously on the
    CPU, so timing them needs no sync."""
    if not ctx.uses("torch") or ctx.uses("jax") or ctx.uses("tensorflow"):
        return False
    text = "\n".join(line.split("#", 1)[0] for line in ctx.lines).lower()
    if any(w in text for w in _GPU_WORDS):
        return False
    # and it builds what it times (a model, or tensors), rather than receiving it
    return bool(ctx.models) or any(isinstance(v, ast.Call) and ctx.resolve(v.func).startswith(
        "torch.") and last_name(v) in _CREATORS for vs in ctx.assigns.values() for v in vs)


def search_device_work(ctx: Context, roots: list[ast.AST]) -> ast.AST | None:
    """First device-work call under ``roots``, following calls of this file's functions and
    methods (``self.forward(x)`` when ``forward`` is defined here)."""
    hit = ctx.search(roots, lambda n: is_device_work(ctx, n))
    if hit is not None:
        return hit
    for n in walk(roots):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and (
                n.func.attr in ctx.funcs and dotted(n.func.value) in ("self", "cls")):
            inner = ctx.search(ctx.funcs[n.func.attr].body, lambda m: is_device_work(ctx, m))
            if inner is not None:
                return inner
    return None


def waits(ctx: Context, region: list[ast.AST]) -> bool:
    """Whether ``region`` waits for the device whatever the device. A sync under a test of
    one backend covers that backend only: ``if device.type == "mps": torch.mps.synchronize()``
    leaves CUDA (torch's usual GPU) unsynchronised; a CUDA-only guard is enough unless the
    script also runs on MPS."""
    code = "\n".join(line.split("#", 1)[0] for line in ctx.lines).lower()

    def covering(n: ast.AST) -> bool:
        if not ctx.is_sync(n) or _distributed_only(ctx, n):
            return False
        guard = _backend_guard(ctx, n)
        if guard is None:
            return True
        if "mps" in guard and "cuda" not in guard:
            return False
        return not ("cuda" in guard and "mps" not in guard and "mps" in code)

    return ctx.search(region, covering) is not None


_DISTRIBUTED = ("ddp", "distributed", "world_size", "is_initialized", "multi_gpu", "n_gpu")


def _distributed_only(ctx: Context, node: ast.AST) -> bool:
    """A sync under ``if USE_PYTORCH_DDP:`` (or ``world_size > 1``, ...): a single-device
    run, the usual one, never waits (mlcommons/algorithmic-efficiency#430)."""
    cur = ctx.parents.get(node)
    while cur is not None and not isinstance(cur, ast.FunctionDef | ast.AsyncFunctionDef):
        if isinstance(cur, ast.If) and node in ast.walk(cur) and not any(
                node in ast.walk(s) for s in cur.orelse):
            src = ast.unparse(cur.test).lower()
            if any(w in src for w in _DISTRIBUTED):
                return True
        cur = ctx.parents.get(cur)
    return False


def _backend_guard(ctx: Context, node: ast.AST) -> str | None:
    """The source of the nearest enclosing ``if`` test that names a backend, or None."""
    cur = ctx.parents.get(node)
    while cur is not None and not isinstance(cur, ast.FunctionDef | ast.AsyncFunctionDef):
        if isinstance(cur, ast.If):
            src = ast.unparse(cur.test).lower()
            if any(w in src for w in ("mps", "cuda")):
                return src
        cur = ctx.parents.get(cur)
    return None


def _instances(ctx: Context) -> dict[str, ast.ClassDef]:
    """Names bound to an instance of a class defined in this file (``m = Net().cuda()``)."""
    out: dict[str, ast.ClassDef] = {}
    for name, values in ctx.assigns.items():
        for v in values:
            while isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and (
                    v.func.attr in ("to", "cuda", "eval", "train", "half", "float")):
                v = v.func.value
            if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and (
                    v.func.id in ctx.classes):
                out[name] = ctx.classes[v.func.id]
    return out


def _parts(ctx: Context) -> dict[str, list[ast.ClassDef]]:
    """Models built by a class from elsewhere out of modules defined here
    (``model = SegModel(decode_head=NMF2D()).cuda()``): calling ``model`` runs their
    ``forward``."""
    out: dict[str, list[ast.ClassDef]] = {}
    for name, values in ctx.assigns.items():
        for v in values:
            while isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and (
                    v.func.attr in ("to", "cuda", "eval", "train", "half", "float")):
                v = v.func.value
            if not (isinstance(v, ast.Call) and isinstance(v.func, ast.Name | ast.Attribute)) or (
                    isinstance(v.func, ast.Name) and v.func.id in ctx.classes):
                continue
            for a in [*v.args, *(k.value for k in v.keywords)]:
                while isinstance(a, ast.Starred | ast.ListComp | ast.List) and not (
                        isinstance(a, ast.List) and not a.elts):  # Sequential(*[Block() ...])
                    a = a.value if isinstance(a, ast.Starred) else (
                        a.elt if isinstance(a, ast.ListComp) else a.elts[0])
                if isinstance(a, ast.Call) and isinstance(a.func, ast.Name) and any(
                        last_name(b) in ("Module", "Layer") for b in getattr(
                            ctx.classes.get(a.func.id), "bases", [])):
                    out.setdefault(name, []).append(ctx.classes[a.func.id])
    return out


def _autograd_functions(ctx: Context) -> dict[str, ast.ClassDef]:
    """Custom ``torch.autograd.Function`` classes of this file whose ``.apply`` is called."""
    applied = {dotted(c.func.value) for c in ctx.calls() if isinstance(c.func, ast.Attribute)
               and c.func.attr == "apply"}
    return {name: cls for name, cls in ctx.classes.items() if name in applied and any(
        ctx.resolve(b) in ("torch.autograd.Function", "torch.autograd.function.Function")
        for b in cls.bases)}


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    return next((s for s in cls.body if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef)
                 and s.name == name), None)


def callees(ctx: Context, roots: list[ast.AST], depth: int = 3,
            ) -> list[tuple[ast.Call, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """(call, function) for the functions of this file that code under ``roots`` runs:
    ``f(x)``, ``self.f(x)`` / ``cls.f(x)``, a call of an instance of a class defined here
    (``model(x)`` runs its ``forward``/``__call__``) and its methods (``agent.act(x)``),
    followed ``depth`` calls deep; compiled functions are left out (their body is a graph)."""
    inst, parts, autograd = _instances(ctx), _parts(ctx), _autograd_functions(ctx)
    out: list[tuple[ast.Call, ast.FunctionDef | ast.AsyncFunctionDef]] = []
    seen: set[int] = set()
    frontier = [(r, None) for r in roots]
    for _ in range(depth):
        nxt = []
        for root, via in frontier:
            for n in walk([root]):
                if not isinstance(n, ast.Call):
                    continue
                fn = None
                f = n.func
                if isinstance(f, ast.Name):
                    fn = ctx.funcs.get(f.id) if f.id not in inst else (
                        _method(inst[f.id], "forward") or _method(inst[f.id], "__call__"))
                elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
                    if f.value.id in ("self", "cls"):
                        fn = ctx.funcs.get(f.attr) or _submodule_forward(ctx, f.attr)
                    elif f.value.id in inst:
                        fn = _method(inst[f.value.id], f.attr)
                    elif f.value.id in autograd and f.attr == "apply":
                        fn = _method(autograd[f.value.id], "forward")
                elif isinstance(f, ast.Attribute) and root_name(f.value) == "self":
                    fn = _unique_method(ctx, f.attr)  # self.corr_block.index_pyramid(x)
                if fn is None and isinstance(f, ast.Attribute) and isinstance(
                        f.value, ast.Name) and _is_parameter(ctx, n, f.value.id):
                    # model_ema.update(model): an object the function is given, whose method
                    # only one class of this file defines (issue 24, round 10)
                    fn = _unique_method(ctx, f.attr)
                if fn is None and last_name(n) == "backward" and not n.args:
                    # `loss.backward()` runs the backward of every custom autograd Function
                    # this file applies (torch.autograd.Function subclasses)
                    fns = [m for c in autograd.values() if (m := _method(c, "backward"))]
                else:
                    fns = [fn] if fn is not None else [
                        m for c in parts.get(f.id, []) or container_classes(ctx, n)
                        if (m := _method(c, "forward") or _method(c, "__call__")) is not None
                    ] if isinstance(f, ast.Name) else []
                for fn in fns:
                    if id(fn) in seen or fn.name in ctx.compiled or any(
                            ctx.compiler(d) for d in fn.decorator_list):
                        continue
                    seen.add(id(fn))
                    out.append((via or n, fn))
                    nxt += [(s, via or n) for s in fn.body]
        frontier = nxt
    return out


def _classes_built(ctx: Context, expr: ast.AST) -> list[ast.ClassDef]:
    """Classes of this file instantiated in ``expr`` (``[Block(d) for _ in range(n)]``,
    ``nn.ModuleList([...])``, ``nn.Sequential(*[...])``)."""
    return [ctx.classes[c.func.id] for c in ast.walk(expr) if isinstance(c, ast.Call)
            and isinstance(c.func, ast.Name) and c.func.id in ctx.classes]


def container_classes(ctx: Context, call: ast.Call) -> list[ast.ClassDef]:
    """``layer(x)`` where ``layer`` is the variable of an enclosing ``for layer in
    <container>:`` and the container (a name, or ``self.attr`` set in ``__init__``) holds
    instances of classes defined here: calling ``layer`` runs their ``forward`` (issue 24,
    round 9: a model's blocks run one by one from a loop)."""
    if not isinstance(call.func, ast.Name):
        return []
    name, cur = call.func.id, ctx.parents.get(call)
    while cur is not None:
        if isinstance(cur, ast.For) and name in {t.id for t in ast.walk(cur.target)
                                                 if isinstance(t, ast.Name)}:
            it = cur.iter
            while isinstance(it, ast.Call) and last_name(it) in (
                    "enumerate", "zip", "children", "modules", "values") and (
                    it.args or isinstance(it.func, ast.Attribute)):
                it = it.args[0] if it.args else it.func.value  # type: ignore[union-attr]
            if isinstance(it, ast.Name):
                return [c for v in ctx.assigns.get(it.id, []) for c in _classes_built(ctx, v)]
            if isinstance(it, ast.Attribute) and dotted(it.value) == "self":
                return [c for a in ast.walk(ctx.tree) if isinstance(a, ast.Assign) and any(
                    isinstance(t, ast.Attribute) and t.attr == it.attr for t in a.targets)
                    for c in _classes_built(ctx, a.value)]
            return []
        cur = ctx.parents.get(cur)
    return []


def _submodule_forward(ctx: Context, attr: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """``self.noise()`` where ``__init__`` set ``self.noise = Noise(...)``, a class of this
    file: calling the submodule runs its ``forward`` (or ``__call__``)."""
    for n in ast.walk(ctx.tree):
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and isinstance(
                n.value.func, ast.Name) and n.value.func.id in ctx.classes and any(
                isinstance(t, ast.Attribute) and t.attr == attr and dotted(t.value) == "self"
                for t in n.targets):
            cls = ctx.classes[n.value.func.id]
            return _method(cls, "forward") or _method(cls, "__call__")
    return None


def _is_parameter(ctx: Context, node: ast.AST, name: str) -> bool:
    """Whether ``name`` is a parameter of the function enclosing ``node`` (not ``self``)."""
    fn = ctx.enclosing(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    return fn is not None and name not in ("self", "cls") and name in {
        a.arg for a in fn.args.args + fn.args.kwonlyargs}  # type: ignore[union-attr]


def _unique_method(ctx: Context, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The method ``name`` when exactly one class of this file defines it (and it is not a
    dunder): what ``self.part.name(x)`` runs when ``part`` is a submodule built here."""
    if name.startswith("__"):
        return None
    defs = [m for c in ctx.classes.values() for m in c.body
            if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef) and m.name == name]
    return defs[0] if len(defs) == 1 else None


def param_constant(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef,
                   name: str) -> ast.Constant | None:
    """The constant every call of ``fn`` in this file passes for its parameter ``name``
    (by position or keyword; a method called on an instance skips ``self``), or the
    parameter's constant default when no call passes it; None when calls disagree, pass a
    non-constant, or there is no call (issue 24, round 14: ComfyUI-KJNodes#454's
    ``dynamic=dynamic``, given ``False`` by its caller)."""
    params = [a.arg for a in fn.args.args]
    if name not in params:
        return None
    defaults = dict(zip(params[len(params) - len(fn.args.defaults):], fn.args.defaults,
                        strict=False))
    seen: list[ast.expr] = []
    for c in ctx.calls():
        if last_name(c) != fn.name or c.func is fn:
            continue
        idx = params.index(name) - (1 if params[:1] in (["self"], ["cls"]) and isinstance(
            c.func, ast.Attribute) else 0)
        kw = next((k.value for k in c.keywords if k.arg == name), None)
        v = kw if kw is not None else c.args[idx] if 0 <= idx < len(c.args) else defaults.get(name)
        if v is None:
            return None
        seen.append(v)
    if not seen or not all(isinstance(v, ast.Constant) for v in seen) or len(
            {repr(v.value) for v in seen}) != 1:  # type: ignore[attr-defined]
        return None
    return seen[0]  # type: ignore[return-value]
