"""Data-loader forms (issue 24, rounds 19, 22, 23 and 25; run by :func:`.forms.run_forms`):
loaders left without workers or pinned memory, loaders rebuilt (and their workers
re-spawned) per evaluation, data sets whose items loop or read pandas rows; the sources
of each form are in the corpus READMEs of the round named in :mod:`.forms`.

Round 23's dev forms (formerly ``round23_rules.py``), as that module described them:

corpus_round22's dev forms (issue 24, round 23), under existing ids, all ``info`` and
added late (``Context.add_late``: none takes an older warning's place). They extend calls
followed (a loader built in a function and iterated per epoch by its caller; keyword
dictionaries followed to every caller; a Dataset method reached from ``__getitem__``; a
helper defined or called inside a loop) and loop finding (per-parameter optimizer loops,
per-datum loops over ``range(x.shape[0])``, comprehensions over tensors):

- ``TrainingArguments(...)`` without ``dataloader_num_workers`` in a file that builds a
  ``Trainer``: every batch is loaded in the main process (``script.dataloader-workers``;
  axolotl-ai-cloud/axolotl#2632);
- ``DataLoader(..., **kw)`` in a function whose callers never pass ``num_workers`` /
  ``pin_memory`` (``script.dataloader-workers``, ``script.dataloader-no-pin-memory``;
  materialyzeai/matgl#781);
- ``DataLoader(Cls(...))`` without ``num_workers`` where the file's ``Cls.__getitem__`` (or
  a method it calls on ``self``) runs a Python loop (``script.dataloader-workers``;
  WorldCereal/presto-worldcereal#9);
- subscripts of a pandas row (``.iloc``/``.loc`` in ``__getitem__``, or a parameter
  annotated ``pd.Series``) inside a loop of a method ``__getitem__`` calls
  (``script.pandas-in-getitem``; WorldCereal/presto-worldcereal#9);
- a ``DataLoader`` with workers and no ``persistent_workers`` returned by a function whose
  caller uses the returned loader inside a loop (``script.dataloader-workers-respawn``;
  mvandenhi/SCBM#6);
- ``torch.set_grad_enabled(True)`` in ``validation_step``/``test_step``/``predict_step``,
  and ``grad(..., create_graph=True)`` fixed true in a ``forward`` (``script.inference-grad``;
  materialyzeai/matgl#781, #783);
- ``accelerator.gather(...)`` in a ``*Trainer`` subclass's loss or step method: a
  collective, read back with ``.item()``, per step (``script.sync-in-step-loop``;
  huggingface/trl#3838);
- ``.item()`` of the elements of a comprehension over a tensor (``script.sync-in-step-loop``;
  huggingface/trl#4888);
- ``<list>.index(...)`` as a comprehension's element: a linear search per item
  (``script.per-sample-python-loop``; materialyzeai/matgl#781);
- a ``for p in group["params"]`` loop of an ``Optimizer`` subclass's ``step`` doing several
  in-place tensor ops per parameter (``script.foreach-not-used``;
  karpathy/nanochat commit 22a71aa);
- ``with <x>.no_backward_sync(m)``/``m.no_sync()`` around the backward only, with ``m``
  called before it in the same loop body (``script.ddp-no-sync``; Lightning-AI/lit-llama#357);
- ``torch.tensor(...)`` without ``device=`` then ``.to(...)`` in a function defined inside a
  loop, or called in one (``script.host-built-in-forward``; huggingface/diffusers#9642);
- ``lax.map``/``lax.scan`` of a closure defined in the same un-jitted function, which code
  a loop runs calls: the closure is new each call, so it is traced and compiled each call
  (``script.jit-in-loop``; markean/aimz#275);
- a Python loop calling a local ``@jit`` function inside a method that a function handed to
  ``vmap`` calls: under ``vmap`` the loop is unrolled into one traced program per iteration
  count (``script.recompile-shapes``; probml/dynamax#462);
- ``x = [a * b for a, b in zip(...)]`` then ``torch.cat(x)``/``torch.stack(x)``: one small
  op per element where one broadcast op does it (``script.per-sample-python-loop``;
  materialyzeai/matgl#783);
- ``for n in range(N)`` with ``N = x.shape[0]``/``len(x)`` whose body indexes ``x[n]`` and
  calls ``autograd.grad`` (``script.per-sample-python-loop``; f-dangel/curvlinops#85).

Sources: the threads above (https://github.com/<owner>/<repo>/issues/<n>, ``/pull/<n>`` or
``/commit/<hash>``).
"""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import LOOPS, const, keyword, last_name, walk
from devicebench.script_check.context import Context

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_WORKERS = "script.dataloader-workers"
_EVAL_HOOKS = ("get_eval_dataloader", "get_test_dataloader")


def _is_loader(c: ast.Call) -> bool:
    return last_name(c) == "DataLoader"


def _training_args_no_workers(ctx: Context) -> None:
    if not any(last_name(c) in ("Trainer", "SFTTrainer") or last_name(c).endswith("Trainer")
               for c in ctx.calls()):
        return
    for c in ctx.calls():
        if last_name(c) == "TrainingArguments" and keyword(c, "dataloader_num_workers") is None \
                and not any(k.arg is None for k in c.keywords):
            ctx.add_late(_WORKERS, "info", c, dev="the GPU",
                         work="loading and collating each batch (TrainingArguments sets no "
                              "dataloader_num_workers, so the Trainer uses 0; "
                              "axolotl-ai-cloud/axolotl#2632)")


def _star_kwargs_loader(ctx: Context) -> list[tuple[ast.AST, ast.Call]]:
    out = []
    for fn in ast.walk(ctx.tree):
        if isinstance(fn, _FUNCS) and fn.args.kwarg is not None:
            for c in ctx.calls(fn.body):
                if _is_loader(c) and any(k.arg is None and isinstance(k.value, ast.Name)
                                         and k.value.id == fn.args.kwarg.arg
                                         for k in c.keywords):
                    out.append((fn, c))
    return out


def _loader_kwargs_never_set(ctx: Context) -> None:
    for fn, c in _star_kwargs_loader(ctx):
        callers = [k for k in ctx.calls() if isinstance(k.func, ast.Name)
                   and k.func.id == fn.name]
        if not callers or any(any(kw.arg is None for kw in k.keywords) for k in callers):
            continue
        if keyword(c, "num_workers") is None and all(
                keyword(k, "num_workers") is None for k in callers):
            ctx.add_late(_WORKERS, "info", c, dev="the GPU",
                         work=f"loading each batch (no caller of `{fn.name}` passes "
                              "num_workers; materialyzeai/matgl#781)")
        if keyword(c, "pin_memory") is None and all(
                keyword(k, "pin_memory") is None for k in callers):
            ctx.add_late("script.dataloader-no-pin-memory", "info", c,
                         copy=f"every batch (no caller of `{fn.name}` passes pin_memory)")


def _dataset_classes(ctx: Context) -> dict[str, ast.ClassDef]:
    return {n.name: n for n in ast.walk(ctx.tree) if isinstance(n, ast.ClassDef)
            and any(isinstance(f, _FUNCS) and f.name == "__getitem__" for f in n.body)}


def _getitem_methods(cls: ast.ClassDef) -> list[ast.AST]:
    methods = {f.name: f for f in cls.body if isinstance(f, _FUNCS)}
    get = methods["__getitem__"]
    called = {c.func.attr for c in ast.walk(get) if isinstance(c, ast.Call)
              and isinstance(c.func, ast.Attribute) and isinstance(c.func.value, ast.Name)
              and c.func.value.id == "self"}
    return [get] + [methods[n] for n in sorted(called) if n in methods]


def _loader_of_looping_dataset(ctx: Context) -> None:
    classes = _dataset_classes(ctx)
    for c in ctx.calls():
        if not (_is_loader(c) and c.args and isinstance(c.args[0], ast.Call)
                and isinstance(c.args[0].func, ast.Name) and c.args[0].func.id in classes
                and keyword(c, "num_workers") is None
                and not any(k.arg is None for k in c.keywords)):
            continue
        cls = classes[c.args[0].func.id]
        if any(isinstance(s, LOOPS) for f in _getitem_methods(cls) for s in ast.walk(f)):
            ctx.add_late(_WORKERS, "info", c, dev="the GPU",
                         work=f"`{cls.name}.__getitem__`'s Python loops, in the main process "
                              "(no num_workers; WorldCereal/presto-worldcereal#9)")


def _pandas_row_in_getitem_helper(ctx: Context) -> None:
    for cls in _dataset_classes(ctx).values():
        methods = _getitem_methods(cls)
        rows = {t.id for s in ast.walk(methods[0]) if isinstance(s, ast.Assign)
                and isinstance(s.value, ast.Subscript)
                and isinstance(s.value.value, ast.Attribute)
                and s.value.value.attr in ("iloc", "loc") for t in s.targets
                if isinstance(t, ast.Name)}
        for fn in methods[1:]:
            params = {a.arg for a in fn.args.args if a.annotation is not None
                      and last_name(a.annotation) == "Series"}
            params |= {a.arg for a in fn.args.args[1:]} if rows and any(
                isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                and c.func.attr == fn.name and any(isinstance(v, ast.Name) and v.id in rows
                                                   for v in c.args)
                for c in ast.walk(methods[0])) else set()
            for loop in walk(fn.body):
                if not isinstance(loop, LOOPS):
                    continue
                for s in loop.body:
                    if any(isinstance(e, ast.Subscript) and isinstance(e.value, ast.Name)
                           and e.value.id in params for e in ast.walk(s)):
                        ctx.add_late("script.pandas-in-getitem", "info", s)


def _returned_loader_respawn(ctx: Context) -> None:
    for fn in ast.walk(ctx.tree):
        if not isinstance(fn, _FUNCS):
            continue
        made = {}
        for s in walk(fn.body):
            if isinstance(s, ast.Assign) and isinstance(s.value, ast.Call) \
                    and _is_loader(s.value) and len(s.targets) == 1 \
                    and isinstance(s.targets[0], ast.Name):
                made[s.targets[0].id] = s.value
        rets = [r.value for r in walk(fn.body) if isinstance(r, ast.Return)
                and isinstance(r.value, ast.Tuple)]
        if not made or len(rets) != 1:
            continue
        order = [e.id if isinstance(e, ast.Name) else None for e in rets[0].elts]
        for a in ast.walk(ctx.tree):
            if not (isinstance(a, ast.Assign) and isinstance(a.value, ast.Call)
                    and isinstance(a.value.func, ast.Name) and a.value.func.id == fn.name
                    and isinstance(a.targets[0], ast.Tuple)
                    and len(a.targets[0].elts) == len(order)):
                continue
            scope = ctx.enclosing(a, _FUNCS) or ctx.tree
            for inner, outer in zip(a.targets[0].elts, order, strict=True):
                c = made.get(outer or "")
                if not (isinstance(inner, ast.Name) and inner.id != "_" and c is not None):
                    continue
                w = keyword(c, "num_workers")
                if w is None or const(w) == 0 or keyword(c, "persistent_workers") is not None:
                    continue
                if any(isinstance(n, ast.Name) and n.id == inner.id
                       and ctx.enclosing(n, LOOPS) is not None
                       and ctx.enclosing(ctx.enclosing(n, LOOPS), _FUNCS) is (
                           scope if scope is not ctx.tree else None)
                       for n in ast.walk(scope)):
                    ctx.add_late("script.dataloader-workers-respawn", "info", c,
                                 workers=ast.unparse(w))


def _eval_hook_loaders(ctx: Context) -> None:
    for c in ctx.calls():
        fn = ctx.enclosing(c, (ast.FunctionDef,))
        if (last_name(c) == "DataLoader" and fn is not None and fn.name in _EVAL_HOOKS
                and keyword(c, "num_workers") is not None
                and const(keyword(c, "num_workers")) not in (0, None)
                or last_name(c) == "DataLoader" and fn is not None and fn.name in _EVAL_HOOKS
                and isinstance(keyword(c, "num_workers"), ast.Attribute)):
            if const(keyword(c, "persistent_workers")) is not True:
                ctx.add_late("script.dataloader-workers-respawn", "info", c,
                             f"built in `{fn.name}`, which the trainer calls for every "
                             "evaluation: its workers start afresh each time",
                             workers=ast.unparse(keyword(c, "num_workers")))


def _false_default(fn: ast.AST, name: str) -> bool:
    args = fn.args.args
    defaults = dict(zip([a.arg for a in args[len(args) - len(fn.args.defaults):]],
                        fn.args.defaults, strict=True))
    return name in defaults and const(defaults[name]) is False


def _pin_memory_param_off(ctx: Context) -> None:
    funcs = ctx.funcs
    for c in ctx.calls():
        p = keyword(c, "pin_memory")
        fn = ctx.enclosing(c, _FUNCS)
        if last_name(c) != "DataLoader" or not isinstance(p, ast.Name) or fn is None \
                or not _false_default(fn, p.id):
            continue
        ok = True
        for call in ctx.calls():
            if last_name(call) != fn.name:
                continue
            v = keyword(call, p.id)
            g = ctx.enclosing(call, _FUNCS)
            if v is not None and const(v) is not False and not (
                    isinstance(v, ast.Name) and g is not None and g.name in funcs
                    and _false_default(g, v.id)):
                ok = False
        if ok:
            ctx.add_late("script.dataloader-no-pin-memory", "info", c,
                         f"`pin_memory={p.id}`, and `{p.id}` defaults to False in "
                         f"`{fn.name}` and in every caller that passes it",
                         copy="its batches are copied to the GPU (allenai/OLMoASR#23)")


def _small_default_params(fn: ast.AST) -> set[str]:
    args = fn.args  # type: ignore[attr-defined]
    pos = args.args[len(args.args) - len(args.defaults):]
    pairs = list(zip(pos, args.defaults, strict=True)) + [
        (a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None]
    return {a.arg for a, d in pairs if isinstance(const(d), int) and 0 < const(d) <= 4}


def _capped_workers(ctx: Context) -> None:
    for fn in ast.walk(ctx.tree):
        if not isinstance(fn, _FUNCS):
            continue
        small = _small_default_params(fn)
        if not small:
            continue
        passed = {k.value.id for c in ctx.calls(fn.body) for k in c.keywords
                  if k.arg in ("workers", "num_workers") and isinstance(k.value, ast.Name)}
        for s in walk(fn.body):
            if not (isinstance(s, ast.Assign) and len(s.targets) == 1
                    and isinstance(s.targets[0], ast.Name) and s.targets[0].id in passed
                    and isinstance(s.value, ast.Call)):
                continue
            caps = [x for x in list(s.value.args) + [k.value for k in s.value.keywords]
                    if isinstance(x, ast.Name) and x.id in small]
            if caps:
                ctx.add_late("script.dataloader-workers", "info", s,
                             f"the worker count is capped by `{caps[0].id}`, which defaults to "
                             "a few processes: loading stays behind the device on a machine "
                             "with more cores",
                             work="the data generator loads and preprocesses in Python",
                             dev="GPU")
