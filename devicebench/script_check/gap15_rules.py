"""corpus_round13's held-out misses written generally (issue 24, round 15, step 0).

Analysis gaps first:

- a method a training loop calls per step on an object of a class the file defines but
  builds elsewhere (``model = create_model(opt)``; ``model.get_current_losses()``), found by
  its name when one class of the file defines it, followed to a bounded depth;
- an attribute read through ``getattr(self, "loss_" + name)`` counts as the attribute it
  names: ``float()`` of it in that method is a host sync per loss per step
  (``script.sync-in-step-loop``; pnsuau, jolibrain/joliGEN#374, 2023: the loop's time
  halved once the losses were read only when printed).

- a batch copied with a blocking ``.to(self.device)`` where the file never names the device
  (``self.device`` set by the caller), in the step loop or in a function the loop gives the
  batch to, followed ``_DEPTH`` calls deep through the parameters it is passed as
  (``script.blocking-h2d-copy``, and ``script.dataloader-no-pin-memory`` at the file's
  loaders that do not pin: NaleRaphael, davidtvs/pytorch-lr-finder#31, 2020; anwai98,
  constantinpape/torch-em#356, 2024).

Then two kinds no rule knew, in the methods a loader calls per item (``__getitem__``), both
``info`` (the cost depends on sizes the file does not show):

- ``script.tensor-per-item``: ``torch.tensor(self.x[index])`` -- a new tensor copied from a
  slice of an in-memory array for every item of every epoch, where converting the array once
  and indexing the tensor is enough (SteadfastAsArt, zjuwss/gnnwr#22, 2026, ~25x over 10k
  fetches);
- ``script.pil-convert-per-item``: ``Image.fromarray(...)`` of an item of an in-memory array
  per item, though the array never changes (bkj, pytorch/vision#407, 2018: 25% faster MNIST
  training by converting once).
"""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import (
    LOOPS,
    keyword,
    last_name,
    skip_in_step,
    target_names,
    walk,
)
from devicebench.script_check.context import Context, rule
from devicebench.script_check.dataflow import callees
from devicebench.script_check.form_rules import dataset_item_methods
from devicebench.script_check.forms import run_forms
from devicebench.script_check.round15_rules import _unconditional, round15_forms
from devicebench.script_check.torch_rules import _accelerator, _loader_calls, _pinned

_TENSOR_MAKERS = ("torch.tensor", "torch.Tensor", "torch.FloatTensor", "torch.LongTensor")
_STEP_CALLS = ("backward", "optimize_parameters", "train_step", "training_step", "step")
_DEPTH = 3  # calls followed below a loop, at most


def _self_item(node: ast.AST) -> bool:
    """``self.x[i]`` (or ``self.x[i, j]``): an item of an array the object holds."""
    return (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute)
            and isinstance(node.value.value, ast.Name) and node.value.value.id == "self")


def _item_names(method: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Locals of ``method`` bound to an item of an array the object holds
    (``img, target = self.data[index], int(self.targets[index])`` binds ``img``)."""
    out: set[str] = set()
    for n in walk(method.body):
        if not isinstance(n, ast.Assign):
            continue
        for t in n.targets:
            if isinstance(t, ast.Name) and _self_item(n.value):
                out.add(t.id)
            elif isinstance(t, ast.Tuple) and isinstance(n.value, ast.Tuple):
                out |= {a.id for a, v in zip(t.elts, n.value.elts, strict=False)
                        if isinstance(a, ast.Name) and _self_item(v)}
    return out


def _from_item(node: ast.AST, names: set[str]) -> bool:
    """``node`` is an item of a held array, or that item through methods (``img.numpy()``)."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not node.args:
        node = node.func.value
    return _self_item(node) or isinstance(node, ast.Name) and node.id in names


@rule("script.tensor-per-item",
      "a new tensor copied from an in-memory array in every `__getitem__`",
      "`{cls}.__getitem__` converts a slice of an array the data set already holds with "
      "`torch.tensor(...)`: a new tensor and a copy per field per item, every epoch "
      "(zjuwss/gnnwr#22: ~25x slower over 10k fetches than indexing tensors made once)",
      "convert the arrays once in `__init__` (`self.x = torch.as_tensor(x, dtype="
      "torch.float32)`) and index the tensors in `__getitem__`")
def tensor_per_item(ctx: Context) -> None:
    run_forms(ctx)  # the forms of rounds 16-25, in their order (forms.py)
    if not ctx.uses("torch"):
        return
    for method in dataset_item_methods(ctx):
        names = _item_names(method)
        cls = ctx.parents.get(method)
        for n in walk(method.body):
            if (isinstance(n, ast.Call) and ctx.resolve(n.func) in _TENSOR_MAKERS and n.args
                    and _from_item(n.args[0], names)):
                ctx.add("script.tensor-per-item", "info", n,
                        f"`{ast.unparse(n)[:60]}` per item",
                        cls=getattr(cls, "name", "the data set"))
    _pil_per_item(ctx)
    _getattr_syncs(ctx)
    _copies_to_a_named_device(ctx)
    round15_forms(ctx)  # round 15's dev forms (round15_rules.py)


@rule("script.pil-convert-per-item",
      "a NumPy array converted to a PIL image in every `__getitem__`",
      "`{cls}.__getitem__` builds a `PIL.Image` from an item of an array the data set holds "
      "in memory, each time the item is read, every epoch, though the array never changes "
      "(pytorch/vision#407: 25% faster MNIST training by converting once)",
      "convert the images once (in `__init__`, or store them as tensors and use tensor "
      "transforms), and only index them in `__getitem__`")
def _pil_rule(ctx: Context) -> None:
    return None  # run by tensor_per_item (one pass over the item methods)


def _pil_per_item(ctx: Context) -> None:
    for method in dataset_item_methods(ctx):
        names = _item_names(method)
        cls = ctx.parents.get(method)
        for n in walk(method.body):
            if (isinstance(n, ast.Call) and ctx.resolve(n.func).endswith("Image.fromarray")
                    and n.args and _from_item(n.args[0], names)):
                ctx.add("script.pil-convert-per-item", "info", n,
                        f"`{ast.unparse(n)[:60]}` per item",
                        cls=getattr(cls, "name", "the data set"))


def _step_loops(ctx: Context) -> list[ast.For | ast.While]:
    """Loops whose body runs a training step (``backward``, ``optimize_parameters``, ...)."""
    return [n for n in ast.walk(ctx.tree) if isinstance(n, ast.For | ast.While) and any(
        isinstance(c, ast.Call) and last_name(c) in _STEP_CALLS for c in walk(n.body))]


def _unique_methods(ctx: Context, roots: list[ast.AST]) -> list[ast.FunctionDef]:
    """Methods ``obj.m()`` under ``roots`` runs when one class of the file defines ``m``,
    followed ``_DEPTH`` calls deep (with the file's other callees)."""
    by_name: dict[str, list[ast.FunctionDef]] = {}
    for c in ctx.classes.values():
        for m in c.body:
            if isinstance(m, ast.FunctionDef) and not m.name.startswith("__"):
                by_name.setdefault(m.name, []).append(m)
    out: list[ast.FunctionDef] = []
    frontier = roots
    for _ in range(_DEPTH):
        nxt: list[ast.AST] = []
        for n in walk(frontier):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
                defs = by_name.get(n.func.attr, [])
                if len(defs) == 1 and defs[0] not in out:
                    out.append(defs[0])
                    nxt += defs[0].body
        nxt += [s for _, fn in callees(ctx, list(frontier), depth=1) for s in fn.body]
        frontier = nxt
    return out


def _loss_attr(node: ast.AST) -> bool:
    """``getattr(self, "loss_" + name)`` / ``self.loss_g``: a loss the object holds."""
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "getattr" and len(node.args) >= 2
            and isinstance(node.args[0], ast.Name) and node.args[0].id == "self"):
        return "loss" in ast.unparse(node.args[1]).lower()
    return (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            and node.value.id == "self" and "loss" in node.attr.lower())


def _getattr_syncs(ctx: Context) -> None:
    """``float(getattr(self, "loss_" + n))`` / ``getattr(...).item()`` in a method every
    step of a training loop calls (neither the call nor the read under an ``if``)."""
    if not ctx.uses("torch"):
        return
    seen: set[int] = set()
    loops = _step_loops(ctx)
    for loop in loops:
        if any(o is not loop and o in loops for o in walk(loop.body)):
            continue  # an outer loop: its inner step loop is the one that repeats
        direct: list[ast.AST] = [c for c in walk(loop.body) if isinstance(c, ast.Call)
                                 and _unconditional(ctx, c, loop)]
        for fn in _unique_methods(ctx, direct):
            for n in walk(fn.body):
                if not isinstance(n, ast.Call) or id(n) in seen or not _unconditional(
                        ctx, n, fn):
                    continue
                arg = (n.args[0] if isinstance(n.func, ast.Name) and n.func.id == "float"
                       and len(n.args) == 1 else n.func.value
                       if isinstance(n.func, ast.Attribute) and n.func.attr == "item"
                       and not n.args else None)
                if arg is not None and _loss_attr(arg):
                    seen.add(id(n))
                    ctx.add("script.sync-in-step-loop", "warning", n,
                            f"`{fn.name}()` runs on every step of the training loop at "
                            f"{ctx.line(loop.lineno)}; `{ast.unparse(n)[:50]}` copies a "
                            "loss from the device, one sync per loss per step",
                            fixtext="keep the losses as tensors and convert them only on the "
                                    "steps that print or log them")


def _device_named(node: ast.AST) -> bool:
    """``self.device`` / ``device`` / ``args.device``: a device the file does not spell out."""
    return (isinstance(node, ast.Name) and "device" in node.id.lower()
            or isinstance(node, ast.Attribute) and "device" in node.attr.lower())


def _root(node: ast.AST) -> str:
    """The name under ``batch["img"]`` / ``batch.x`` / ``x`` (round 15: round14_dev's
    ultralytics_21912 copies the parts of a batch dict its caller passes)."""
    while isinstance(node, ast.Subscript | ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else ""


def _batch_copies(ctx: Context, loop: ast.AST) -> list[ast.Call]:
    """Blocking ``x.to(<device>)`` of the loop's batch (its target, ``next(...)`` of an
    iterator), in the loop and in the functions it hands the batch to, ``_DEPTH`` deep."""
    names = set(target_names(loop.target)) if isinstance(loop, ast.For) else set()
    bodies: list[tuple[list[ast.AST], set[str]]] = [(list(loop.body), names)]
    out: list[ast.Call] = []
    for _ in range(_DEPTH):
        nxt: list[tuple[list[ast.AST], set[str]]] = []
        for body, held in bodies:
            held = held | {t for n in walk(body) if isinstance(n, ast.Assign) and isinstance(
                n.value, ast.Call) and last_name(n.value) == "next" for x in n.targets
                for t in target_names(x)}
            held |= {t for n in walk(body) if isinstance(n, ast.Assign) and isinstance(
                n.value, ast.Call) and any(isinstance(a, ast.Name) and a.id in held
                                           for a in n.value.args) for x in n.targets
                     for t in target_names(x) if last_name(n.value) != "to"}
            out += [n for n in walk(body) if isinstance(n, ast.Call) and isinstance(
                n.func, ast.Attribute) and n.func.attr == "to" and n.args and _device_named(
                n.args[0]) and keyword(n, "non_blocking") is None
                    and _root(n.func.value) in held]
            for call, fn in callees(ctx, body, depth=1):
                params = [a.arg for a in fn.args.args if a.arg not in ("self", "cls")]
                given = {p for p, v in zip(params, call.args, strict=False)
                         if isinstance(v, ast.Name) and v.id in held}
                nxt.append((list(fn.body), given))
        bodies = nxt
    return out


def _runs_a_step(ctx: Context, loop: ast.AST) -> bool:
    """The loop runs an optimisation step, in its body or in what it calls (``_DEPTH``
    deep, methods called on ``self`` included)."""
    bodies = [list(loop.body)] + [list(fn.body) for _, fn in callees(ctx, list(loop.body),
                                                                     depth=_DEPTH)]
    return any(ctx.is_step(n) for b in bodies for n in walk(b, skip_in_step))


def _copies_to_a_named_device(ctx: Context) -> None:
    if not ctx.uses("torch") or _accelerator(ctx) or any(
            isinstance(n, ast.Constant) and isinstance(n.value, str)
            and n.value.startswith("cpu") for n in ast.walk(ctx.tree)):
        return  # a file that names its device: torch_rules reads it (a CPU: no copy)
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, LOOPS) or not _runs_a_step(ctx, loop):
            continue
        copies = _batch_copies(ctx, loop)
        for copy in copies:
            ctx.add("script.blocking-h2d-copy", "info", copy,
                    f"`{ast.unparse(copy)[:50]}` copies a batch of the loop at "
                    f"{ctx.line(loop.lineno)} to a device the caller chooses (a GPU when one "
                    "is used)", loader="no pinning DataLoader in this file")
        for c in _loader_calls(ctx) if copies else []:
            if not _pinned(ctx, c) and not any(k.arg is None for k in c.keywords):
                ctx.add("script.dataloader-no-pin-memory", "info", c,
                        f"no `pin_memory=True`; the loop at {ctx.line(loop.lineno)} copies "
                        f"batches with `{ast.unparse(copies[0])[:50]}`",
                        copy=ctx.line(copies[0].lineno))
