"""corpus_round19's held-out misses written generally (issue 24, round 21, step 0): analysis
gaps, under existing ids, all ``info`` and added late (``Context.add_late``: none takes an
older warning's place). Per-batch code is round 20's (``gap20_rules.per_batch``).

- a device tensor (an attribute of ``self``) indexed by a Python value looked up per item of
  a loop, the element then used in tensor arithmetic: a 0-d device read per item
  (``script.sync-in-step-loop``; mfbalin, dmlc/dgl#6886, 2024: keep a Python-list copy);
- ``int(p[...])`` / ``p[...].item()`` of an entry of a received container (a KV cache's
  position counters) in per-batch code: one host sync per layer per step
  (``script.sync-in-step-loop``; hao-ai-lab/FastVideo#1687, Robbyant/lingbot-world-v2#3);
- ``x.to(<dtype>).to(<device>)`` of a value the loop does not change, inside a loop: the
  same tensor cast and uploaded every step (``script.per-step-copy``; FastVideo#1687);
- ``<item>.cpu().numpy()`` of each item a ``for`` walks: one device-to-host copy per item
  (``script.sync-in-step-loop``; FastVideo#1687: copy the frames in one transfer);
- ``est.predict(...)``/``evaluate`` of a ``tf.estimator`` built in the same function (directly
  or by a file method returning one): the graph is rebuilt and the checkpoint reloaded per
  call (``script.graph-built-per-call``; IndicoDataSolutions/finetune#188, pointing to
  tensorflow/tensorflow#4648);
- ``torch.from_numpy(img).float()`` in a data set's per-item method where ``img`` comes from
  an image decoder (uint8): the worker hands over four times the bytes
  (``script.cast-before-copy``; nerfstudio-project/gsplat#1057: divide by 255 on the GPU);
- ``t[idx] = <number>`` with ``idx`` a received index tensor (``*ids``/``*idx``/``*index*``)
  or one made by ``.nonzero()``/``torch.*``, in per-batch code: a scalar upload and a stream
  sync each (``script.sync-in-step-loop``; isaac-sim/IsaacLab#7495: ``index_fill_``);
- ``tf.boolean_mask`` in a Keras layer's ``call``: a data-dependent output shape every step
  (``script.sync-in-step-loop``; NNPDF/nnpdf#1803);
- ``torch._dynamo.reset()`` in per-batch code: every compiled function is traced again
  (``script.jit-in-loop``; ray-project/ray#34640);
- a file function that copies to the device (``.to``/``.cuda``) called on each minibatch of an
  iterator that cycles over a received batch several times (its call names ``*iter*``/
  ``*epoch*``/``*cycl*``): the same data copied once per SGD pass (``script.per-step-copy``;
  ray-project/ray#36091);
- ``torch.all``/``torch.any``/``.all()``/``.any()`` in an ``if``/``while`` test of
  per-batch code: ``bool()`` of a device tensor (``script.sync-in-step-loop``;
  sgl-project/sglang-omni#1732, which also names the next form);
- ``t[i, j] = v`` into a tensor built with ``device=`` in the same function, in a Python loop
  whose variables index it: one kernel launch per element (``script.per-sample-python-loop``);
- a compiled ``opt.step()`` with a tensor lr while ``OneCycleLR``/``CyclicLR`` cycles the
  momentum (``cycle_momentum`` left on) and the optimizer's ``betas``/``momentum`` are floats:
  a new constant each step, a recompile (``script.recompile-shapes``, in
  ``gap19_rules._compiled_step_with_scheduler``; pytorch/pytorch#133898);
- ``x.cpu().permute(...).float()`` (view ops between the copy and the cast) in per-batch code
  (``script.cast-before-copy``; xdit-project/xDiT#790: quantize on the device first).

Sources: the threads above (https://github.com/<owner>/<repo>/issues/<n> or ``/pull/<n>``).
"""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import LOOPS, const, keyword, last_name, walk
from devicebench.script_check.context import Context
from devicebench.script_check.form_rules import dataset_item_methods
from devicebench.script_check.gap20_rules import _params, _received, per_batch

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_SYNC, _COPY = "script.sync-in-step-loop", "script.per-step-copy"
_FIX = ("keep a host copy of what Python needs (a CPU mirror, a Python int updated with the "
        "tensor) so the host does not wait for the GPU each step")
_VIEWS = {"permute", "transpose", "reshape", "view", "contiguous", "flatten", "squeeze",
          "unsqueeze", "flip", "detach"}
_WIDE = {"float", "double"}
_DECODERS = ("imread", "imdecode", "decode_image", "read_image", "undistort", "cvtColor",
             "Image.open", "resize")


def _loop_vars(ctx: Context, node: ast.AST) -> set[str]:
    out: set[str] = set()
    p = ctx.parents.get(node)
    while p is not None and not isinstance(p, _FUNCS):
        if isinstance(p, (ast.For, ast.AsyncFor)):
            out |= {n.id for n in ast.walk(p.target) if isinstance(n, ast.Name)}
        p = ctx.parents.get(p)
    return out


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _call_form(ctx: Context, c: ast.Call) -> None:
    fn = ctx.enclosing(c, _FUNCS)
    attr = getattr(c.func, "attr", "")
    if fn is None or fn.name == "__init__":
        return
    arg = c.func.value if attr == "item" and not c.args else c.args[0] if (
        isinstance(c.func, ast.Name) and c.func.id == "int" and len(c.args) == 1) else None
    if isinstance(arg, ast.Subscript) and _received(ctx, arg, fn) and per_batch(ctx, c):
        ctx.add_late(_SYNC, "info", c, f"`{ast.unparse(arg)[:40]}` read back to the host "
                     "(an entry of a received tensor container), in code run per step",
                     fixtext=_FIX)
    if attr == "to" and c.args and isinstance(c.func.value, ast.Call) and getattr(
            c.func.value.func, "attr", "") == "to" and c.func.value.args and ctx.resolve(
            c.func.value.args[0]).startswith("torch.") and ctx.enclosing(c, LOOPS) is not None \
            and not (_names(c.func.value.func.value) & _loop_vars(ctx, c)):
        ctx.add_late(_COPY, "info", c, "cast and copied to the device on every iteration, "
                     "though the loop does not change it", data=ast.unparse(
                         c.func.value.func.value)[:40], fix="cast and move it once, where it "
                     "changes (memoize the device copy)")
    inner = c.func.value if isinstance(c.func, ast.Attribute) else None
    if attr in ("numpy", "tolist") and isinstance(inner, ast.Call) and getattr(
            inner.func, "attr", "") == "cpu" and isinstance(inner.func.value, ast.Name) and (
            inner.func.value.id in _loop_vars(ctx, c)):
        ctx.add_late(_SYNC, "info", c, "one device-to-host copy per item of the loop",
                     fixtext="stack the items and copy them to the host in one transfer")
    if ctx.resolve(c.func) == "torch._dynamo.reset" and per_batch(ctx, c):
        ctx.add_late("script.jit-in-loop", "info", c, "`torch._dynamo.reset()` drops every "
                     "compiled graph in code run per iteration", how="`torch._dynamo.reset()`",
                     ctor="torch.compile", reason="every compiled function is traced and "
                     "compiled again after a reset")
    if attr in _WIDE and _view_chain_after_cpu(c) and per_batch(ctx, c):
        ctx.add_late("script.cast-before-copy", "info", c, "cast after the device-to-host "
                     "copy (view ops in between): the copy moves the device dtype and the "
                     "conversion runs on the CPU", form=ast.unparse(c)[:40],
                     fix="convert on the device (to the final, narrower dtype) before `.cpu()`")


def _view_chain_after_cpu(c: ast.Call) -> bool:
    node, views = c.func.value, 0
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr == "cpu":
            return views > 0
        if node.func.attr not in _VIEWS:
            return False
        views, node = views + 1, node.func.value
    return False


def _torch_made(ctx: Context, fn: ast.AST, name: str) -> bool:
    return any(isinstance(s, ast.Assign) and any(last_name(t) == name for t in s.targets)
               and isinstance(s.value, ast.Call) and any(
                   isinstance(k, ast.Call) and (last_name(k) == "nonzero" or ctx.resolve(
                       k.func).startswith("torch.")) for k in ast.walk(s.value))
               for s in walk(fn.body))


def _assign_form(ctx: Context, a: ast.Assign) -> None:
    fn, t = ctx.enclosing(a, _FUNCS), a.targets[0]
    if fn is None or fn.name == "__init__":
        return
    if isinstance(t, ast.Name):
        _indexed_by_python_id(ctx, fn, a, t.id)
    if not isinstance(t, ast.Subscript):
        return
    idx = t.slice
    if isinstance(a.value, ast.Constant) and isinstance(a.value.value, (int, float)) and (
            isinstance(idx, ast.Name) and (idx.id in _params(fn) and any(
                k in idx.id for k in ("ids", "idx", "index")) or _torch_made(ctx, fn, idx.id))
            ) and per_batch(ctx, a):
        ctx.add_late(_SYNC, "info", a, f"a Python scalar assigned through the index tensor "
                     f"`{idx.id}`: a host upload and a stream sync each time", fixtext="use "
                     "`t.index_fill_(0, idx, v)` (or a masked `torch.where`), which stays on "
                     "the device")
    loop = ctx.enclosing(a, LOOPS)
    before = [v for v in _assigned(fn, t.value.id) if v.lineno < loop.lineno] if (
        loop is not None and isinstance(t.value, ast.Name)) else []
    last = max(before, key=lambda v: v.lineno) if before else None  # what the loop writes into
    if _names(idx) & _loop_vars(ctx, a) and isinstance(last, ast.Call) and ctx.resolve(
            last.func).startswith("torch.") and keyword(last, "device") is not None and (
            not _loop_reported(ctx, a)) and per_batch(ctx, fn.body[0]):  # the function
        ctx.add_late("script.per-sample-python-loop", "info", a, "a device tensor written "
                     "element by element in a Python loop: one kernel launch per element",
                     what=ctx.code(a.lineno), fix="build the values on the host and copy them "
                     "once, or scatter them in one call (`t.index_put_`/`scatter_`)")


def _loop_reported(ctx: Context, node: ast.AST) -> bool:
    """An older rule already reports a loop around ``node`` as a per-sample loop."""
    fid = "script.per-sample-python-loop"
    lines = {p.lineno for p in ast.walk(ctx.enclosing(node, _FUNCS) or ctx.tree)
             if isinstance(p, LOOPS) and node in ast.walk(p)}
    return any((fid, n) in ctx.found for n in lines) or any(
        args[0] == fid and getattr(args[2], "lineno", 0) in lines for args, _ in ctx.late)


def _assigned(fn: ast.AST, name: str) -> list[ast.expr]:
    return [s.value for s in walk(fn.body) if isinstance(s, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == name for t in s.targets)]


def _indexed_by_python_id(ctx: Context, fn: ast.AST, a: ast.Assign, name: str) -> None:
    """``x = self.T[self.ids[k]]`` per item ``k`` of a loop, ``x`` then in tensor arithmetic
    with a slice of a received tensor (``row[mask] - x``)."""
    v = a.value
    if not (isinstance(v, ast.Subscript) and isinstance(v.value, ast.Attribute)
            and isinstance(v.value.value, ast.Name) and v.value.value.id == "self"
            and isinstance(v.slice, ast.Subscript)):
        return
    loop = ctx.enclosing(a, LOOPS)
    varying = _loop_vars(ctx, a) | {t.id for s in walk(getattr(loop, "body", []))
                                    if isinstance(s, ast.Assign) for x in s.targets
                                    for t in ast.walk(x) if isinstance(t, ast.Name)}
    if not _names(v.slice.slice) & varying:
        return
    used = loop is not None and any(
        isinstance(b, ast.BinOp) and any(isinstance(x, ast.Name) and x.id == name
                                         for x in (b.left, b.right))
        and any(isinstance(x, ast.Subscript) and _received(ctx, x, fn) for x in (b.left, b.right))
        for b in walk(loop.body))
    if used:
        ctx.add_late(_SYNC, "info", a, f"`{ast.unparse(v)[:40]}`: an element of a device "
                     "tensor read with a Python index per item of the loop, then used as a "
                     "scalar", fixtext="keep a Python-list copy of the tensor for element reads "
                     "(`t.tolist()` once)")


def _reduction_test(ctx: Context, n: ast.If | ast.While) -> None:
    for c in ast.walk(n.test):
        if isinstance(c, ast.Call) and (ctx.resolve(c.func) in ("torch.all", "torch.any") or (
                isinstance(c.func, ast.Attribute) and c.func.attr in ("all", "any")
                and not c.args and isinstance(c.func.value, ast.Compare))) and per_batch(ctx, n):
            kw = "if" if isinstance(n, ast.If) else "while"
            ctx.add_late(_SYNC, "info", n, f"`{ast.unparse(c)[:40]}` in a Python `{kw}`: "
                         "`bool()` of a device tensor waits for the GPU, per batch",
                         fixtext="test a CPU mirror the batch "
                         "already carries, or keep the branch on the device (`torch.where`)")
            return


def _copying_funcs(ctx: Context) -> set[str]:
    return {name for name, f in ctx.funcs.items() if any(
        isinstance(c, ast.Call) and getattr(c.func, "attr", "") in ("to", "cuda")
        for c in walk(f.body))}


def _cycled_copies(ctx: Context) -> None:
    copying = _copying_funcs(ctx)
    for lp in ast.walk(ctx.tree):
        fn = ctx.enclosing(lp, _FUNCS) if isinstance(lp, ast.For) else None
        it = getattr(lp, "iter", None)
        if fn is None or not isinstance(it, ast.Call) or not isinstance(lp.target, ast.Name):
            continue
        args = list(it.args) + [k.value for k in it.keywords]
        repeats = any(w in ast.unparse(x).lower() + last_name(it).lower()
                      for x in args for w in ("iter", "epoch", "cycl"))
        if not (repeats and any(isinstance(x, ast.Name) and x.id in _params(fn) for x in args)):
            continue
        for c in walk(lp.body):
            if (isinstance(c, ast.Call) and last_name(c) in copying and any(
                    isinstance(x, ast.Name) and x.id == lp.target.id for x in c.args)):
                ctx.add_late(_COPY, "info", c, f"`{last_name(c)}` converts and copies each "
                             "minibatch to the device inside a loop that cycles over the same "
                             "batch several times", data=lp.target.id,
                             fix="convert the whole batch onto the device once, before the "
                                 "minibatch loop, and slice minibatches from it")


def _float_in_dataset(ctx: Context) -> None:
    for m in dataset_item_methods(ctx):
        decoded = {last_name(t) for s in walk(m.body) if isinstance(s, ast.Assign)
                   for t in s.targets if any(
                       isinstance(k, ast.Call) and any(d in ctx.resolve(k.func) for d in _DECODERS)
                       for k in ast.walk(s.value))}
        for c in ctx.calls(m.body):
            inner = c.func.value if isinstance(c.func, ast.Attribute) else None
            if (getattr(c.func, "attr", "") in _WIDE and isinstance(inner, ast.Call)
                    and ctx.resolve(inner.func) in ("torch.from_numpy", "torch.as_tensor",
                                                    "torch.tensor")
                    and inner.args and isinstance(inner.args[0], ast.Name)
                    and inner.args[0].id in decoded):
                ctx.add_late("script.cast-before-copy", "info", c, "a decoded (uint8) image "
                             "made float in the data set: the worker, the pinned copy and the "
                             "device copy move four times the bytes", form=ast.unparse(c)[:40],
                             fix="return the uint8 tensor; `.to(device, non_blocking=True)"
                                 ".float() / 255` in the step")


def _estimator_per_call(ctx: Context) -> None:
    builders = {name for name, f in ctx.funcs.items() if any(
        isinstance(r, ast.Return) and isinstance(r.value, ast.Call)
        and ctx.resolve(r.value.func).startswith("tensorflow.estimator.") for r in walk(f.body))}
    for fn in ctx.funcs.values():
        if fn.name == "__init__":
            continue
        ests = {last_name(t) for s in walk(fn.body) if isinstance(s, ast.Assign)
                and isinstance(s.value, ast.Call) and (
                    ctx.resolve(s.value.func).startswith("tensorflow.estimator.")
                    or last_name(s.value) in builders) for t in s.targets}
        for c in ctx.calls(fn.body):
            if (isinstance(c.func, ast.Attribute) and c.func.attr in ("predict", "evaluate")
                    and isinstance(c.func.value, ast.Name) and c.func.value.id in ests):
                ctx.add_late("script.graph-built-per-call", "info", c, "a `tf.estimator` "
                             f"built in `{fn.name}` and asked to `{c.func.attr}`: the graph is "
                             "rebuilt and the checkpoint reloaded on every call",
                             where=f"`{fn.name}`", fix="build the estimator once and keep one "
                             "`predict` generator open, fed from a queue (tensorflow#4648)")


def _boolean_mask_in_layer(ctx: Context) -> None:
    for cls in ctx.classes.values():
        if not any(last_name(b) in ("Layer", "Model") for b in cls.bases):
            continue
        for m in cls.body:
            if isinstance(m, _FUNCS) and m.name == "call":
                for c in ctx.calls(m.body):
                    if ctx.resolve(c.func) == "tensorflow.boolean_mask":
                        ctx.add_late(_SYNC, "info", c, "`tf.boolean_mask` in a layer's "
                                     "`call`: its output shape depends on the mask's values, "
                                     "every step", fixtext="multiply by the mask (or "
                                     "`tf.where`) so shapes stay static; precompute gather "
                                     "indices once if the mask is constant")


def cycles_momentum(ctx: Context, sched: ast.Call, opt: str) -> bool:
    """``OneCycleLR``/``CyclicLR`` with ``cycle_momentum`` on, over an optimizer whose
    ``betas``/``momentum`` are Python floats (not tensors)."""
    if last_name(sched) not in ("OneCycleLR", "CyclicLR") or const(
            keyword(sched, "cycle_momentum")) is False:
        return False
    for v in ctx.assigns.get(opt, []):
        hp = (keyword(v, "betas") or keyword(v, "momentum")) if isinstance(v, ast.Call) else None
        if hp is not None and any(isinstance(c, ast.Call) and ctx.resolve(c.func) in (
                "torch.tensor", "torch.as_tensor") for c in ast.walk(hp)):
            return False
    return True
