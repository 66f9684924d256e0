"""corpus_round17's held-out misses written generally (issue 24, round 19, step 0): analysis
gaps, under existing ids, all ``info`` and added late (``Context.add_late``: none takes an
older warning's place).

- ``GradScaler()`` in a file whose autocast dtype is a name or attribute bound to a choice
  that includes ``torch.bfloat16`` (``x = torch.bfloat16 if c else torch.float16``), the
  scaler built (without ``enabled=``) under an amp switch that does not test for fp16
  (``script.gradscaler-bf16``;
  hnyu, HorizonRobotics/alf#1734, 2025);
- a Keras model called (``model(x, training=False)``) in a loop over a data set outside any
  ``tf.function``, and a call in that loop body fed with its outputs
  (``script.eager-custom-loop``; mingxingtan, google/automl#665, 2020);
- a call, in a loop, of a function of the file that builds and compiles a Keras model
  (``script.model-built-in-loop``; keras-team/keras#13710, 2020);
- ``torch.backends.cudnn.benchmark = True`` at module level (import time, the only form
  taken) in a file whose loop makes tensors (``torch.randn/zeros/ones/empty/rand``) with a
  size read from the loop variable (``script.cudnn-benchmark-varying``;
  kijai, Fannovel16/ComfyUI-MotionDiff#25, 2024);
- a ``DataLoader`` with ``num_workers`` built in a Trainer-style eval hook
  (``get_eval_dataloader``/``get_test_dataloader``: called for every evaluation) whose
  ``persistent_workers`` is not the constant ``True`` (``script.dataloader-workers-respawn``;
  zhiwuyazhe-z, modelscope/ms-swift#10036, 2026);
- in a file with a ``DataLoader`` reported unpinned, every other ``DataLoader`` without
  ``pin_memory=True`` (``script.dataloader-no-pin-memory``; Daankrol,
  open-edge-platform/physical-ai-studio#1082, 2026);
- an optax optimizer (``optax.adam(...)``, ...) built in a function a loop calls (or in the
  loop) and handed to a jitted function as a static argument: a new object, a new compile
  per build (``script.recompile-shapes``; dionhaefner, google-deepmind/optax#353, 2022);
- a torch-compiled function that calls ``opt.step()`` while an LR scheduler drives ``opt``
  and the lr is a Python float (any scheduler), or a tensor reset to floats by
  ``ReduceLROnPlateau``, or a tensor while ``OneCycleLR``/``CyclicLR`` (``cycle_momentum``)
  rewrite float betas/momentum each step (round 21, step 0: ``gap21_rules.cycles_momentum``)
  (``script.recompile-shapes``; janeyx99, pytorch/pytorch#120934,
  2024, pointing to #107076; filipviz, pytorch/pytorch#163093, 2025; patrick-botco,
  pytorch/pytorch#133898, 2024);
- ``jax.vmap``/``jax.grad``/``value_and_grad`` of a nested ``def`` applied inline in a
  function defined in a loop or called per iteration, outside jit: the transform of a new
  closure, run op by op, per call (``script.jit-in-loop``; mofeing, bsc-quantic/tn4ml#9, 2023);
- ``jax.debug.callback``/``jax.debug.print`` in code that is traced (jitted, called from
  it, or a ``lax`` loop body) (``script.jax-host-op-in-loop``; duncanwp,
  climate-analytics-lab/jax-gcm#827, 2026: no persistent cache entry with a callback);
- ``.item()`` inside a Flax module's ``__call__`` (``script.jax-host-op-in-loop``), and
  ``module.apply(...)`` of a Flax module of the file called in a loop with no ``jax.jit``
  of it anywhere (``script.hot-function-not-compiled``; maxidl,
  DarshanDeshpande/jax-models#3, 2022);
- a ``for`` over ``range`` of a size read from ``x.shape`` inside ``jax.jit`` whose body holds
  another ``range`` loop or ``.at[...]`` updates (``script.python-loop-in-jit``; shoyer,
  jax-ml/jax#2242, 2020);
- ``jax.random.permutation``/``choice`` in a loader's ``__iter__``/generator
  (``script.jnp-in-data-loader``; markean, markean/aimz#279, 2026);
- ``fit``/``fit_generator`` of a ``keras.utils.Sequence`` of the file without
  ``use_multiprocessing=True``: the workers are threads under the GIL
  (``script.dataloader-workers``; ybkscht, ybkscht/EfficientPose#38, 2022).

Sources: the threads above (https://github.com/<owner>/<repo>/issues/<n> or ``/pull/<n>``).
Its loader form (``_eval_hook_loaders``) now lives in :mod:`.forms_data`.
"""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import LOOPS, const, keyword, last_name, walk
from devicebench.script_check.context import Context
from devicebench.script_check.dataflow import callees
from devicebench.script_check.gap18_rules import _traced_functions
from devicebench.script_check.gap21_rules import cycles_momentum
from devicebench.script_check.loop_rules import _jitted_functions, _static_params
from devicebench.script_check.round18_rules import per_iteration

_FACTORIES = ("torch.randn", "torch.zeros", "torch.ones", "torch.empty", "torch.rand")
_TRANSFORMS = ("jax.vmap", "jax.grad", "jax.value_and_grad")
_DEBUG = ("jax.debug.callback", "jax.debug.print")
_RANDOM = ("jax.random.permutation", "jax.random.choice")


def unpinned_siblings(ctx: Context) -> None:
    """Late: every other unpinned ``DataLoader`` of a file with one reported unpinned."""
    if not any(k[0] == "script.dataloader-no-pin-memory" for k in ctx.found):
        return
    for c in ctx.calls():
        if last_name(c) == "DataLoader" and const(keyword(c, "pin_memory")) is not True:
            ctx.add_late("script.dataloader-no-pin-memory", "info", c,
                         "another DataLoader of this file, also without `pin_memory=True`",
                         copy="its batches go to the same GPU")


# -- torch ----------------------------------------------------------------------------------

def _bf16_choice_names(ctx: Context) -> set[str]:
    out = set()
    for n in ast.walk(ctx.tree):
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.IfExp) and any(
                ctx.resolve(m) == "torch.bfloat16" for m in ast.walk(n.value)):
            out |= {ast.unparse(t) for t in n.targets}
    return out


def _gradscaler_bf16_choice(ctx: Context) -> None:
    names = _bf16_choice_names(ctx)
    if not names or not any(last_name(c) == "autocast" and any(
            ast.unparse(k.value) in names for k in c.keywords if k.arg == "dtype")
            for c in ctx.calls()):
        return
    for c in ctx.calls():
        if last_name(c) != "GradScaler" or keyword(c, "enabled") is not None:
            continue
        # under an amp switch that is on for either dtype (an unconditional scaler is left
        # alone: a dtype that may be float16 keeps it, round 6)
        test = ctx.enclosing(c, (ast.If,))
        text = ast.unparse(test.test).lower() if test is not None else ""
        if text and const(test.test) is None and not any(w in text for w in ("16", "half")):
            ctx.add_late("script.gradscaler-bf16", "info", c,
                         "the autocast dtype is chosen between bfloat16 and float16, and "
                         "the scaler is built whichever it is")


def _cudnn_benchmark_at_import(ctx: Context) -> None:
    for s in ctx.tree.body:
        if not (isinstance(s, ast.Assign) and const(s.value) is True and any(
                ast.unparse(t).endswith("cudnn.benchmark") for t in s.targets)):
            continue
        for loop in ast.walk(ctx.tree):
            if not isinstance(loop, ast.For):
                continue
            var = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
            if any(isinstance(c, ast.Call) and ctx.resolve(c.func) in _FACTORIES and any(
                    isinstance(m, ast.Name) and m.id in var for a in c.args
                    for m in ast.walk(a)) for c in walk(loop.body)):
                ctx.add_late("script.cudnn-benchmark-varying", "info", s,
                             "set at import, for the whole process; the loop at "
                             f"{ctx.line(loop.lineno)} makes tensors sized by its items")
                return


def _optimizer_names(ctx: Context) -> set[str]:
    return {n for n, vs in ctx.assigns.items() for v in vs if isinstance(v, ast.Call)
            and ctx.resolve(v.func).startswith("torch.optim.")
            and "lr_scheduler" not in ctx.resolve(v.func)}


def _compiled_step_with_scheduler(ctx: Context) -> None:
    opts = _optimizer_names(ctx)
    scheds = [c for c in ctx.calls() if "lr_scheduler" in ctx.resolve(c.func)
              or last_name(c) in ("LambdaLR", "ReduceLROnPlateau", "CosineAnnealingLR",
                                  "StepLR", "OneCycleLR", "LinearLR", "ExponentialLR")]
    for fn in ctx.funcs.values():
        if not any(ctx.compiler(d) == "torch" for d in fn.decorator_list):
            continue
        stepped = {ast.unparse(c.func.value) for c in ctx.calls(fn.body)
                   if isinstance(c.func, ast.Attribute) and c.func.attr == "step"} & opts
        for opt in stepped:
            lr = [keyword(v, "lr") for v in ctx.assigns.get(opt, []) if isinstance(v, ast.Call)]
            tensor = any(isinstance(x, ast.Name) and any(
                isinstance(v, ast.Call) and ctx.resolve(v.func) == "torch.tensor"
                for v in ctx.assigns.get(x.id, [])) for x in lr)
            hit = [s for s in scheds if s.args and ast.unparse(s.args[0]) == opt and (
                not tensor or last_name(s) == "ReduceLROnPlateau"
                or cycles_momentum(ctx, s, opt))]
            if not hit:
                continue
            for call in ctx.calls():
                if (isinstance(call.func, ast.Name) and call.func.id == fn.name
                        and ctx.enclosing(call, LOOPS) is not None):
                    ctx.add_late("script.recompile-shapes", "info", call,
                                 f"`{fn.name}` compiles `{opt}.step()`, and "
                                 f"`{last_name(hit[0])}` writes a new Python-float "
                                 f"{'betas/momentum' if tensor else 'lr'} into `{opt}` : each "
                                 "new value is a constant of the graph",
                                 how="`torch.compile`",
                                 fixtext="wrap the lr in a tensor (`lr=torch.tensor(3e-4)`) "
                                         "with a scheduler that keeps it one "
                                         "(pytorch/pytorch#107076, #163093)")


# -- TensorFlow / Keras ---------------------------------------------------------------------

def _eager_eval_loop(ctx: Context) -> None:
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, ast.For) or ctx.is_compiled_scope(loop):
            continue
        for s in loop.body:
            if not (isinstance(s, ast.Assign) and isinstance(s.value, ast.Call)
                    and isinstance(s.value.func, ast.Name)
                    and const(keyword(s.value, "training")) is False):
                continue
            fn = s.value.func.id
            ctx.add_late("script.eager-custom-loop", "info", s,
                         f"`{fn}(..., training=False)` called per batch outside any "
                         "`tf.function`", fn=f"{fn}_step")
            outs = {n.id for t in s.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            for t in loop.body[loop.body.index(s) + 1:]:
                if isinstance(t, ast.Assign) and isinstance(t.value, ast.Call) and any(
                        isinstance(m, ast.Name) and m.id in outs for a in t.value.args
                        for m in ast.walk(a)):
                    ctx.add_late("script.eager-custom-loop", "info", t,
                                 "post-processing of the model's outputs, eagerly, per "
                                 "batch", fn=f"{fn}_step")


def _builds_keras_model(ctx: Context, name: str) -> bool:
    fn = ctx.funcs.get(name)
    return fn is not None and any(last_name(c) in ("Model", "Sequential") for c in
                                  ctx.calls(fn.body)) and any(
        last_name(c) == "compile" for c in ctx.calls(fn.body))


def _model_factory_in_loop(ctx: Context) -> None:
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, LOOPS):
            continue
        for c in walk(loop.body):
            if (isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
                    and _builds_keras_model(ctx, c.func.id)):
                ctx.add_late("script.model-built-in-loop", "info", c,
                             f"`{c.func.id}` builds and compiles a Keras model", method="fit")


def _sequence_threads(ctx: Context) -> None:
    seqs = {n for n, cls in ctx.classes.items() if any(last_name(b) == "Sequence"
                                                       for b in cls.bases)}
    made = {n for n, vs in ctx.assigns.items() for v in vs if isinstance(v, ast.Call)
            and isinstance(v.func, ast.Name) and v.func.id in seqs}
    for c in ctx.calls():
        if last_name(c) not in ("fit", "fit_generator") or not any(
                isinstance(a, ast.Name) and a.id in made
                for a in [*c.args, *(k.value for k in c.keywords)]):
            continue
        if const(keyword(c, "use_multiprocessing")) is not True:
            ctx.add_late("script.dataloader-workers", "info", c,
                         "a `keras.utils.Sequence` without `use_multiprocessing=True`: its "
                         "workers are threads, and the Python loading runs under the GIL",
                         work="the Sequence's `__getitem__` loads and augments in Python",
                         dev="GPU")


# -- JAX ------------------------------------------------------------------------------------

def _optimizer_static_arg(ctx: Context) -> None:
    for name, jit in _jitted_functions(ctx).items():
        fn = ctx.funcs.get(name)
        static = _static_params(fn, jit) if fn is not None else set()
        if fn is None or not static:
            continue
        params = [a.arg for a in fn.args.args]
        for c in ctx.calls():
            if not (isinstance(c.func, ast.Name) and c.func.id == name):
                continue
            for i, a in enumerate(c.args):
                if (i < len(params) and params[i] in static and isinstance(a, ast.Name)
                        and any(isinstance(v, ast.Call) and ctx.resolve(v.func).startswith(
                            "optax.") and per_iteration(ctx, v)
                            for v in ctx.assigns.get(a.id, []))):
                    ctx.add_late("script.recompile-shapes", "info", c,
                                 f"`{a.id}` is a new optax optimizer each time the code "
                                 f"around it runs, and a static argument of `{name}`: a "
                                 "new static value compiles again", how="`jax.jit`",
                                 fixtext="close over the optimizer (build it once at module "
                                         "level) or pass its state, not the object, as an "
                                         "argument (google-deepmind/optax#353)")


def _closure_transform_per_call(ctx: Context) -> None:
    for c in ctx.calls():
        if not (isinstance(c.func, ast.Call) and ctx.resolve(c.func.func) in _TRANSFORMS):
            continue
        fn = ctx.enclosing(c, (ast.FunctionDef,))
        if fn is None or ctx.is_compiled_scope(c):
            continue
        nested = {d.name for d in ast.walk(fn) if isinstance(d, ast.FunctionDef) and d is not fn}
        inner = [n.id for n in ast.walk(c.func) if isinstance(n, ast.Name) and n.id in nested]
        if inner and (ctx.enclosing(fn, LOOPS) is not None or per_iteration(ctx, fn)):
            ctx.add_late("script.jit-in-loop", "info", c,
                         f"`{ast.unparse(c.func)[:40]}` transforms `{inner[0]}`, a closure "
                         f"made anew each time `{fn.name}` is, and runs it uncompiled",
                         how="`jax.vmap`/`jax.grad` (of a new closure)", ctor="jax.jit",
                         reason="a closure defined per call is a new function each time: "
                                "nothing is cached, and without `jax.jit` it runs op by op "
                                "(bsc-quantic/tn4ml#9: most of the time went to this)")


def _debug_callback_traced(ctx: Context) -> None:
    roots = _traced_functions(ctx)
    roots += [d for r in list(roots) for d in ast.walk(r)
              if isinstance(d, ast.FunctionDef) and d is not r]
    roots += [fn for _, fn in callees(ctx, [b for r in roots for b in r.body], depth=2)]
    seen: set[int] = set()
    for fn in roots:
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        for c in ctx.calls(fn.body):
            if ctx.resolve(c.func) in _DEBUG:
                ctx.add_late("script.jax-host-op-in-loop", "info", c,
                             f"in `{fn.name}`, which is traced: a host callback in the "
                             "compiled program (no persistent compilation-cache entry, and a "
                             "device-to-host round trip per call)", op=ctx.resolve(c.func))


def _flax_modules(ctx: Context) -> set[str]:
    return {n for n, cls in ctx.classes.items() if any(
        ctx.resolve(b).startswith("flax.") for b in cls.bases)}


def _flax_item_and_apply(ctx: Context) -> None:
    mods = _flax_modules(ctx)
    for name in mods:
        for m in ctx.classes[name].body:
            if isinstance(m, ast.FunctionDef) and m.name == "__call__":
                for c in ctx.calls(m.body):
                    if isinstance(c.func, ast.Attribute) and c.func.attr == "item" \
                            and not c.args:
                        ctx.add_late("script.jax-host-op-in-loop", "info", c,
                                     f"`.item()` in `{name}.__call__`, which every apply "
                                     "runs: a device-to-host read each call", op=".item()")
    insts = {n for n, vs in ctx.assigns.items() for v in vs if isinstance(v, ast.Call)
             and isinstance(v.func, ast.Name) and v.func.id in mods}
    jitted = any(ctx.compiler(c.func) == "jax" and c.args and ast.unparse(c.args[0]).endswith(
        ".apply") for c in ctx.calls())
    for c in ctx.calls():
        if (not jitted and isinstance(c.func, ast.Attribute) and c.func.attr == "apply"
                and isinstance(c.func.value, ast.Name) and c.func.value.id in insts
                and ctx.enclosing(c, LOOPS) is not None and not ctx.is_compiled_scope(c)):
            ctx.add_late("script.hot-function-not-compiled", "info", c,
                         f"`{ast.unparse(c.func)}` of a Flax module, in a loop, never jitted",
                         framework="JAX", reason="an un-jitted `apply` dispatches the model "
                         "op by op on every call (DarshanDeshpande/jax-models#3)")


def _shape_loops_in_jit(ctx: Context) -> None:
    for name in _jitted_functions(ctx):
        fn = ctx.funcs.get(name)
        if fn is None:
            continue
        dims = {t.id for s in walk(fn.body) if isinstance(s, ast.Assign)
                and isinstance(s.value, ast.Attribute | ast.Subscript)
                and "shape" in ast.unparse(s.value) for x in s.targets
                for t in ast.walk(x) if isinstance(t, ast.Name)}
        for loop in walk(fn.body):
            if not (isinstance(loop, ast.For) and isinstance(loop.iter, ast.Call)
                    and last_name(loop.iter) == "range" and any(
                        isinstance(m, ast.Name) and m.id in dims
                        for a in loop.iter.args for m in ast.walk(a))):
                continue
            inner = any(isinstance(n, ast.For) for n in walk(loop.body)) or any(
                isinstance(n, ast.Attribute) and n.attr == "at" for n in walk(loop.body))
            if inner and ctx.enclosing(loop, (ast.For,)) is None:
                ctx.add_late("script.python-loop-in-jit", "info", loop,
                             f"in `{name}`, which is jitted: the bound comes from a shape, so "
                             "the loop is unrolled into one copy of its body per index",
                             n=f"`{ast.unparse(loop.iter)}`")


def _random_in_loader(ctx: Context) -> None:
    for fn in ctx.funcs.values():
        if not (fn.name == "__iter__" or any(isinstance(n, ast.Yield) for n in walk(fn.body))):
            continue
        for c in ctx.calls(fn.body):
            if ctx.resolve(c.func) in _RANDOM:
                ctx.add_late("script.jnp-in-data-loader", "info", c,
                             f"in `{fn.name}`, once per epoch: the whole index permutation is "
                             "computed on the device and copied back", api=ctx.resolve(c.func))
