"""corpus_round17's dev forms, part two (issue 24, round 18; part one: ``round18_rules.py``),
under existing ids, all ``info``:

- ``with <x>.no_sync(...):`` around the backward only, the loss computed before it: DDP arms
  the all-reduce in the forward, which ran outside (``script.ddp-no-sync``; TParcollet and
  AsuMagic, speechbrain/speechbrain#1802, 2023);
- a loop that turns ``require_backward_grad_sync`` off module by module and ``break``s: the
  modules after the break keep syncing (``script.ddp-no-sync``; lucadellalib,
  speechbrain/speechbrain#2010, 2023);
- ``backward()`` in an inner (micro-batch) loop with the optimizer step after it, in a
  distributed file that never uses ``no_sync``: every micro-batch all-reduces
  (``script.ddp-no-sync``; eluzhnica, CarperAI/trlx#396, 2023);
- a ``tf.function`` called with a parameter its callers fill from a loop over a dict's keys:
  one trace per distinct Python value (``script.recompile-shapes``; jcformanek,
  instadeepai/Mava#391, 2022);
- an audio decoder (``librosa``, ``soundfile``) reached from a ``keras.utils.Sequence``'s
  ``__getitem__``: decoding runs in Python per example (``script.tfdata-python-in-pipeline``;
  WeidiXie, WeidiXie/VGG-Speaker-Recognition#39, 2019);
- ``jax.nn``/``jnp`` calls in a per-example helper whose results are gathered into a NumPy
  array by a function a loop calls: each example goes to the device and back
  (``script.jnp-in-data-loader``; gmittal, google/flax#1941, 2022);
- the outputs of a step a loop dispatches handed to a function that turns them into host
  values (``np.array(m[...])``, an f-string of ``m[...]``) in the same iteration: the host
  waits for the step before the next one is queued (``script.sync-in-step-loop``; rwitten,
  AI-Hypercomputer/maxtext#390, 2024).

Its DDP forms (``ddp-no-sync``) now live in :mod:`.forms_distributed`.
"""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import LOOPS, last_name, target_names, walk
from devicebench.script_check.context import Context
from devicebench.script_check.dataflow import callees
from devicebench.script_check.kinds import repeat_site

_DECODERS = ("librosa.load", "librosa.stft", "soundfile.read", "scipy.io.wavfile.read")


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _tf_functions(ctx: Context) -> set[str]:
    return {fn.name for fn in ast.walk(ctx.tree) if isinstance(fn, ast.FunctionDef) and any(
        ctx.resolve(d.func if isinstance(d, ast.Call) else d) == "tensorflow.function"
        for d in fn.decorator_list)}


def _key_loop_args(ctx: Context, fname: str) -> set[int]:
    out = set()
    for c in ctx.calls():
        if last_name(c) != fname:
            continue
        loop = ctx.enclosing(c, (ast.For,))
        if loop is None or not isinstance(loop.iter, ast.Call) or last_name(loop.iter) not in (
                "items", "keys"):
            continue
        key = target_names(loop.target.elts[0] if isinstance(loop.target, ast.Tuple)
                           else loop.target)
        out |= {i for i, a in enumerate(c.args) if isinstance(a, ast.Name) and a.id in key}
    return out


def _tf_function_per_key(ctx: Context) -> None:
    tfs = _tf_functions(ctx)
    for c in ctx.calls():
        if last_name(c) not in tfs:
            continue
        fn = ctx.enclosing(c, (ast.FunctionDef,))
        if fn is None or fn.name in tfs:
            continue
        params = [a.arg for a in fn.args.args if a.arg != "self"]
        keyed = {params[i] for i in _key_loop_args(ctx, fn.name) if i < len(params)}
        hit = next((a.id for a in c.args if isinstance(a, ast.Name) and a.id in keyed), None)
        if hit:
            ctx.add_late("script.recompile-shapes", "info", c,
                    f"`{hit}` is a dict key from the loop that calls `{fn.name}`: a Python "
                    "value, so the tf.function traces once per key", how="`tf.function`",
                    fixtext="move the loop over keys inside one tf.function, or pass "
                            "tensors instead of Python values")


def _decoder_in_sequence(ctx: Context) -> None:
    for cls in ctx.classes.values():
        if not any("Sequence" in ast.unparse(b) for b in cls.bases):
            continue
        get = next((f for f in cls.body if isinstance(f, ast.FunctionDef)
                    and f.name == "__getitem__"), None)
        if get is None:
            continue
        bodies = [get] + [fn for _, fn in callees(ctx, list(get.body))]
        for fn in bodies:
            for c in ctx.calls([fn]):
                if ctx.resolve(c.func) in _DECODERS:
                    ctx.add_late("script.tfdata-python-in-pipeline", "info", c,
                            f"`{ast.unparse(c.func)}` decodes in Python for every example "
                            f"`{cls.name}.__getitem__` loads")
                    break


def _jax_per_example_helper(ctx: Context) -> None:
    for fn in ast.walk(ctx.tree):
        if not isinstance(fn, ast.FunctionDef) or repeat_site(ctx, fn.body[0]) is None:
            continue
        for c in ctx.calls([fn]):
            if not (ctx.resolve(c.func) in ("numpy.array", "numpy.stack") and c.args
                    and isinstance(c.args[0], ast.ListComp)):
                continue
            inner = c.args[0].elt
            helper = ctx.funcs.get(last_name(inner)) if isinstance(inner, ast.Call) else None
            helper = helper or next((d for d in walk(fn.body) if isinstance(d, ast.FunctionDef)
                                     and isinstance(inner, ast.Call)
                                     and d.name == last_name(inner)), None)
            for r in walk(getattr(helper, "body", [])):
                if isinstance(r, ast.Return) and isinstance(r.value, ast.Call) and ctx.resolve(
                        r.value.func).startswith(("jax.nn.", "jax.numpy.")):
                    ctx.add_late("script.jnp-in-data-loader", "info", r.value,
                            f"per example, then gathered into NumPy by `{fn.name}`: each "
                            "example goes to the device and back",
                            api=ast.unparse(r.value.func))


def _step_outputs_read_in_iteration(ctx: Context) -> None:
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, LOOPS):
            continue
        outs = {n for s in loop.body if isinstance(s, ast.Assign) and isinstance(
            s.value, ast.Call) and ctx.is_step(s.value) for t in s.targets
            for n in target_names(t)}
        for c in walk(loop.body):
            if not (isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
                    and c.func.id in ctx.funcs):
                continue
            fn = ctx.funcs[c.func.id]
            params = [a.arg for a in fn.args.args]
            got = {params[i] for i, a in enumerate(c.args) if i < len(params)
                   and isinstance(a, ast.Name) and a.id in outs and a.id != "state"}
            for n in walk(fn.body):
                host = isinstance(n, ast.Call) and ctx.resolve(n.func) == "numpy.array" or (
                    isinstance(n, ast.FormattedValue))
                vals = n.args if isinstance(n, ast.Call) else [getattr(n, "value", n)]
                if host and any(isinstance(v, ast.Subscript) and _names(v) & got for v in vals):
                    ctx.add_late("script.sync-in-step-loop", "info", n,
                            f"`{fn.name}` turns the outputs of the step the loop at "
                            f"{ctx.line(loop.lineno)} just dispatched into host values: the "
                            "host waits for that step before queuing the next",
                            fixtext="read step N-1's metrics after step N is dispatched, "
                                    "or only on logging steps")
