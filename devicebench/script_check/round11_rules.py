"""Pitfall forms first seen in corpus_round11's dev half (issue 24, round 12), each written
as the general form its thread names:

- a NumPy array copied into a new tensor by a copying constructor (``torch.Tensor(a)``,
  ``torch.tensor(a)``) and then copied again to the device, on every step; ``as_tensor``
  shares the array's memory (vwxyzjn/cleanrl#552: ~2x steps per second);
- a copy helper whose ``non_blocking`` parameter defaults to False, called per step
  without it: every host-to-device copy is synchronous (EvolvingLMMs-Lab/lmms-engine#181);
- ``model.fit`` given the whole data set as one sample (``x[np.newaxis]``) for many epochs:
  each epoch is one step, and fit's per-epoch setup is the cost (tensorflow#40754);
- a batch generator that builds each batch with ``jnp.array`` on the host thread, a
  blocking transfer before the step (huggingface/transformers#13307).

Under existing ids, read by helpers the older rules call: Lightning's default
``accelerator="auto"`` (Lightning >= 2.0) and a Trainer built from a Hydra config count as
training on the GPU, and ``**self.kwargs`` given to a DataLoader is read through the dict
the class assigns (:func:`loader_kwargs`); a chained ``jax.random.split`` in an epoch loop
whose inner loop runs the compiled step is once per epoch, not a per-step dispatch chain
(``loop_rules.jax_dispatch_chain``).
"""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import LOOPS, const, keyword, last_name, walk
from devicebench.script_check.context import Context, rule
from devicebench.script_check.kinds import repeat_site

_COPYING = ("torch.Tensor", "torch.tensor", "torch.FloatTensor", "torch.LongTensor",
            "torch.DoubleTensor")
_LITERALS = (ast.List, ast.Tuple, ast.ListComp, ast.Constant, ast.Dict)


def _names_device(call: ast.Call) -> bool:
    """``.cuda()``, or ``.to(...)`` given something that reads as a device."""
    if last_name(call) == "cuda":
        return True
    args = [*call.args, *(k.value for k in call.keywords if k.arg == "device")]
    return any(w in ast.unparse(a).lower() for a in args for w in ("device", "cuda", "mps"))


def copying_constructor_copies(ctx: Context) -> None:
    """``script.per-step-copy`` for ``torch.Tensor(a).to(device)`` on every iteration."""
    if not ctx.uses("torch"):
        return
    for call in ctx.calls():
        inner = call.func.value if isinstance(call.func, ast.Attribute) else None
        if not (isinstance(inner, ast.Call) and last_name(call) in ("to", "cuda")
                and ctx.resolve(inner.func) in _COPYING and inner.args):
            continue
        if isinstance(inner.args[0], _LITERALS) or keyword(inner, "device") is not None:
            continue  # a Python literal has no memory to share; made on the device already
        if not _names_device(call) or repeat_site(ctx, call) is None:
            continue
        data = ast.unparse(inner.args[0])[:40]
        ctx.add("script.per-step-copy", "info", call,
                f"`{ast.unparse(inner.func)}` copies `{data}` into a new CPU tensor, then "
                "`.to` copies it again to the device, on every iteration",
                why=f"`{ast.unparse(inner.func)}(...)` always copies its input; for a NumPy "
                    "array `torch.as_tensor` (or `torch.from_numpy`) shares its memory, so the "
                    "only copy left is the one to the device (vwxyzjn/cleanrl#552: ~2x steps "
                    "per second on an L40s)",
                fix=f"`torch.as_tensor({data}, device=device)` (or "
                    f"`torch.from_numpy({data}).to(device, non_blocking=True)`)",
                data=data)


def _default_false_params(fn: ast.FunctionDef) -> dict[str, int]:
    """Parameters of ``fn`` that default to ``False`` -> their position."""
    args = fn.args.posonlyargs + fn.args.args
    defaults = dict(zip([a.arg for a in args][-len(fn.args.defaults):] if fn.args.defaults
                        else [], fn.args.defaults, strict=False))
    defaults.update({a.arg: d for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults,
                                              strict=False) if d is not None})
    positions = {a.arg: i for i, a in enumerate(args)}
    return {name: positions.get(name, 10 ** 6) for name, d in defaults.items()
            if isinstance(d, ast.Constant) and d.value is False}


def non_blocking_default_false(ctx: Context) -> None:
    """``script.blocking-h2d-copy`` for a copy helper whose ``non_blocking`` parameter
    defaults to False and that every caller calls per step without it."""
    if not ctx.uses("torch"):
        return
    for fn in ctx.funcs.values():
        if not isinstance(fn, ast.FunctionDef):
            continue
        params = _default_false_params(fn)
        copies = [(c, keyword(c, "non_blocking")) for c in walk(fn.body)
                  if isinstance(c, ast.Call) and last_name(c) in ("to", "cuda")]
        copies = [(c, v.id) for c, v in copies if isinstance(v, ast.Name) and v.id in params]
        if not copies:
            continue
        copy, param = copies[0]
        callers = [c for c in ctx.calls() if isinstance(c.func, ast.Name) and c.func.id == fn.name]
        if not callers or any(keyword(c, param) is not None or len(c.args) > params[param]
                              or any(k.arg is None for k in c.keywords) for c in callers):
            continue  # a caller sets it (or may, through **kwargs)
        site = next((repeat_site(ctx, c) for c in callers if repeat_site(ctx, c)), None)
        if site is None:
            continue
        ctx.add("script.blocking-h2d-copy", "info", copy,
                f"`{fn.name}(...)` is called on every iteration of the loop at "
                f"{ctx.line(site[0].lineno)} without `{param}=`, which defaults to False",
                why="`.to(device, non_blocking=False)` is a synchronous copy: the host waits "
                    "for it before queueing the step's kernels, and with pinned batches it "
                    "could have overlapped them (EvolvingLMMs-Lab/lmms-engine#181)",
                fix=f"default `{param}=True` in `{fn.name}` (with pinned batches: "
                    "`DataLoader(..., pin_memory=True)`)", loader="")


def loader_kwargs(ctx: Context, call: ast.Call) -> set[str] | None:
    """The keyword names a DataLoader call is given, reading ``**self.kw`` through the dict
    its class assigns to ``self.kw``; None when a ``**`` value cannot be read."""
    names = {k.arg for k in call.keywords if k.arg}
    cls = ctx.enclosing(call, (ast.ClassDef,))
    for k in call.keywords:
        if k.arg is not None:
            continue
        value = k.value
        if not (isinstance(value, ast.Attribute) and isinstance(cls, ast.ClassDef)):
            return None
        assigned = [a.value for a in ast.walk(cls) if isinstance(a, ast.Assign) and any(
            isinstance(t, ast.Attribute) and t.attr == value.attr for t in a.targets)]
        if len(assigned) != 1:
            return None
        v = assigned[0]
        if isinstance(v, ast.Call) and last_name(v) == "dict" and not v.args and all(
                kw.arg for kw in v.keywords):
            names |= {kw.arg for kw in v.keywords if kw.arg}
        elif isinstance(v, ast.Dict) and all(isinstance(key, ast.Constant) for key in v.keys):
            names |= {str(key.value) for key in v.keys if isinstance(key, ast.Constant)}
        else:
            return None
    return names


def _one_sample(ctx: Context, node: ast.AST) -> bool:
    """``x[np.newaxis]`` / ``x[None]`` / ``np.expand_dims(x, 0)`` / ``x.reshape(1, ...)``."""
    if isinstance(node, ast.Subscript):
        first = node.slice.elts[0] if isinstance(node.slice, ast.Tuple) else node.slice
        return isinstance(first, ast.Constant) and first.value is None or (
            ast.unparse(first).endswith("newaxis"))
    if isinstance(node, ast.Call) and last_name(node) == "expand_dims":
        axis = keyword(node, "axis") or (node.args[1] if len(node.args) > 1 else None)
        return const(axis) == 0
    if isinstance(node, ast.Call) and last_name(node) == "reshape" and node.args:
        first = node.args[0].elts[0] if isinstance(node.args[0], ast.Tuple) and (
            node.args[0].elts) else node.args[0]
        return const(first) == 1 and isinstance(node.func, ast.Attribute)
    return False


@rule("script.keras-epoch-overhead",
      "`fit` on one sample per epoch: every epoch is a single step",
      "the whole data set is given as one sample ({x}), so each of the {epochs} epochs is one "
      "step, and fit's per-epoch work (building the data adapter and iterator, callbacks, "
      "logs) is paid once per step -- it dominates, and `batch_size` does nothing "
      "(tensorflow/tensorflow#40754: 3 ms of training per epoch behind minutes of setup)",
      "cut the sequence into many windows (`tf.keras.utils.timeseries_dataset_from_array`) "
      "so an epoch has many batches, or run the steps in your own loop calling a compiled "
      "`train_on_batch`/`train_step`")
def keras_epoch_overhead(ctx: Context) -> None:
    if not (ctx.uses("tensorflow") or ctx.uses("keras")):
        return
    for call in ctx.calls():
        if last_name(call) != "fit" or not isinstance(call.func, ast.Attribute):
            continue
        x = call.args[0] if call.args else keyword(call, "x")
        epochs = const(keyword(call, "epochs"))
        if x is None or not _one_sample(ctx, x) or not (isinstance(epochs, int) and epochs > 1):
            continue
        ctx.add("script.keras-epoch-overhead", "info", call,
                f"`{ast.unparse(x)[:40]}` adds a batch axis of one", x=ast.unparse(x)[:40],
                epochs=str(epochs))


_JNP_BUILDERS = ("jax.numpy.array", "jax.numpy.asarray", "jax.device_put")


def _iterated(ctx: Context, name: str) -> bool:
    for loop in ast.walk(ctx.tree):
        it = getattr(loop, "iter", None) if isinstance(loop, ast.For) else None
        while isinstance(it, ast.Call) and last_name(it) in ("enumerate", "tqdm", "zip") and (
                it.args):
            it = it.args[0]
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == name:
            return True
    return False


@rule("script.jnp-in-data-loader",
      "the batch generator builds device arrays with `{api}`",
      "`{api}` in the loader copies each batch to the default device synchronously, on the "
      "Python thread that then dispatches the step; a jitted/pmapped step takes NumPy "
      "batches and transfers them itself, and `shard()`/`pmap` split a NumPy batch without "
      "first gathering it on one device (huggingface/transformers#13307: the Flax examples "
      "return NumPy to keep dispatch asynchronous)",
      "build NumPy batches (`np.array(v)`) in the generator; for overlap, prefetch to the "
      "devices a few batches ahead (`flax.jax_utils.prefetch_to_device`)")
def jnp_in_data_loader(ctx: Context) -> None:
    if not ctx.uses("jax"):
        return
    for fn in ctx.funcs.values():
        nodes = list(walk(fn.body))
        if not any(isinstance(n, ast.Yield | ast.YieldFrom) for n in nodes):
            continue
        if not _iterated(ctx, fn.name):
            continue
        for n in nodes:
            if isinstance(n, ast.Call) and ctx.resolve(n.func) in _JNP_BUILDERS and (
                    ctx.enclosing(n, LOOPS) is not None):
                ctx.add("script.jnp-in-data-loader", "info", n,
                        f"in the generator `{fn.name}`, once per batch",
                        api=ast.unparse(n.func))
                break
