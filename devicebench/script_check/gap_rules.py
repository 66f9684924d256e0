"""Forms the earlier rules did not read (issue 24, round 12's step 0), grouped from the
seen misses (corpus_round10's held-out half and the earlier seen halves) by the analysis
gap behind them, not by case:

* the kind of a value a compiled function receives -- a list (or dict/set) literal at a
  ``static_argnums``/``static_argnames`` position of a ``jax.jit`` function is not hashed
  by value: the JAX of 2020 silently keyed its cache on the object's identity (a new
  list each call: a compile each call; mattjj, jax-ml/jax#4712), later releases raise
  ``ValueError: Non-hashable static arguments are not supported``;
* methods a framework drives -- a LightningDataModule's/LightningModule's
  ``train_dataloader()`` returns the loader ``Trainer.fit`` iterates once per epoch on the
  device the Trainer names (boreshkinai/delta-interpolator#3), though the file shows no
  loop over it;
* the device named through a library object -- Accelerate's ``accelerator.device`` is the
  GPU the training process was given (kohya-ss/sd-scripts#1894), though the file names no
  ``"cuda"``;
* a clock read inside a conditional (``if step >= 1: elapsed += perf_counter() - t0``,
  the usual warm-up skip) is the timer's closing reading
  (``timing_rules._clock_pairs``; bigscience-workshop/petals#456).

Two kinds no rule knew, written as the general form their threads name:

* ``next(iter(loader))`` on every step: a new iterator (worker processes started again,
  a new shuffle) to take its first batch (SakanaAI/continuous-thought-machines#19, 2025:
  iterating one iterator was "2-3x faster");
* pandas indexing (``.iloc``/``.loc``/``.at``/``.iat``) in a Dataset's per-item method:
  tens of microseconds of pandas machinery per item (braindecode/braindecode#89, 2020:
  "more than factor 7" from NumPy arrays made once).
"""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import const, keyword, last_name, walk
from devicebench.script_check.context import Context, rule
from devicebench.script_check.form_rules import dataset_item_methods
from devicebench.script_check.kinds import repeat_site

_UNHASHABLE = (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)


def _static_slots(ctx: Context, jit: ast.Call, fn: ast.FunctionDef | None) -> set[int | str]:
    """Positions (ints) and parameter names (strs) a ``jax.jit(...)`` call marks static."""
    out: set[int | str] = set()
    nums, names = const(keyword(jit, "static_argnums")), const(keyword(jit, "static_argnames"))
    for v in nums if isinstance(nums, tuple | list) else [nums]:
        if isinstance(v, int):
            out.add(v)
    for v in names if isinstance(names, tuple | list) else [names]:
        if isinstance(v, str):
            out.add(v)
    if fn is not None:
        params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
        out |= {params.index(s) for s in out if isinstance(s, str) and s in params}
        out |= {params[i] for i in out if isinstance(i, int) and 0 <= i < len(params)}
    return out


def jitted_statics(ctx: Context) -> dict[str, set[int | str]]:
    """Names of ``jax.jit`` functions -> their static positions and parameter names:
    ``@partial(jax.jit, static_argnums=...)``, ``@jax.jit(static_argnames=...)`` and
    ``f = jax.jit(g, static_argnums=...)``."""
    out: dict[str, set[int | str]] = {}
    for fn in ctx.funcs.values():
        for dec in fn.decorator_list:
            if isinstance(dec, ast.Call) and ctx.compiler(dec) == "jax":
                slots = _static_slots(ctx, dec, fn)  # type: ignore[arg-type]
                if slots:
                    out[fn.name] = slots
    for name, values in ctx.assigns.items():
        for v in values:
            if isinstance(v, ast.Call) and v.args and ctx.compiler(v.func) == "jax":
                target = v.args[0]
                fn = ctx.funcs.get(target.id) if isinstance(target, ast.Name) else None
                slots = _static_slots(ctx, v, fn)  # type: ignore[arg-type]
                if slots:
                    out[name] = slots
    return out


def _unhashable(ctx: Context, node: ast.AST) -> bool:
    if isinstance(node, _UNHASHABLE):
        return True
    values = ctx.assigns.get(node.id, []) if isinstance(node, ast.Name) else []
    return bool(values) and all(isinstance(v, _UNHASHABLE) for v in values)


@rule("script.static-arg-unhashable",
      "a list (or dict) passed as a static argument of a jitted function",
      "static arguments are part of jit's cache key and must hash by value; a list does not: "
      "JAX releases of 2020 keyed the cache on the object's identity, so a new but equal list "
      "on every call traced and compiled the function every time (jax-ml/jax#4712, mattjj); "
      "later releases raise `ValueError: Non-hashable static arguments are not supported`",
      "pass a tuple (`{as_tuple}`), or make the argument a traced array if its values vary")
def static_arg_unhashable(ctx: Context) -> None:
    if not ctx.uses("jax"):
        return
    statics = jitted_statics(ctx)
    for call in ctx.calls():
        if not isinstance(call.func, ast.Name) or call.func.id not in statics:
            continue
        slots = statics[call.func.id]
        given = [(i, a) for i, a in enumerate(call.args) if i in slots] + [
            (k.arg, k.value) for k in call.keywords if k.arg in slots]
        bad = next((a for _, a in given if _unhashable(ctx, a)), None)
        if bad is None or repeat_site(ctx, call) is None:
            continue
        fix = ast.unparse(bad)
        fix = f"tuple({fix})" if not isinstance(bad, ast.List) else f"({fix[1:-1]},)"
        ctx.add("script.static-arg-unhashable", "warning", call,
                f"`{ast.unparse(bad)[:40]}` is given to `{call.func.id}` at a static "
                "position, on every iteration", as_tuple=fix)


def _loaderish(ctx: Context, node: ast.AST) -> bool:
    """A DataLoader (a name bound to ``DataLoader(...)`` or named like one)."""
    if isinstance(node, ast.Call):
        return last_name(node).endswith(("DataLoader", "Loader"))
    text = ast.unparse(node).lower()
    values = ctx.assigns.get(node.id, []) if isinstance(node, ast.Name) else []
    return "loader" in text or any(_loaderish(ctx, v) for v in values
                                   if isinstance(v, ast.Call))


@rule("script.iterator-per-step",
      "a new DataLoader iterator on every step, to take its first batch",
      "`iter(loader)` starts a pass over the loader: a new sampler order and, with "
      "`num_workers > 0`, new worker processes that prefetch batches thrown away at once; "
      "the step waits for that start-up every time (SakanaAI/continuous-thought-machines#19: "
      "one iterator used until exhausted was 2-3x faster)",
      "make the iterator once and re-make it only when it is exhausted: `it = iter(loader)` "
      "before the loop, then `try: batch = next(it)` / `except StopIteration: it = "
      "iter(loader); batch = next(it)`")
def iterator_per_step(ctx: Context) -> None:
    for call in ctx.calls():
        inner = call.args[0] if last_name(call) == "next" and call.args else None
        if not (isinstance(inner, ast.Call) and last_name(inner) == "iter" and inner.args
                and isinstance(call.func, ast.Name) and isinstance(inner.func, ast.Name)):
            continue
        if not _loaderish(ctx, inner.args[0]) or repeat_site(ctx, call) is None:
            continue
        ctx.add("script.iterator-per-step", "warning", call,
                f"`{ast.unparse(call)[:50]}` runs on every iteration")


_PANDAS_INDEXERS = ("iloc", "loc", "iat", "at")


@rule("script.pandas-in-getitem",
      "pandas indexing in a Dataset's per-item method",
      "the DataLoader calls this method once per item; a pandas `.iloc`/`.loc` lookup builds "
      "a Series through pandas' indexing machinery (tens of microseconds), often more than "
      "the item's own work (braindecode/braindecode#89: \"more than factor 7\" faster with "
      "NumPy arrays made once)",
      "convert the columns the item needs to NumPy arrays (or tensors) once in `__init__` "
      "(`self.targets = df[\"target\"].to_numpy()`) and index those per item")
def pandas_in_getitem(ctx: Context) -> None:
    if not ctx.uses("pandas") and not ctx.uses("torch"):
        return
    for method in dataset_item_methods(ctx):
        for n in walk(method.body):
            if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Attribute) and (
                    n.value.attr in _PANDAS_INDEXERS):
                ctx.add("script.pandas-in-getitem", "info", n,
                        f"`{ast.unparse(n)[:50]}` in `{method.name}`")
                break


_LIGHTNING_BASES = ("LightningDataModule", "LightningModule")
_LOADER_HOOKS = ("train_dataloader",)


def lightning_loaders(ctx: Context) -> list[ast.Call]:
    """``DataLoader(...)`` calls a Lightning class's ``train_dataloader()`` returns, in a
    file that hands them to ``Trainer.fit`` (which iterates the loader once per epoch)."""
    if not any(last_name(c) == "Trainer" or last_name(c) == "fit" and keyword(
            c, "datamodule") is not None for c in ctx.calls()):
        return []
    out = []
    for cls in ctx.classes.values():
        if not any(last_name(b) in _LIGHTNING_BASES for b in cls.bases):
            continue
        for m in cls.body:
            if isinstance(m, ast.FunctionDef) and m.name in _LOADER_HOOKS:
                out += [r.value for r in walk(m.body) if isinstance(r, ast.Return)
                        and isinstance(r.value, ast.Call) and last_name(r.value) == "DataLoader"]
    return out + [c for c in fit_loaders(ctx) if c not in out]  # trainer.fit(m, loader)


def lightning_epochs(ctx: Context) -> int | None:
    """The Trainer's ``max_epochs`` (None: not a literal; Lightning's default is 1000)."""
    for c in ctx.calls():
        if last_name(c) == "Trainer":
            epochs = keyword(c, "max_epochs")
            return 1000 if epochs is None else const(epochs)  # type: ignore[return-value]
    return None


def lightning_gpu(ctx: Context) -> bool:
    """The Trainer trains on a CUDA GPU: ``accelerator="gpu"``/``"cuda"`` or the older
    ``gpus=``; or, with Lightning >= 2.0 (the ``lightning`` package), the default
    ``accelerator="auto"`` (the GPU when there is one), also for a Trainer built from a
    config (``hydra.utils.instantiate(config.trainer)``) whose ``fit`` gets a datamodule."""
    lightning2 = ctx.uses("lightning")
    trainers = [c for c in ctx.calls() if last_name(c) == "Trainer"]
    for c in trainers:
        acc = keyword(c, "accelerator")
        return const(acc) in ("gpu", "cuda") or keyword(c, "gpus") is not None or (
            lightning2 and (acc is None or const(acc) == "auto"))
    return lightning2 and any(last_name(c) == "fit" and keyword(c, "datamodule") is not None
                              for c in ctx.calls())


def accelerate_device(ctx: Context) -> bool:
    """Batches are moved to Accelerate's ``accelerator.device`` (the process's GPU in a
    training launched by ``accelerate``), and its ``backward`` runs the step."""
    text = "\n".join(ctx.lines)
    return "accelerator.device" in text and "accelerator.backward(" in text


def fit_loaders(ctx: Context) -> list[ast.Call]:
    """``DataLoader(...)`` calls bound to a name the file hands to Lightning's
    ``trainer.fit(model, train_dataloaders=name)`` (or as its second argument; round 13,
    qiuqiao/SOFA#20)."""
    given: set[str] = set()
    for c in ctx.calls():
        if last_name(c) != "fit" or not isinstance(c.func, ast.Attribute):
            continue
        v = keyword(c, "train_dataloaders") or (c.args[1] if len(c.args) > 1 else None)
        if isinstance(v, ast.Name):
            given.add(v.id)
    if not given or not any(last_name(c) == "Trainer" for c in ctx.calls()):
        return []
    return [s.value for s in ast.walk(ctx.tree) if isinstance(s, ast.Assign)
            and isinstance(s.value, ast.Call) and last_name(s.value) == "DataLoader"
            and any(isinstance(t, ast.Name) and t.id in given for t in s.targets)]
